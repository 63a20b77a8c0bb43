"""A request's deadline: when the request being sent must be answered by.

Set by the LM wrapper around each request (its timeout, or the run's max_wall_s if that comes
first); read by an engine that runs the model itself (the embedded one), which stops generating
there. A served model has its own request timeout (LiteLLM's `timeout`).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("verifirst_request_deadline", default=None)


def request_deadline() -> float | None:
    """The deadline of the request being sent (a time.monotonic() value), or None."""
    return _deadline.get()


@contextlib.contextmanager
def deadline_for_request(deadline: float | None) -> Iterator[None]:
    """Set request_deadline() for the requests sent inside the block.

    Args:
        deadline: a time.monotonic() value, or None for none.
    """
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)
