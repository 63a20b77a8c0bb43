"""Fail-fast for the judge verbs (`judge`, `monitor`, `calibrate --baseline`, the champion re-scored), as
`verifirst run` has it (verifirst.loop.evaluation): when the first calls to a model all failed and none
succeeded, the endpoint is down and the rest are not sent; each item not asked says so."""
from __future__ import annotations

FIRST_CALLS_ALL_FAILED = 5  # as loop.evaluation's rule: this many failed first calls stop the rest


def not_sent(first_error: str, n: int = FIRST_CALLS_ALL_FAILED) -> str:
    """The error of an item that was not asked because the endpoint failed every first call.

    Args:
        first_error: the first call's error.
        n: how many first calls failed.
    """
    return f"not sent: the first {n} calls all failed (fail-fast; first error: {first_error})"
