"""Several LM endpoints behind one role: LiteLLM's Router as a DSPy engine.

A role given as a list (`task = [{model = ..., api_base = ...}, {...}]`) becomes one Router
model group. The Router balances load (simple-shuffle or least-busy), retries a failed call on
another endpoint, cools a failing endpoint down, and falls back to endpoints marked
`fallback = true` when every other one failed. Each attempt is counted per endpoint in the
usage ledger: successes from the response, failures from LiteLLM's failure callback (which
LiteLLM runs synchronously, before the Router retries). With a spend meter active, the call is
admitted once (priced at the dearest endpoint's model) before the Router sends anything; the
Router's own retries after a failure are counted as calls as they happen (they cost no tokens or
money), and the call is settled at the price of the endpoint that answered.
"""
from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass, replace
from typing import Any

from verifirst.core.errors import ConfigError
from verifirst.lm.base import DEFAULT_TIMEOUT_S, USAGE, check_spec, current_split, is_local
from verifirst.lm.spend import note_answering_model, note_failed_attempt

ROUTING = ("simple-shuffle", "least-busy")
ENDPOINT_KEYS = ("model", "api_base", "api_key", "weight", "fallback")
LM_KEYS = ("temperature", "max_tokens")  # one dspy.LM per role: these must agree across endpoints
ROUTER_KEYS = ("routing", "num_retries", "allowed_fails", "cooldown_s", "timeout_s")
_ID_PREFIX = "verifirst-endpoint-"


@dataclass(frozen=True)
class Endpoint:
    model: str
    label: str  # how reports name it: model@api_base
    api_base: str | None = None
    api_key: str | None = None
    weight: int | None = None
    fallback: bool = False


@dataclass(frozen=True)
class RouterSettings:
    routing: str = "simple-shuffle"
    num_retries: int = 3  # as for a single endpoint (make_lm's default)
    allowed_fails: int = 1  # failures before an endpoint cools down
    cooldown_s: float = 30.0
    timeout_s: float | None = None  # None: DEFAULT_TIMEOUT_S


def _typed(role: str, i: int, key: str, value: Any, types: tuple, expected: str) -> Any:
    if isinstance(value, bool) and bool not in types or not isinstance(value, types):
        raise ConfigError(f"wrong type {type(value).__name__}", field=f"models.{role}[{i}].{key}", expected=expected)
    return value


