"""The embedded model's generation, and the child process that runs it under a memory ceiling.

LlamaCppEngine runs each request here, in a child process started as a plain script (it imports
llama_cpp and the standard library only, never dspy or verifirst) whose address space is capped
with RLIMIT_AS. A generation that grows past the ceiling (native code: llama.cpp's sampler, a
grammar) fails there, with MemoryError or an abort, and only the child dies: the engine's
request fails with a clear error and the next request starts a fresh child. Without it, one
runaway generation was killed by the kernel's OOM killer at 22 GB, and on a shared machine an
OOM kill can take other people's processes.

Protocol over a socket pair (multiprocessing.connection): the parent sends ("generate", payload,
deadline) or ("close",); the child answers ("ok", completion, stopped), ("memory", message) before
it exits, or ("error", type name, message).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any, Iterator

_LOAD_LOCK = threading.Lock()


@contextlib.contextmanager
def stopping_at(llm, deadline: float | None) -> Iterator[list]:
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


def load_llama(**kw):
    """Llama(...) without ggml's extra CPU buffer types (AMX, repacked weights).

    A build from source enables AMX on CPUs that report it; where the kernel withholds AMX
    tile permission (seen on VMs) any batched decode then segfaults. Plain CPU buffers cost
    nothing for a Q4_1 model and work everywhere. Llama() has no argument for it, so its
    default-params factory is wrapped while the model loads.

    Args:
        kw: Llama's keyword arguments.
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


_GRAMMARS: dict[str, Any] = {}


def generate(llm, payload: dict, deadline: float | None) -> tuple[dict, bool]:
    """One chat completion: (llama_cpp's completion dict, whether the deadline stopped it).

    Args:
        llm: the llama_cpp.Llama.
        payload: messages, kwargs (create_chat_completion's), grammar (GBNF text or None), seed.
        deadline: time.monotonic() at which generation stops, or None.
    """
    kwargs = dict(payload["kwargs"])
    grammar = payload.get("grammar")
    if grammar is not None:
        if grammar not in _GRAMMARS:
            from llama_cpp.llama_grammar import LlamaGrammar

            _GRAMMARS[grammar] = LlamaGrammar.from_string(grammar, verbose=False)
        kwargs["grammar"] = _GRAMMARS[grammar]
    if payload.get("seed") is not None:
        llm.set_seed(int(payload["seed"]))
    with stopping_at(llm, deadline) as stopped:
        out = llm.create_chat_completion(messages=payload["messages"], **kwargs)
    return out, bool(stopped)


def _serve(conn, model: dict, memory_bytes: int) -> None:
    import resource

    if memory_bytes > 0:  # before the model or any buffer is mapped
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    llm = None
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] != "generate":
            return
        try:
            if llm is None:
                llm = load_llama(**model)
            out, stopped = generate(llm, msg[1], msg[2])
            conn.send(("ok", out, stopped))
        except MemoryError as e:  # the state of a model that ran out of memory is unknown: exit
            conn.send(("memory", str(e) or "MemoryError"))
            return
        except Exception as e:  # noqa: BLE001 -- the parent raises it as the request's error
            conn.send(("error", type(e).__name__, str(e)))


def main(argv: list[str]) -> None:
    """Child entry: python _local_worker.py FD MEMORY_BYTES MODEL_PATH N_CTX N_THREADS SEED.

    Args:
        argv: the command line after the script.
    """
    from multiprocessing.connection import Connection

    import signal

    # Ctrl-C reaches the whole process group: the parent decides what stops; this child ends when
    # its connection closes (the parent exited, even by kill -9) or it is told to.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fd, memory_bytes, path, n_ctx, n_threads, seed = argv
    conn = Connection(int(fd))
    _serve(conn, {"model_path": path, "n_ctx": int(n_ctx), "n_threads": int(n_threads), "seed": int(seed),
                  "verbose": False}, int(memory_bytes))
    os._exit(0)  # Llama.__del__ at interpreter shutdown finds llama_cpp's globals gone and prints a traceback


if __name__ == "__main__":
    main(sys.argv[1:])
