"""Pre-started ("warm") sandboxes: bwrap's start taken off a run's critical path.

A warm sandbox is a normal run's sandbox, built the normal way (its own fresh overlay upper
directory, limits, namespaces, output pipes), whose bash is LAUNCHER instead of the command:
it reports ready on a socket, reads the command from it and execs `/bin/bash -c COMMAND`
with BASH_ENV, which sets the limits (the same pid, argv, environment, cwd, descriptors and
limits as a normal run's bash; only bwrap's own command line, pid 1's, names the launcher,
and the bash's initial environment block, /proc/$$/environ, has another order and SHLVL=0,
which the exec builtin puts there; $SHLVL is 1 as in a normal run). A run takes a warm
sandbox of the same key (sandbox settings and fixture) when one is there; replacements start
once the caller's runs are done (started with them, they would take those runs' CPU). A key
gets warm sandboxes from its second run on, at most PER_KEY each and CAP in all (each holds 3
processes of the sandbox uid, which RLIMIT_NPROC counts). Unused ones end at exit and on
eviction.
A warm sandbox that is not ready (it failed to start, or died) is dropped and the run starts
the normal way.

Off unless VERIFIRST_SANDBOX_POOL=1: it moves bwrap's start off the critical path, not off the
CPU (and adds the launcher's bash), so it pays where runs leave the CPU idle between them (runs
paced by model calls, spare cores); back to back on a busy 2-core host it gained nothing
(benchmarks/perf/sandbox.py, "pool").
"""
from __future__ import annotations

import atexit
import os
import threading
from collections import OrderedDict, deque
from typing import Callable, Protocol

# fd: the socket's number inside; `read -d ''` stops at the NUL we send after the command. The
# command's bash gets BASH_ENV (the limits script, on fd `limits`) as a normal run's does.
LAUNCHER = ("printf r >&{fd}; IFS= read -r -d '' -u {fd} c || exit 0; exec {fd}<&-; "
            'BASH_ENV=/dev/fd/{limits} exec /bin/bash -c "$c"')
PER_KEY = 2
CAP = 4
MAX_COMMAND_BYTES = 16 << 10  # bash reads the socket a byte at a time; longer ones start normally


class Warm(Protocol):
    """A warm sandbox (sandbox._Job with no command yet)."""

    def discard(self) -> None: ...


_LOCK = threading.Lock()
_POOL: "OrderedDict[tuple, deque[Warm]]" = OrderedDict()  # least recently used key first
_SEEN: dict[tuple, int] = {}
_EXIT_HOOK: list[bool] = []


def enabled() -> bool:
    """Whether runs use warm sandboxes: VERIFIRST_SANDBOX_POOL=1."""
    return os.environ.get("VERIFIRST_SANDBOX_POOL", "0") == "1"


def take(key: tuple, command: str, send: Callable[[Warm], bool]) -> Warm | None:
    """A warm sandbox of `key` that now runs `command`, or None: start the run normally.

    Args:
        key: what a warm sandbox must match: the sandbox settings that shape bwrap's start, and
            the fixture.
        command: the command (a long one is never sent to a warm sandbox).
        send: sends the command to a warm sandbox; False when it was not ready.
    """
    with _LOCK:
        if len(_SEEN) > 4096:
            _SEEN.clear()  # many one-off settings: forget them rather than grow
        _SEEN[key] = _SEEN.get(key, 0) + 1
    if len(os.fsencode(command)) > MAX_COMMAND_BYTES:
        return None
    while True:
        with _LOCK:
            q = _POOL.get(key)
            w = q.popleft() if q else None
        if w is None:
            return None
        if send(w):
            return w
        w.discard()  # not ready: it failed to start or died; try the next


def top_up(key: tuple, start: Callable[[], Warm]) -> None:
    """Start warm sandboxes of `key` up to PER_KEY, once it has had two runs; evict the least
    recently used keys' past CAP.

    Args:
        key: as for take().
        start: starts one warm sandbox of `key` (raises when it cannot).
    """
    with _LOCK:
        if _SEEN.get(key, 0) < 2:
            return  # a key used once may never come back
        q = _POOL.setdefault(key, deque())
        _POOL.move_to_end(key)
        need = PER_KEY - len(q)
        evict = []
        total = sum(len(v) for v in _POOL.values()) + need
        for other in list(_POOL):
            if total <= CAP or other == key:
                break
            while _POOL[other] and total > CAP:
                evict.append(_POOL[other].popleft())
                total -= 1
            if not _POOL[other]:
                del _POOL[other]
    for w in evict:
        w.discard()
    for _ in range(max(0, need)):
        try:
            w = start()
        except Exception:  # noqa: BLE001 - no warm sandbox: runs start the normal way
            return
        with _LOCK:
            if not _EXIT_HOOK:
                atexit.register(clear)  # registered late: runs before the spawner and lowers go
                _EXIT_HOOK.append(True)
            _POOL.setdefault(key, deque()).append(w)


def size() -> int:
    """How many warm sandboxes wait now."""
    with _LOCK:
        return sum(len(q) for q in _POOL.values())


def clear() -> None:
    """End every warm sandbox of this process and remove its run directory."""
    with _LOCK:
        ws = [w for q in _POOL.values() for w in q]
        _POOL.clear()
        _SEEN.clear()
    for w in ws:
        w.discard()


def _forget_in_child() -> None:
    """In a forked child: the warm sandboxes are the parent's; drop our copies of their descriptors."""
    global _LOCK
    _LOCK = threading.Lock()
    for q in _POOL.values():
        for w in q:
            getattr(w, "forget", lambda: None)()
    _POOL.clear()
    _SEEN.clear()


os.register_at_fork(after_in_child=_forget_in_child)