def parse_endpoints(role: str, items: list) -> tuple[list[Endpoint], RouterSettings, dict]:
    """A role's endpoint list -> (endpoints, router settings, shared LM options). Raises ConfigError.

    Args:
        role: the LM role (task, reflection, teacher, judge), for error messages.
        items: model strings or dicts with model, api_base, api_key, weight, fallback; router settings
            (routing, num_retries, allowed_fails, cooldown_s, timeout_s) and LM options (temperature,
            max_tokens) may be given on any endpoint, and must agree where repeated.
    """
    if not isinstance(items, list) or not items:
        raise ConfigError("empty endpoint list", field=f"models.{role}", expected="one or more {model = ..., api_base = ...}")
    endpoints: list[Endpoint] = []
    shared: dict[str, tuple[Any, int]] = {}
    for i, one in enumerate(items):
        where = f"models.{role}[{i}]"
        one = {"model": one} if isinstance(one, str) else one
        if not isinstance(one, dict):
            raise ConfigError(f"endpoint is a {type(one).__name__}", field=where,
                              expected="a model string or {model = ..., api_base = ...}")
        unknown = sorted(set(one) - set(ENDPOINT_KEYS) - set(LM_KEYS) - set(ROUTER_KEYS))
        if unknown:
            raise ConfigError(f"unknown key {unknown[0]!r}", field=f"{where}.{unknown[0]}",
                              expected="one of " + ", ".join(ENDPOINT_KEYS + LM_KEYS + ROUTER_KEYS))
        model = one.get("model")
        check_spec(model, field_name=f"{where}.model")
        if is_local(model):
            raise ConfigError("the embedded model runs in this process, not behind an endpoint",
                              field=f"{where}.model", expected="a served model (e.g. `verifirst serve` + openai/<name>)")
        for key in LM_KEYS + ROUTER_KEYS:
            if key in one:
                if key in shared and shared[key][0] != one[key]:
                    raise ConfigError(f"{key} {one[key]!r} differs from {shared[key][0]!r} of endpoint {shared[key][1]}",
                                      field=f"{where}.{key}", expected=f"one {key} for the role")
                shared[key] = (one[key], i)
        api_base = one.get("api_base")
        if api_base is not None:
            _typed(role, i, "api_base", api_base, (str,), "a URL such as http://host:8000/v1")
        weight = one.get("weight")
        if weight is not None and (_typed(role, i, "weight", weight, (int,), "a positive integer") < 1):
            raise ConfigError(f"weight {weight} is not positive", field=f"{where}.weight", expected="1 or more")
        fallback = _typed(role, i, "fallback", one.get("fallback", False), (bool,), "true or false")
        label = f"{model}@{api_base}" if api_base else model
        endpoints.append(Endpoint(model, label, api_base, one.get("api_key"), weight, fallback))
    seen: dict[str, int] = {}
    for j, ep in enumerate(endpoints):  # two keys on one provider are still two endpoints
        seen[ep.label] = seen.get(ep.label, 0) + 1
        if seen[ep.label] > 1:
            endpoints[j] = replace(ep, label=f"{ep.label}#{seen[ep.label]}")
    if all(ep.fallback for ep in endpoints):
        raise ConfigError("every endpoint is a fallback", field=f"models.{role}",
                          expected="at least one endpoint without fallback = true")
    settings = _settings(role, {k: v for k, (v, _) in shared.items() if k in ROUTER_KEYS})
    return endpoints, settings, {k: v for k, (v, _) in shared.items() if k in LM_KEYS}


def _settings(role: str, given: dict) -> RouterSettings:
    where = f"models.{role}"
    s = RouterSettings()
    if "routing" in given and given["routing"] not in ROUTING:
        raise ConfigError(f"unknown routing {given['routing']!r}", field=f"{where}.routing", expected=" | ".join(ROUTING))
    for key, types, low in (("num_retries", (int,), 0), ("allowed_fails", (int,), 0),
                            ("cooldown_s", (int, float), 0), ("timeout_s", (int, float), 0)):
        v = given.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, types) or v < low
                              or (key == "timeout_s" and v == 0)):
            raise ConfigError(f"{key} {v!r} is not valid", field=f"{where}.{key}",
                              expected="a positive number" if key == "timeout_s" else f"a number >= {low}")
    return replace(s, **given)


# -- per-endpoint accounting ---------------------------------------------------------------
_DEPLOYMENTS: dict[str, tuple[str, str]] = {}  # Router deployment id -> (role, endpoint label)
_LOGGER_LOCK = threading.Lock()
_LOGGER: list = []


def _install_failure_logger() -> None:
    """One process-wide LiteLLM callback that counts failed attempts of our deployments."""
    import litellm

    if _LOGGER and _LOGGER[0] in litellm.callbacks:  # the common case, on every call
        return
    from litellm.integrations.custom_logger import CustomLogger

    class EndpointFailures(CustomLogger):
        def log_failure_event(self, kwargs, response_obj, start_time, end_time):
            info = (kwargs.get("litellm_params") or {}).get("model_info") or {}
            where = _DEPLOYMENTS.get(str(info.get("id") or ""))
            if where is not None:
                USAGE.record_endpoint(where[0], where[1], error=True)
                USAGE.record_attempt(where[0], current_split(), failed=True)
                note_failed_attempt()  # the spend meter counts it as a call (the Router sent it unasked)

    with _LOGGER_LOCK:
        if not _LOGGER:
            _LOGGER.append(EndpointFailures())
        if _LOGGER[0] not in litellm.callbacks:  # someone may have replaced the list
            litellm.callbacks.append(_LOGGER[0])


