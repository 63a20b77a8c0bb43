"""Model specs -> configured dspy.LM, per role, with usage accounting.

A spec is any LiteLLM/DSPy model string (`openai/gpt-4o-mini`, `hosted_vllm/<m>` with
api_base, `ollama_chat/<m>`) or `local`: SmolLM2-135M-Instruct run in-process.

A failing model never looks like a result: every request has a timeout (DEFAULT_TIMEOUT_S unless
the role sets `timeout_s`; the embedded model's LOCAL_TIMEOUT_S, and a run's max_wall_s ends its
generation in flight), every attempt is counted (retries too), and only a reply that parsed
into the signature stays in the response cache: an empty, truncated, malformed or off-schema
reply is evicted, so a fixed endpoint is asked again.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from verifirst.core.errors import ConfigError  # noqa: E402
# Spec checks and the usage ledger live in lm_base, below this module and lm_router (both use
# them); they stay importable from here.
from verifirst.lm.base import (  # noqa: E402,F401
    DEFAULT_TIMEOUT_S,
    LOCAL_SPECS,
    USAGE,
    UsageCounts,
    UsageLedger,
    check_spec,
    current_split,
    deadline_for_request,
    is_local,
    usage_phase,
    usage_split,
)
from verifirst.lm.router import RouterEngine, parse_endpoints  # noqa: E402
from verifirst.lm import spend as _spend  # noqa: E402
from verifirst.lm import cache_store as _cache_store  # noqa: E402
from verifirst.lm.output_format import field_structure, placeholder_copies  # noqa: E402
from verifirst.core.redaction import install_log_redaction, register_env_secrets, register_secrets  # noqa: E402

ROLES = ("task", "reflection", "teacher", "judge")
# Output caps for the embedded model: short answers for programs, room for prompts when proposing.
LOCAL_MAX_TOKENS = {"task": 384, "judge": 256, "reflection": 384, "teacher": 256}
# The embedded model's default request timeout: far above any reply of LOCAL_MAX_TOKENS on a busy
# 2-core machine, so it only ends a generation that hangs; a generation is deterministic, so one
# that timed out is not retried.
LOCAL_TIMEOUT_S = 600.0
_sleep = time.sleep  # tests replace it to see the backoff between attempts


class UnusableReply(Exception):
    """A reply that cannot be a result: no choices, or cut at max_tokens (evicted from the cache)."""


_tls = threading.local()
LM_ERROR_MARK = "_verifirst_lm_error"  # set on every exception an AccountedLM call raised


def mark_lm_error(exc: BaseException) -> BaseException:
    """Mark `exc` as raised by an LM call, so that evaluation tells it from a bug in the program.

    Args:
        exc: the exception an LM call raised; returned, marked where it takes attributes.
    """
    try:
        setattr(exc, LM_ERROR_MARK, True)
    except Exception:  # an exception type that refuses attributes: its class may still say it
        pass
    return exc


def _is_lm_error_type(exc: BaseException) -> bool:
    """DSPy's LM errors, its adapter's parse errors, and replies this module refused."""
    from dspy.utils.exceptions import AdapterParseError, LMError

    return isinstance(exc, (LMError, AdapterParseError, UnusableReply))


def is_lm_error(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from or while handling, came from an LM call:
    marked by AccountedLM, or one of DSPy's LM or parse error types. Anything else a program
    raised is a bug of the program.

    Args:
        exc: the exception a program call raised.
    """
    seen: set[int] = set()
    stack = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if getattr(e, LM_ERROR_MARK, False) or _is_lm_error_type(e):
            return True
        stack += [e.__cause__, e.__context__]
    return False


def retry_delay(exc: Exception, attempt: int) -> float:
    """Seconds before retry `attempt + 1`: the provider's Retry-After when sane, else 1, 2, 4, 8 s."""
    hint = getattr(exc, "retry_after", None)
    if isinstance(hint, (int, float)) and 0 <= hint <= 60:
        return float(hint)
    return float(min(2 ** attempt, 8))


