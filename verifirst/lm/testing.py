"""Deterministic LMs for tests and benchmarks, run through the same DSPy engine path as
real models (so adapters, cache and usage accounting are exercised for real)."""
from __future__ import annotations

import json
import threading
import time
from typing import Callable

from verifirst.lm import AccountedLM


def _messages(request) -> list[dict]:
    out = []
    if request.system is not None:
        sys_text = request.system if isinstance(request.system, str) else "".join(
            getattr(p, "text", "") or "" for p in request.system)
        out.append({"role": "system", "content": sys_text})
    out += [{"role": m.role, "content": m.text or ""} for m in request.messages]
    return out


class ScriptedEngine:
    """complete(request) -> fn(messages) text. `fn` may raise to inject faults.

    latency_s sleeps per call without holding the GIL, like a remote endpoint.
    """

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"temperature", "max_tokens", "top_p", "stop", "response_format", "seed"})

    def __init__(self, fn: Callable[[list[dict]], str], latency_s: float = 0.0):
        self.fn = fn
        self.latency_s = latency_s
        self.calls = 0
        self._lock = threading.Lock()

    def __deepcopy__(self, memo):
        return self

    def complete(self, request):
        from dspy.lm15 import Message, Response, TextPart, Usage

        msgs = _messages(request)
        if self.latency_s:
            time.sleep(self.latency_s)
        with self._lock:
            self.calls += 1
        text = self.fn(msgs)
        n_in = sum(len(m["content"]) for m in msgs) // 4 + 1
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(text)]),
                        finish_reason="stop", usage=Usage(input_tokens=n_in, output_tokens=len(text) // 4 + 1))

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self):
        pass


def scripted_lm(fn: Callable[[list[dict]], str], *, role: str = "task", latency_s: float = 0.0,
                cache: bool = False, name: str = "scripted", **kw) -> AccountedLM:
    """A dspy.LM whose answers come from fn(messages)."""
    return AccountedLM(f"local/{name}", role=role, spec=name, engine=ScriptedEngine(fn, latency_s),
                       cache=cache, num_retries=0, **kw)


def json_answer(**fields) -> str:
    """What a JSONAdapter-formatted answer looks like."""
    return json.dumps(fields)
