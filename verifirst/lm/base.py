"""What the LM modules share, below both lm (the factory) and lm_router (endpoint lists): model
spec checks, the default request timeout, and the process usage ledger with its split attribution.

verifirst.lm re-exports every public name here (`from verifirst.lm import USAGE` keeps working).
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterator

from verifirst.core.errors import ConfigError
from verifirst.lm._deadline import deadline_for_request, request_deadline  # noqa: F401

# Before any litellm import (check_spec imports it): no network fetch of the cost map.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

LOCAL_SPECS = ("local", "local/smollm2-135m", "smollm2")
DEFAULT_TIMEOUT_S = 60.0  # per request (the embedded model's too); a role's `timeout_s` overrides it
_split: contextvars.ContextVar[str | None] = contextvars.ContextVar("verifirst_split", default=None)
_phase = ["other"]  # process-wide fallback: optimizer threads do not inherit our contextvars


def current_split() -> str:
    return _split.get() or _phase[0]


@contextlib.contextmanager
def usage_phase(name: str) -> Iterator[None]:
    """Attribute every LM call in the process (any thread) to `name` unless a split is set."""
    old, _phase[0] = _phase[0], name
    try:
        yield
    finally:
        _phase[0] = old


@contextlib.contextmanager
def usage_split(name: str) -> Iterator[None]:
    """Attribute LM calls made inside (this context and threads started from it) to a split."""
    token = _split.set(name)
    try:
        yield
    finally:
        _split.reset(token)


@dataclass
class UsageCounts:
    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    attempts: int = 0  # requests sent to the model, retries included (cache hits are none)
    failed_attempts: int = 0
    unusable: int = 0  # replies that came back but did not parse into the signature

    @property
    def lm_calls(self) -> int:
        """Calls that reached the model (not served from cache)."""
        return self.calls - self.cache_hits - self.errors

    def as_dict(self) -> dict:
        return {"calls": self.calls, "lm_calls": self.lm_calls, "cache_hits": self.cache_hits,
                "errors": self.errors, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "wall_s": round(self.wall_s, 3),
                "attempts": self.attempts, "failed_attempts": self.failed_attempts, "unusable": self.unusable}


@dataclass
class UsageLedger:
    """Counts per (role, split), and per (role, endpoint) for roles served by several endpoints.
    Thread-safe."""

    counts: dict = field(default_factory=lambda: defaultdict(UsageCounts))
    endpoints: dict = field(default_factory=lambda: defaultdict(UsageCounts))  # (role, endpoint) -> counts
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, role: str, split: str, *, usage: dict | None, cache_hit: bool, error: bool,
               wall_s: float) -> None:
        with self.lock:
            c = self.counts[(role, split)]
            c.calls += 1
            c.wall_s += wall_s
            if error:
                c.errors += 1
                return
            if cache_hit:
                c.cache_hits += 1
                return
            usage = usage or {}
            c.prompt_tokens += int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
            c.completion_tokens += int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)

    def record_attempt(self, role: str, split: str, *, failed: bool) -> None:
        """One request sent to the model (a retry is another); cache hits are none."""
        with self.lock:
            c = self.counts[(role, split)]
            c.attempts += 1
            c.failed_attempts += int(failed)

    def record_unusable(self, role: str, split: str) -> None:
        """A reply that came back but did not parse (empty, truncated, malformed, off-schema)."""
        with self.lock:
            self.counts[(role, split)].unusable += 1

    def total(self, role: str | None = None, split: str | None = None) -> UsageCounts:
        out = UsageCounts()
        with self.lock:
            for (r, s), c in self.counts.items():
                if (role is None or r == role) and (split is None or s == split):
                    out.calls += c.calls
                    out.cache_hits += c.cache_hits
                    out.errors += c.errors
                    out.prompt_tokens += c.prompt_tokens
                    out.completion_tokens += c.completion_tokens
                    out.wall_s += c.wall_s
                    out.attempts += c.attempts
                    out.failed_attempts += c.failed_attempts
                    out.unusable += c.unusable
        return out

    def as_dict(self) -> dict:
        with self.lock:
            rows = {f"{r}/{s}": c.as_dict() for (r, s), c in sorted(self.counts.items())}
        rows["total"] = self.total().as_dict()
        return rows

    def record_endpoint(self, role: str, endpoint: str, *, usage: Any = None, error: bool) -> None:
        """One attempt sent to one endpoint of a routed role (a retry on another endpoint is another)."""
        with self.lock:
            c = self.endpoints[(role, endpoint)]
            c.calls += 1
            if error:
                c.errors += 1
                return
            get = usage.get if isinstance(usage, dict) else (lambda k, d=None: getattr(usage, k, d))
            c.prompt_tokens += int(get("prompt_tokens") or 0)
            c.completion_tokens += int(get("completion_tokens") or 0)

    def endpoints_as_dict(self) -> dict:
        """{role: {endpoint: {calls, ok, errors, prompt_tokens, completion_tokens}}} for routed roles."""
        out: dict = {}
        with self.lock:
            for (role, ep), c in sorted(self.endpoints.items()):
                out.setdefault(role, {})[ep] = {"calls": c.calls, "ok": c.calls - c.errors, "errors": c.errors,
                                                "prompt_tokens": c.prompt_tokens,
                                                "completion_tokens": c.completion_tokens}
        return out

    def reset(self) -> None:
        with self.lock:
            self.counts.clear()
            self.endpoints.clear()


USAGE = UsageLedger()


def is_local(spec: str) -> bool:
    return spec.strip().lower() in LOCAL_SPECS


def check_spec(spec: str, field_name: str = "model") -> None:
    """Refuse a model string LiteLLM cannot route, before any work starts."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError("empty model spec", field=field_name,
                          expected="'local' or a LiteLLM model string like openai/gpt-4o-mini")
    if is_local(spec):
        from verifirst.lm._local_engine import require_local_extra  # the `local` extra may be absent

        return require_local_extra(field_name)
    if "/" not in spec:
        raise ConfigError(f"model {spec!r} names no provider", field=field_name,
                          expected="provider/model, e.g. openai/gpt-4o-mini, hosted_vllm/<m>, "
                                   "ollama_chat/<m>, or 'local'")
    import litellm

    litellm.suppress_debug_info = True  # else it prints a provider list before the error
    try:
        litellm.get_llm_provider(spec)
    except Exception as e:  # litellm raises BadRequestError for unknown providers
        raise ConfigError(f"LiteLLM cannot route model {spec!r}: {str(e).splitlines()[0][:200]}",
                          field=field_name,
                          expected="a LiteLLM provider prefix (openai/, hosted_vllm/, ollama_chat/, ...) "
                                   "or 'local'") from None