def _finish_reasons(response: Any) -> list:
    """finish_reason of each choice of a history entry's response (native list or OpenAI-shaped)."""
    if isinstance(response, (list, tuple)):
        return [getattr(r, "finish_reason", None) for r in response]
    if hasattr(response, "finish_reason"):  # one native lm15 Response
        return [response.finish_reason]
    choices = getattr(response, "choices", None)
    if choices is None and isinstance(response, dict):
        choices = response.get("choices")
    return [c.get("finish_reason") if isinstance(c, dict) else getattr(c, "finish_reason", None)
            for c in choices or []]


class AccountedLM(dspy.LM):
    """dspy.LM that records every call in the process ledger under its role and split, and every
    attempt: it retries transient failures itself (DSPy's own retry loop is off) so that each
    request sent is counted, failed or not."""

    def __init__(self, model: str, *, role: str = "task", spec: str | None = None, num_retries: int = 3,
                 count_attempts: bool = True, request_timeout_s: float | None = None, **kwargs):
        """Args (besides dspy.LM's):
            role: the role usage is counted under.
            spec: the model spec the user gave.
            num_retries: retries of a failed call, each attempt counted.
            count_attempts: False where the engine counts attempts itself (LiteLLM's Router).
            request_timeout_s: seconds one request may take, for an engine that runs the model
                itself (the embedded one, through request_deadline); a served model's timeout is
                LiteLLM's `timeout`.
        """
        super().__init__(model, num_retries=0, **kwargs)
        self.role = role
        self.spec = spec or model
        self.retries = num_retries
        self.count_attempts = count_attempts  # False where the engine counts them (LiteLLM's Router)
        self.request_timeout_s = request_timeout_s

    def update_history(self, entry):
        _tls.usage = entry.get("usage") or {}
        _tls.recorded = True
        _tls.finish = _finish_reasons(entry.get("response"))
        super().update_history(entry)

    def __call__(self, *args, **kwargs):
        from dspy.utils.exceptions import is_retryable_lm_error

        t0 = time.perf_counter()
        for attempt in range(getattr(self, "retries", 0) + 1):
            _tls.recorded = False
            _tls.finish = []
            meter = _spend._ACTIVE
            ticket = None
            if meter is not None:  # raises BudgetExceeded before anything is sent or recorded
                ticket = self._admit(meter, args, kwargs)
            try:
                with deadline_for_request(self._deadline(ticket)):
                    out = super().__call__(*args, **kwargs)
            except BaseException as e:
                if meter is not None:
                    self._settle(meter, ticket, failed=True)
                if not isinstance(e, Exception):
                    raise
                mark_lm_error(e)
                if self.count_attempts:
                    USAGE.record_attempt(self.role, current_split(), failed=True)
                if attempt < self.retries and is_retryable_lm_error(e):
                    _sleep(retry_delay(e, attempt))
                    continue
                USAGE.record(self.role, current_split(), usage=None, cache_hit=False, error=True,
                             wall_s=time.perf_counter() - t0)
                raise
            usage = _tls.usage if getattr(_tls, "recorded", False) else {}
            if meter is not None:
                self._settle(meter, ticket, failed=False)
            # DSPy empties usage on a cache hit; our engines always report tokens.
            if usage and self.count_attempts:
                USAGE.record_attempt(self.role, current_split(), failed=False)
            USAGE.record(self.role, current_split(), usage=usage, cache_hit=not usage, error=False,
                         wall_s=time.perf_counter() - t0)
            return out

    async def acall(self, *args, **kwargs):
        """As DSPy's, admitted against the active spend meter (no retries or ledger of our own)."""
        meter = _spend._ACTIVE
        if meter is None:
            try:
                return await super().acall(*args, **kwargs)
            except Exception as e:
                mark_lm_error(e)
                raise
        ticket = self._admit(meter, args, kwargs)
        _tls.recorded = False
        try:
            with deadline_for_request(self._deadline(ticket)):
                out = await super().acall(*args, **kwargs)
        except BaseException as e:
            self._settle(meter, ticket, failed=True)
            if isinstance(e, Exception):
                mark_lm_error(e)
            raise
        self._settle(meter, ticket, failed=False, cache_unseen=True)  # history: this thread, after the await
        return out

    def _deadline(self, ticket) -> float | None:
        """When this request must be answered by: its own timeout, or the spend meter's wall cap if
        that comes first (a model run in-process stops generating there)."""
        ends = [t for t in (getattr(ticket, "deadline", None),) if t is not None]
        if getattr(self, "request_timeout_s", None):
            ends.append(time.monotonic() + self.request_timeout_s)
        return min(ends) if ends else None

    def _admit(self, meter, args: tuple, kwargs: dict):
        """Admit one request against the spend meter (its worst case: the prompt's characters / 4
        tokens in, max_tokens x n out), and make it this thread's current ticket."""
        asked = getattr(getattr(args[0], "config", None), "max_tokens", None) if args else None  # a Request
        max_tokens = asked or kwargs.get("max_tokens") or self.kwargs.get("max_tokens") or self.kwargs.get(
            "max_completion_tokens")
        n = kwargs.get("n") or self.kwargs.get("n") or 1
        if max_tokens is not None and isinstance(n, int) and n > 1:
            max_tokens *= n
        engine = getattr(self, "engine", None)
        model = tuple(ep.model for ep in engine.endpoints) if isinstance(engine, RouterEngine) else self.model
        ticket = meter.admit(self.role, model, _spend.prompt_chars(args, kwargs), max_tokens)
        _spend.set_current_ticket(ticket)
        _tls.cache_hit = False
        return ticket

    def _settle(self, meter, ticket, *, failed: bool, cache_unseen: bool = False) -> None:
        """Settle the request with what DSPy recorded: its usage, a cache hit (no usage, read from
        the cache), or, where usage was not reported for a request that was sent, its reservation.
        cache_unseen: the cache was read in another thread (async calls): no usage is a cache hit."""
        _spend.set_current_ticket(None)
        if failed:
            return meter.settle(ticket, None, None, cache_hit=False)
        usage = _tls.usage if getattr(_tls, "recorded", False) else {}
        if usage:
            p = usage.get("prompt_tokens") or usage.get("input_tokens") or 0
            c = usage.get("completion_tokens") or usage.get("output_tokens") or 0
            return meter.settle(ticket, int(p), int(c), cache_hit=False)
        if cache_unseen or getattr(_tls, "cache_hit", False) or not isinstance(dspy.cache, ParsedOnlyCache):
            return meter.settle(ticket, None, None, cache_hit=True)
        # sent, but no usage came back (or history is off): count the worst case reserved
        meter.settle(ticket, ticket.prompt_tokens, ticket.completion_tokens, cache_hit=False)