class RouterEngine:
    """A DSPy engine (complete(Request) -> Response) that sends each request through a Router."""

    def __init__(self, role: str, endpoints: list[Endpoint], settings: RouterSettings | None = None):
        self.role, self.endpoints, self.settings = role, list(endpoints), settings or RouterSettings()
        self.group = f"verifirst-{role}"
        tag = uuid.uuid4().hex[:8]
        self._ids = {f"{_ID_PREFIX}{tag}-{i}": ep for i, ep in enumerate(self.endpoints)}
        _DEPLOYMENTS.update({k: (role, ep.label) for k, ep in self._ids.items()})
        self._lock = threading.Lock()
        self._router = None
        self._declare_capabilities()

    def _declare_capabilities(self) -> None:
        """What every endpoint supports (as a plain dspy.LM on each would say), so adapters ask
        no endpoint for a feature it lacks."""
        import dspy

        caps = []
        for ep in self.endpoints:
            probe = dspy.LM(ep.model, **{k: v for k, v in (("api_base", ep.api_base), ("api_key", ep.api_key)) if v})
            caps.append((probe.supports_function_calling, probe.supports_reasoning, probe.supports_response_schema,
                         frozenset(probe.supported_params)))
        self.supports_function_calling = all(c[0] for c in caps)
        self.supports_reasoning = all(c[1] for c in caps)
        self.supports_response_schema = all(c[2] for c in caps)
        self.supported_params = frozenset.intersection(*(c[3] for c in caps))

    def _model_list(self) -> list[dict]:
        out = []
        for dep_id, ep in self._ids.items():
            params: dict[str, Any] = {"model": ep.model}
            if ep.api_base:
                params["api_base"] = ep.api_base
            if ep.api_key:
                params["api_key"] = ep.api_key
            elif ep.api_base and not os.environ.get(f"{ep.model.split('/', 1)[0].upper()}_API_KEY"):
                params["api_key"] = "unused"  # a self-hosted OpenAI-compatible server takes any key
            if ep.weight:
                params["weight"] = ep.weight
            params["timeout"] = self.settings.timeout_s or DEFAULT_TIMEOUT_S  # a hang costs at most this
            name = f"{self.group}-fallback" if ep.fallback else self.group
            out.append({"model_name": name, "litellm_params": params, "model_info": {"id": dep_id}})
        return out

    @property
    def router(self):
        with self._lock:
            if self._router is None:
                import litellm

                _install_failure_logger()
                s = self.settings
                fallbacks = ([{self.group: [f"{self.group}-fallback"]}]
                             if any(ep.fallback for ep in self.endpoints) else [])
                self._router = litellm.Router(model_list=self._model_list(), routing_strategy=s.routing,
                                              num_retries=s.num_retries, allowed_fails=s.allowed_fails,
                                              cooldown_time=s.cooldown_s, fallbacks=fallbacks, retry_after=0)
            return self._router

    def complete(self, request):
        from dspy.clients.engines.base import validate_request
        from dspy.clients.engines.litellm_errors import litellm_errors
        from dspy.clients.lm15_boundary import request_kwargs, response_value

        validate_request(request)
        _install_failure_logger()  # again: another library may have replaced litellm.callbacks
        data = request_kwargs(request, "chat")
        data.pop("model", None)
        if request.config.top_k is not None:
            data["top_k"] = request.config.top_k
        with litellm_errors(model=request.model):
            raw = self.router.completion(model=self.group, **data)
        ep = self._ids.get(str((getattr(raw, "_hidden_params", None) or {}).get("model_id") or ""))
        if ep is not None:
            USAGE.record_endpoint(self.role, ep.label, usage=getattr(raw, "usage", None), error=False)
            note_answering_model(ep.model)  # settled at that endpoint's price
        USAGE.record_attempt(self.role, current_split(), failed=False)
        return response_value(raw, "chat", request)

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass

    def __deepcopy__(self, memo):  # DSPy deep-copies programs with their LMs: share one Router
        return self

    def __getstate__(self):  # a Router holds threads and clients: rebuild it where unpickled
        state = dict(self.__dict__)
        state.pop("_lock", None)
        state["_router"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()
        _DEPLOYMENTS.update({k: (self.role, ep.label) for k, ep in self._ids.items()})
