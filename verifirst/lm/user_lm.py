"""A user's own LM object, counted as verifirst's own LMs count theirs.

`vf.optimize(..., models={"task": dspy.LM(...)})`, a DummyLM, or the LM set with dspy.configure:
its calls did not pass through `AccountedLM`, so they were neither admitted against the run's spend
limits (nor journaled in RUN_DIR/calls.jsonl) nor in the usage a report gives. `metered(lm, role)`
wraps such an object: each call is admitted before it is sent (a cap refuses it, nothing sent),
settled with the usage DSPy recorded in the LM's history (an empty usage is DSPy's cache hit), and
counted in the process usage ledger under its role. Everything else (model, kwargs, history, its
adapter: `adapter_for` still treats it as the user's) is the user's LM's own.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import dspy

from verifirst.lm import USAGE, AccountedLM, current_split, mark_lm_error
from verifirst.lm import spend as _spend

_COUNTED = "_verifirst_counted"  # set on a history entry this wrapper has read the usage of
_OWN = frozenset({"inner", "role", "_lock"})


def metered(lm: Any, role: str = "task") -> Any:
    """`lm` counted and admitted under `role`: verifirst's own LMs and None as they are, any other
    dspy.BaseLM wrapped.

    Args:
        lm: the LM object (dspy.LM, DummyLM, any dspy.BaseLM) or None.
        role: task, reflection, teacher or judge.
    """
    if lm is None or isinstance(lm, (AccountedLM, MeteredLM)) or not isinstance(lm, dspy.BaseLM):
        return lm
    return MeteredLM(lm, role)


class MeteredLM(dspy.BaseLM):
    """A user's dspy.BaseLM whose calls are admitted, journaled and counted (see the module).

    Args:
        lm: the user's LM.
        role: the role its calls are counted under.
    """

    def __init__(self, lm: Any, role: str = "task"):  # noqa: D107 - no BaseLM state of its own: lm's is used
        self.__dict__.update(inner=lm, role=role, _lock=threading.Lock())

    def __getattr__(self, name: str) -> Any:
        if name in _OWN or name.startswith("__"):  # copy/pickle probe an instance before __init__
            raise AttributeError(name)
        return getattr(self.__dict__["inner"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            self.__dict__[name] = value
        else:
            setattr(self.inner, name, value)

    def __repr__(self) -> str:
        return f"metered({self.inner!r}, role={self.role!r})"

    # What BaseLM defines on the class would read this wrapper, not the user's (perhaps overridden) LM.
    supports_function_calling = property(lambda self: self.inner.supports_function_calling)
    supports_reasoning = property(lambda self: self.inner.supports_reasoning)
    supports_response_schema = property(lambda self: self.inner.supports_response_schema)
    supported_params = property(lambda self: self.inner.supported_params)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.forward(*args, **kwargs)

    async def aforward(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.aforward(*args, **kwargs)

    def inspect_history(self, n: int = 1) -> Any:
        return self.inner.inspect_history(n)

    def update_history(self, entry: dict) -> None:
        self.inner.update_history(entry)

    def dump_state(self) -> dict:
        return self.inner.dump_state()

    def copy(self, **kwargs: Any) -> "MeteredLM":
        return MeteredLM(self.inner.copy(**kwargs), self.role)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        admitted, t0 = self._admit(args, kwargs), time.perf_counter()
        try:
            out = self.inner(*args, **kwargs)
        except BaseException as e:
            self._failed(admitted, e, t0)
            raise
        self._settle(admitted, args, kwargs, t0)
        return out

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        admitted, t0 = self._admit(args, kwargs), time.perf_counter()
        try:
            out = await self.inner.acall(*args, **kwargs)
        except BaseException as e:
            self._failed(admitted, e, t0)
            raise
        self._settle(admitted, args, kwargs, t0)
        return out

    def _admit(self, args: tuple, kwargs: dict) -> Any:
        """(meter, ticket): admitted against the active spend meter before anything is sent
        (BudgetExceeded refuses it); None without a meter."""
        meter = _spend.active_meter()
        if meter is None:
            return None
        own = getattr(self.inner, "kwargs", None) or {}
        max_tokens = kwargs.get("max_tokens") or own.get("max_tokens") or own.get("max_completion_tokens")
        ticket = meter.admit(self.role, str(getattr(self.inner, "model", "") or "unknown"),
                             _spend.prompt_chars(args, kwargs), max_tokens)
        _spend.set_current_ticket(ticket)
        return meter, ticket

    def _failed(self, admitted: Any, exc: BaseException, t0: float) -> None:
        if admitted is not None:
            meter, ticket = admitted
            _spend.set_current_ticket(None)
            meter.settle(ticket, None, None, cache_hit=False)
        if isinstance(exc, Exception):
            mark_lm_error(exc)
            USAGE.record_attempt(self.role, current_split(), failed=True)
            USAGE.record(self.role, current_split(), usage=None, cache_hit=False, error=True,
                         wall_s=time.perf_counter() - t0)

    def _settle(self, admitted: Any, args: tuple, kwargs: dict, t0: float) -> None:
        entry = self._entry(args, kwargs)
        usage = entry.get("usage") if entry is not None else None
        cache_hit = usage is not None and not usage  # DSPy empties the usage of a reply from its cache
        if not cache_hit:
            USAGE.record_attempt(self.role, current_split(), failed=False)
        USAGE.record(self.role, current_split(), usage=dict(usage or {}), cache_hit=cache_hit, error=False,
                     wall_s=time.perf_counter() - t0)
        if admitted is None:
            return
        meter, ticket = admitted
        _spend.set_current_ticket(None)
        if cache_hit:
            meter.settle(ticket, None, None, cache_hit=True)
        elif usage:
            p = usage.get("prompt_tokens") or usage.get("input_tokens") or 0
            c = usage.get("completion_tokens") or usage.get("output_tokens") or 0
            meter.settle(ticket, int(p), int(c), cache_hit=False)
        else:  # sent, no history entry to read (history off): its worst case, as reserved
            meter.settle(ticket, ticket.prompt_tokens, ticket.completion_tokens, cache_hit=False)

    def _entry(self, args: tuple, kwargs: dict) -> dict | None:
        """The history entry DSPy wrote for this call: the newest one not read yet whose messages (or
        prompt) are this call's (threads may share the LM)."""
        messages = kwargs.get("messages")
        prompt = kwargs.get("prompt", args[0] if args and isinstance(args[0], str) else None)
        history = getattr(self.inner, "history", None) or []
        with self._lock:
            for entry in reversed(history[-256:]):
                if not isinstance(entry, dict) or entry.get(_COUNTED):
                    continue
                if (messages is not None and entry.get("messages") == messages) or \
                        (messages is None and entry.get("prompt") == prompt):
                    entry[_COUNTED] = True
                    return entry
        return None