_LOCAL_ENGINE = None
_LOCAL_LOCK = threading.Lock()


def local_engine():
    """The one embedded-model engine of this process (model weights load once)."""
    global _LOCAL_ENGINE
    from verifirst.lm._local_engine import LlamaCppEngine, require_local_extra

    require_local_extra()  # also when an engine is loaded already: the answer must not depend on call order
    with _LOCAL_LOCK:
        if _LOCAL_ENGINE is None:
            _LOCAL_ENGINE = LlamaCppEngine()
        return _LOCAL_ENGINE


def check_timeout(value: Any, field_name: str) -> float:
    """A request timeout in seconds: a positive number, else ConfigError naming the field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise ConfigError(f"timeout_s {value!r} is not valid", field=field_name,
                          expected="a positive number of seconds, e.g. 60")
    return float(value)


def make_lm(spec: str | list = "local", *, role: str = "task", temperature: float | None = None,
            max_tokens: int | None = None, api_base: str | None = None, api_key: str | None = None,
            cache: bool = True, num_retries: int = 3, timeout_s: float | None = None,
            **kwargs: Any) -> AccountedLM:
    """One configured dspy.LM for a role. `local` is the embedded SmolLM2-135M.

    Args:
        spec: a LiteLLM model string, `local`, or a list of endpoints (model strings or dicts with
            model, api_base, api_key, weight, fallback) served through LiteLLM's Router.
        role: task, reflection, teacher or judge (usage is counted under it).
        num_retries: retries of a failed call (on another endpoint, for an endpoint list); each
            attempt is counted.
        timeout_s: seconds one request may take (default DEFAULT_TIMEOUT_S; the embedded model's
            LOCAL_TIMEOUT_S); a hanging endpoint costs at most timeout_s x (num_retries + 1) per
            call. The embedded model stops generating at it, or at the run's max_wall_s if that
            comes first, and the request fails with a timeout (not retried).
    """
    if role not in ROLES:
        raise ConfigError(f"unknown LM role {role!r}", field="models", expected=", ".join(ROLES))
    if timeout_s is not None:
        timeout_s = check_timeout(timeout_s, f"models.{role}.timeout_s")
    # known before any call: a key that leaks into an error or a log line is masked there too
    register_secrets({"api_key": api_key, **kwargs, "endpoints": spec if isinstance(spec, list) else []})
    register_env_secrets()
    install_log_redaction()
    if isinstance(spec, list):
        if api_base or api_key:
            raise ConfigError("api_base/api_key given beside an endpoint list", field=f"models.{role}",
                              expected="api_base and api_key on each endpoint")
        if timeout_s is not None:
            raise ConfigError("timeout_s given beside an endpoint list", field=f"models.{role}.timeout_s",
                              expected="timeout_s on the endpoints themselves")
        return make_routed_lm(spec, role=role, temperature=temperature, max_tokens=max_tokens, cache=cache,
                              num_retries=num_retries, **kwargs)
    check_spec(spec, field_name=f"models.{role}")
    if is_local(spec):
        return AccountedLM("local/smollm2-135m-instruct", role=role, spec="local", engine=local_engine(),
                           temperature=0.0 if temperature is None else temperature,
                           max_tokens=max_tokens or LOCAL_MAX_TOKENS[role], cache=cache,
                           num_retries=num_retries, request_timeout_s=timeout_s or LOCAL_TIMEOUT_S, **kwargs)
    extra = dict(kwargs)
    if api_base:
        extra["api_base"] = api_base
    if api_key:
        extra["api_key"] = api_key
    extra["timeout"] = timeout_s or DEFAULT_TIMEOUT_S
    return AccountedLM(spec, role=role, spec=spec, temperature=temperature, max_tokens=max_tokens,
                       cache=cache, num_retries=num_retries, **extra)


def make_routed_lm(endpoints: list, *, role: str = "task", temperature: float | None = None,
                   max_tokens: int | None = None, cache: bool = True, num_retries: int | None = None,
                   **kwargs: Any) -> AccountedLM:
    """One dspy.LM for a role served by several endpoints through LiteLLM's Router.

    Args:
        endpoints: model strings or dicts (model, api_base, api_key, weight, fallback; router settings
            routing, num_retries, allowed_fails, cooldown_s, timeout_s; temperature, max_tokens).
        role: the role the calls are counted under, in total and per endpoint.
        num_retries: Router retries when no endpoint gives num_retries (None: 3).
    """
    from dataclasses import replace

    if kwargs:
        raise ConfigError(f"unknown option {sorted(kwargs)[0]!r} for an endpoint list", field=f"models.{role}",
                          expected="options on the endpoints themselves")
    eps, settings, shared = parse_endpoints(role, endpoints)
    if num_retries is not None and not any(isinstance(e, dict) and "num_retries" in e for e in endpoints):
        settings = replace(settings, num_retries=num_retries)
    primary = {ep.model for ep in eps if not ep.fallback}
    # Endpoints of one model share cache entries: which replica answered does not matter.
    name = primary.pop() if len(primary) == 1 else f"router/{role}"
    spec = " | ".join(ep.label + (" (fallback)" if ep.fallback else "") for ep in eps)
    temp = shared.get("temperature", temperature)
    # The Router retries across endpoints; DSPy retrying on top would multiply the attempts.
    return AccountedLM(name, role=role, spec=spec, engine=RouterEngine(role, eps, settings),
                       temperature=temp, max_tokens=shared.get("max_tokens", max_tokens), cache=cache,
                       num_retries=0, count_attempts=False)


@dataclass
class Models:
    """The four roles; any may share a spec. Unset roles fall back to the task model."""

    task: Any
    reflection: Any = None
    teacher: Any = None
    judge: Any = None

    def __post_init__(self):
        self.reflection = self.reflection or self.task
        self.teacher = self.teacher or self.reflection
        self.judge = self.judge or self.task


def make_models(specs: dict[str, Any], *, temperature: float | None = None) -> Models:
    """LMs for the roles given; unset roles fall back to the task model.

    Args:
        specs: {role: spec string, {model=..., api_base=..., temperature=...}, or a list of such
            endpoints served through LiteLLM's Router}.
        temperature: default sampling temperature for every role that sets none.
    """
    built: dict[str, Any] = {}
    for role in ROLES:
        val = specs.get(role)
        if val is None:
            continue
        if isinstance(val, list):
            built[role] = make_lm(val, role=role, temperature=temperature, num_retries=None)
            continue
        if isinstance(val, str):
            val = {"model": val}
        opts = dict(val)
        model = opts.pop("model", "local")
        if temperature is not None:
            opts.setdefault("temperature", temperature)
        built[role] = make_lm(model, role=role, **opts)
    if "task" not in built:
        built["task"] = make_lm("local", role="task", temperature=temperature)
    return Models(**built)


class ParsedOnlyCache(dspy.clients.cache.Cache):
    """DSPy's response cache (memory + disk), noting in each thread the requests a call read or
    wrote, so that the adapter can evict a reply it could not parse (DSPy stores the raw reply
    before any adapter sees it)."""

    def _note(self, request: dict, ignored: list | None) -> None:
        noted = getattr(_tls, "cache_requests", None)
        if noted is not None:  # the key is computed only if the reply must go (hashing costs GIL time)
            noted.append((request, ignored))

    def get(self, request, ignored_args_for_cache_key=None):
        value = super().get(request, ignored_args_for_cache_key)
        if value is not None:
            _tls.cache_hit = True  # the spend meter settles this call as free
            self._note(request, ignored_args_for_cache_key)
        return value

    def put(self, request, value, ignored_args_for_cache_key=None, enable_memory_cache=True):
        super().put(request, value, ignored_args_for_cache_key, enable_memory_cache)
        self._note(request, ignored_args_for_cache_key)

    def evict(self, request: dict, ignored: list | None = None) -> None:
        try:
            key = self.cache_key(request, ignored)
        except Exception:  # DSPy's own put/get skip such a request too
            return
        with self._lock:
            if self.enable_memory_cache:
                self.memory_cache.pop(key, None)
        if self.enable_disk_cache:
            self.disk_cache.delete(key)


def configure_cache(directory: str | Path, enabled: bool = True) -> Path:
    """Put DSPy's disk cache in the run's work directory (a rerun then costs 0 LM calls); only
    replies that parsed stay in it (see FastJSONAdapter)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    directory = _cache_store.usable_cache_dir(directory)  # a corrupt cache is moved aside and rebuilt
    cache = ParsedOnlyCache(enable_disk_cache=enabled, enable_memory_cache=enabled, disk_cache_dir=str(directory),
                            disk_size_limit_bytes=dspy.clients.DISK_CACHE_LIMIT)
    with dspy._cache_lock:  # as dspy.configure_cache does: a racing first read must not replace it
        dspy.cache = cache
    return directory


@contextlib.contextmanager
def parsed_or_evicted(lm: Any = None) -> Iterator[None]:
    """Inside: the cache requests of this thread's LM calls are noted; if the body raises (the reply
    did not parse), their entries are evicted, so the next call asks the model again, and the unusable reply is
    counted under `lm`'s role."""
    from dspy.utils.exceptions import AdapterParseError

    if type(dspy.cache) is dspy.clients.cache.Cache:  # DSPy's default (the API without configure_cache):
        dspy.cache.__class__ = ParsedOnlyCache  # same state, plus noting and eviction
    outer = getattr(_tls, "cache_requests", None)
    _tls.cache_requests = []
    try:
        yield
    except BaseException as e:
        if isinstance(e, (AdapterParseError, UnusableReply)):  # a failed request is counted by the LM
            USAGE.record_unusable(getattr(lm, "role", "task"), current_split())
        cache = dspy.cache
        if isinstance(cache, ParsedOnlyCache):
            for request, ignored in _tls.cache_requests:
                cache.evict(request, ignored)
        raise
    finally:
        if outer is not None:
            outer.extend(_tls.cache_requests)
        _tls.cache_requests = outer


class FastJSONAdapter(dspy.JSONAdapter):
    """JSONAdapter that builds each signature's output schema once, not on every call
    (DSPy rebuilds a pydantic model per call: ~4 ms of GIL time, which caps threaded throughput).

    Only a reply that parsed into the signature stays cached: an empty (no choices), truncated
    (finish_reason "length"), malformed or off-schema reply raises and its cache entry is evicted."""

    _formats: dict = {}
    _formats_lock = threading.Lock()

    def __call__(self, lm, lm_kwargs, signature, demos, inputs):
        _tls.finish = []  # set again by an AccountedLM's history entry; a plain dspy.LM leaves it empty
        with parsed_or_evicted(lm):
            return super().__call__(lm, lm_kwargs, signature, demos, inputs)

    async def acall(self, lm, lm_kwargs, signature, demos, inputs):
        with parsed_or_evicted(lm):  # the cache runs in a worker thread there: nothing noted, nothing evicted
            return await super().acall(lm, lm_kwargs, signature, demos, inputs)

    def _call_postprocess(self, processed_signature, original_signature, outputs, lm, lm_kwargs):
        if not outputs:
            raise UnusableReply("the model returned no choices (an empty reply)")
        if "length" in (getattr(_tls, "finish", None) or []):
            limit = (getattr(lm, "kwargs", None) or {}).get("max_tokens")
            raise UnusableReply("the reply was cut short" + (f" at max_tokens={limit}" if limit else "")
                                + " (finish_reason length)")
        values = super()._call_postprocess(processed_signature, original_signature, outputs, lm, lm_kwargs)
        for value in values:  # {"command": "{command}"}: the format copied back, no answer
            copied = placeholder_copies(original_signature, value)
            if copied:
                raise UnusableReply(f"the reply copied a format placeholder: {copied[0]} = {value[copied[0]]!r}")
        return values

    def format_field_structure(self, signature) -> str:
        return field_structure(signature)  # DSPy's shows "{command}" skeletons that small models copy

    def _prepare_response_format(self, lm, lm_kwargs, signature):
        if "response_format" not in lm.supported_params or not lm.supports_response_schema:
            return super()._prepare_response_format(lm, lm_kwargs, signature)
        key = (signature, self.use_native_function_calling)
        fmt = self._formats.get(key)
        if fmt is None:
            super()._prepare_response_format(lm, lm_kwargs, signature)
            fmt = lm_kwargs.get("response_format")
            model = fmt
            import pydantic

            if isinstance(model, type) and issubclass(model, pydantic.BaseModel):
                from dspy.clients.legacy_requests import _strict_json_schema

                fmt = {"type": "json_schema", "json_schema": {
                    "name": model.__name__, "schema": _strict_json_schema(model.model_json_schema()), "strict": True}}
            self._remember(self._formats, key, fmt)
        lm_kwargs["response_format"] = fmt

    _systems: dict = {}

    def format_system_message(self, signature) -> str:
        # a pure function of the signature, rebuilt by DSPy on every call (~0.3 ms of GIL time)
        key = (signature, signature.instructions, self.use_native_function_calling)
        text = self._systems.get(key)
        if text is None:
            text = super().format_system_message(signature)
            self._remember(self._systems, key, text)
        return text

    @classmethod
    def _remember(cls, cache: dict, key, value) -> None:
        with cls._formats_lock:  # bounded: GEPA makes a new signature per candidate
            if len(cache) > 4096:
                cache.clear()
            cache[key] = value


def adapter_for(lm: Any, adapter: Any = None) -> Any:
    """The DSPy adapter a program runs with on `lm`, as dspy.Evaluate would choose it for a user's LM.

    verifirst's JSON adapter (FastJSONAdapter) is for the LMs verifirst made (AccountedLM: the embedded
    model, model strings and endpoint lists it built, scripted test LMs): their replies are parsed and
    cached through it. A user's own LM object (dspy.LM, DummyLM, any BaseLM) runs as it runs under
    dspy.Evaluate: with the adapter the user configured (dspy.configure(adapter=...)), else DSPy's
    default ChatAdapter.

    Args:
        lm: the task LM the program runs on.
        adapter: an adapter the caller asked for (vf.optimize's adapter=); it wins for every LM.
    """
    if adapter is not None:
        return adapter
    if isinstance(lm, AccountedLM):
        return FastJSONAdapter()
    return dspy.settings.adapter or dspy.ChatAdapter()
