"""What each item's own LM calls cost and took: tokens, USD and latency per item, per candidate.

`ItemCosts` collects every LM call a program makes while one item is evaluated (a DSPy callback
installed in the item's thread for its duration, see `ItemCosts.scope`), and prices it with the
run's prices (`verifirst.lm.spend.Prices`: the user's table, then LiteLLM's bundled map).

A call served from the LM cache is priced as if it had been sent: with the tokens and latency of
the same request when this process sent it (an optimizer's call that an evaluation repeats), else
with tokens estimated as characters / 4 (as the spend meter estimates a prompt) and no latency.
The summaries say how many calls were cached and how many of those were estimated.

An item's latency is the sum of its calls' latencies (a program's calls run one after another).
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

from dspy.utils.callback import BaseCallback

from verifirst.lm.spend import CHARS_PER_TOKEN, Prices

_current: contextvars.ContextVar["list[CallRecord] | None"] = contextvars.ContextVar("verifirst_item_calls",
                                                                                     default=None)


@dataclass
class CallRecord:
    """One LM call of an item.

    Args:
        model: the model string the call was priced as.
        prompt_tokens, completion_tokens: reported by the model, or recalled/estimated for a cached call.
        latency_s: seconds the request took when sent (None: cached, never seen sent).
        cached: served from the LM cache.
        estimated: tokens estimated from characters (a cached call this process never sent).
        error: the call raised (no tokens).
    """

    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float | None
    cached: bool = False
    estimated: bool = False
    error: bool = False


def _request_key(model: str, inputs: dict) -> str:
    """A key for one request: the model and what was sent (messages or prompt, and the call's options)."""
    body = json.dumps([model, inputs.get("prompt"), inputs.get("messages"),
                       {k: v for k, v in (inputs.get("kwargs") or {}).items() if k != "rollout_id"}],
                      sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def _chars(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_chars(v) for k, v in value.items() if k in ("content", "text"))
    if isinstance(value, (list, tuple)):
        return sum(_chars(v) for v in value)
    return len(str(value))


def _tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


class _Recorder(BaseCallback):
    """The DSPy callback: every LM call's start and end; kept under the item its thread evaluates."""

    def __init__(self, owner: "ItemCosts"):
        super().__init__()
        self.owner = owner
        self._open: dict[str, tuple] = {}
        self._lock = threading.Lock()

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict) -> None:
        model = str(getattr(instance, "model", "unknown"))
        with self._lock:
            self._open[call_id] = (model, inputs, time.perf_counter())

    def on_lm_end(self, call_id: str, outputs: Any, exception: Exception | None = None) -> None:
        with self._lock:
            opened = self._open.pop(call_id, None)
        if opened is None:
            return
        model, inputs, t0 = opened
        latency = time.perf_counter() - t0
        calls = _current.get()
        if calls is None:  # outside any item (an optimizer's call): remembered, for a cache hit later
            if exception is None:
                self.owner._record(model, inputs, outputs, latency)
            return
        if exception is not None:
            calls.append(CallRecord(model, 0, 0, latency, error=True))
            return
        calls.append(self.owner._record(model, inputs, outputs, latency))


def _sent_usage() -> dict:
    """The usage DSPy recorded for this thread's last call (AccountedLM keeps it per thread): {} on a
    cache hit, which DSPy reports without usage."""
    from verifirst import lm as _lm

    tls = _lm._tls
    return dict(getattr(tls, "usage", None) or {}) if getattr(tls, "recorded", False) else {}


class ItemCosts:
    """Per-item LM calls of evaluations, by key (e.g. (candidate, split, item id)). Thread-safe.

    Args:
        prices: the run's prices (a model without one is counted at no cost and listed as unpriced).
    """

    def __init__(self, prices: Prices | None = None):
        self.prices = prices or Prices()
        self.items: dict[Any, list[CallRecord]] = {}
        self._sent: dict[str, tuple[int, int, float]] = {}  # request key -> tokens and latency when sent
        self._lock = threading.Lock()
        self._recorder = _Recorder(self)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Inside (this thread, and threads DSPy starts from it): every LM call is seen, so that a
        request sent outside any item (an optimizer's) prices an evaluation's cache hit of it."""
        import dspy

        hooks = list(dspy.settings.get("callbacks") or [])
        if self._recorder in hooks:
            yield
            return
        with dspy.context(callbacks=[*hooks, self._recorder]):
            yield

    @contextlib.contextmanager
    def scope(self, key: Any) -> Iterator[list[CallRecord]]:
        """Record the LM calls made inside (this thread, and threads started with its context) under
        `key`. Every attempt of a retried item counts: each was paid for.

        Args:
            key: what the calls are kept under.
        """
        calls: list[CallRecord] = []
        with self._lock:
            self.items[key] = calls
        token = _current.set(calls)
        try:
            with self.watching():
                yield calls
        finally:
            _current.reset(token)

    def _record(self, model: str, inputs: dict, outputs: Any, latency: float) -> CallRecord:
        key = _request_key(model, inputs)
        usage = _sent_usage()
        if usage:
            p = int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
            c = int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)
            with self._lock:
                self._sent[key] = (p, c, latency)
            return CallRecord(model, p, c, latency)
        with self._lock:
            seen = self._sent.get(key)
        if seen is not None:  # served from the cache: priced as when it was sent
            return CallRecord(model, seen[0], seen[1], seen[2], cached=True)
        sent_chars = _chars(inputs.get("messages")) + _chars(inputs.get("prompt"))
        return CallRecord(model, _tokens(sent_chars), _tokens(_chars(outputs)), None, cached=True, estimated=True)

    def item(self, key: Any) -> dict:
        """One item's calls summed: usd (None when a model has no price), tokens, latency_s, calls,
        cached, estimated.

        Args:
            key: the item's key.
        """
        calls = self.items.get(key, [])
        usd: float | None = 0.0
        for c in calls:
            cost = self.prices.cost(c.model, c.prompt_tokens, c.completion_tokens)
            usd = None if cost is None or usd is None else usd + cost
        return {"usd": usd, "tokens": sum(c.prompt_tokens + c.completion_tokens for c in calls),
                "latency_s": sum(c.latency_s or 0.0 for c in calls), "calls": len(calls),
                "cached": sum(c.cached for c in calls), "estimated": sum(c.estimated for c in calls),
                "unpriced": sorted({c.model for c in calls if self.prices.per_token(c.model) is None})}

    def summary(self, keys: list) -> dict:
        """Mean USD and tokens per item and latency per item (p50, p90) over `keys`.

        Args:
            keys: the items' keys (one split of one candidate).
        """
        import numpy as np

        per = [self.item(k) for k in keys]
        n = len(per)
        if not n:
            return {"n_items": 0, "usd_per_item": None, "tokens_per_item": None, "latency_p50_s": None,
                    "latency_p90_s": None, "calls": 0, "cached_calls": 0, "estimated_calls": 0, "unpriced": []}
        usd = [p["usd"] for p in per]
        lat = [p["latency_s"] for p in per]
        cached = sum(p["cached"] for p in per)
        return {"n_items": n, "usd_per_item": None if any(u is None for u in usd) else float(sum(usd) / n),
                "tokens_per_item": sum(p["tokens"] for p in per) / n,
                "latency_p50_s": float(np.percentile(lat, 50)), "latency_p90_s": float(np.percentile(lat, 90)),
                "calls": sum(p["calls"] for p in per), "cached_calls": cached,
                "estimated_calls": sum(p["estimated"] for p in per),
                "unpriced": sorted({m for p in per for m in p["unpriced"]}),
                **({"note": "cached calls priced as if sent"} if cached else {})}
