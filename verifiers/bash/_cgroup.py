"""Limits per run, not per process: a memory and a pids cgroup per sandbox run (counting every
process of the run and the tmpfs pages it writes), and as root a tmpfs of its own for its scratch.
Made under this process's own cgroup (cgroup v2, else v1's memory, pids and cpu hierarchies) by the
owner (root, or a user the hierarchy was delegated to); the launcher's pid 1 joins them through
descriptors the owner opened. Where none can be made, `unavailable_reason()` says why.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import functools
import itertools
import os
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["RunCgroup", "available", "unavailable_reason", "private_scratch", "unmount"]

ROOT = Path("/sys/fs/cgroup")
_COUNTER = itertools.count()


def _own_paths() -> dict[str, str]:
    """{controller or "" for v2: this process's cgroup path}, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            for c in (ctrls.split(",") if ctrls else [""]):
                out[c] = path
    except (OSError, ValueError):
        pass
    return out


@functools.cache
def _layout() -> tuple[tuple[tuple[Path, str], ...], str | None]:
    """((directory to make run cgroups in, its kind "v1-memory" | "v1-pids" | "v1-cpu" | "v2"), ...), why not."""
    own = _own_paths()
    tries: list[tuple[tuple[Path, str], ...]] = []
    mem, pids = ROOT / "memory", ROOT / "pids"
    if (mem / "memory.limit_in_bytes").exists() and (pids / "pids.max").exists() or \
            (mem / "cgroup.procs").exists() and (pids / "cgroup.procs").exists():
        tries.append(((mem / own.get("memory", "/").lstrip("/"), "v1-memory"),
                      (pids / own.get("pids", "/").lstrip("/"), "v1-pids")))
    for unified in (ROOT, ROOT / "unified"):
        ctl = unified / "cgroup.controllers"
        if ctl.exists() and {"memory", "pids"} <= set(ctl.read_text().split()):
            tries.append(((unified / own.get("", "/").lstrip("/"), "v2"),))
    why = "no cgroup hierarchy with the memory and pids controllers is mounted"
    for layout in tries:
        made: list[tuple[Path, str]] = []
        try:
            for parent, kind in layout:
                base = parent / f"verifirst-{os.getpid()}"
                base.mkdir(exist_ok=True)
                if kind == "v2":
                    (base / "cgroup.subtree_control").write_text("+memory +pids")
                    _try_write(base / "cgroup.subtree_control", "+cpu")  # fair shares, where delegated
                made.append((base, kind))
            cpu = ROOT / "cpu"  # cgroup v1: each run its own cpu group, so runs share the CPU as equals
            if made[0][1] != "v2" and (cpu / "cpu.shares").exists():
                try:
                    base = cpu / own.get("cpu", "/").lstrip("/") / f"verifirst-{os.getpid()}"
                    base.mkdir(exist_ok=True)
                    made.append((base, "v1-cpu"))
                except OSError:
                    pass  # optional: without it a run's many processes weigh more than another's few
            return tuple(made), None
        except OSError as exc:
            why = f"cannot make a cgroup under {layout[0][0]}: {exc.strerror or exc}"
            for base, _ in made:
                _rmdir(base)
    return (), why


def available() -> bool:
    """Whether runs get cgroups of their own here."""
    return bool(_layout()[0])


def unavailable_reason() -> str | None:
    """Why runs get no cgroup here (None: they do)."""
    return _layout()[1]


# empty run cgroups to use again (dirs, limits, open join files): making one costs about 1 ms
_FREE: list[tuple[list[Path], tuple[int, int], list[int]]] = []
_FREE_LOCK = threading.Lock()
_MAX_FREE = 8


# The file pid 1 writes "0" to. v1's `tasks` moves the writing thread alone (pid 1 has one then),
# sparing the global threadgroup lock (an RCU grace period per write) that cgroup.procs takes.
_JOIN_FILE = {False: "cgroup.procs", True: "tasks"}
# What a run's cgroup of each kind is given: (file, value, whether it must take it). v1's memsw may
# never be below the memory limit: raised first, lowered after. A cpu group keeps the default shares.
_KNOBS = {"v1-memory": (("memory.memsw.limit_in_bytes", "memory", False), ("memory.limit_in_bytes", "memory", True),
                        ("memory.memsw.limit_in_bytes", "memory", False), ("memory.oom_control", "0", False)),
          "v1-pids": (("pids.max", "pids", True),), "v1-cpu": (),
          "v2": (("memory.max", "memory", True), ("memory.swap.max", "0", False), ("pids.max", "pids", True))}


class RunCgroup:
    """One run's cgroups: `fds` are open files for pid 1 to join; close() keeps or removes them.

    Args:
        memory_bytes: the run's memory limit (all its processes and tmpfs pages).
        pids: the run's process limit (all its processes and threads).
    """

    def __init__(self, memory_bytes: int, pids: int):
        self.dirs: list[Path] = []
        self.fds: list[int] = []
        self.limits = (memory_bytes, pids)
        with _FREE_LOCK:
            reuse, set_to, fds = _FREE.pop() if _FREE else (None, None, None)
        name = f"run-{os.getpid()}-{next(_COUNTER)}"
        try:
            for i, (base, kind) in enumerate(_layout()[0]):
                d = reuse[i] if reuse else base / name
                if not reuse:
                    d.mkdir()
                self.dirs.append(d)
                values = {"memory": str(memory_bytes), "pids": str(pids), "0": "0"}
                for knob, value, required in _KNOBS[kind] if set_to != self.limits else ():  # else set already
                    if required:
                        (d / knob).write_text(values[value])
                    else:
                        _try_write(d / knob, values[value])
                self.fds.append(fds[i] if fds else os.open(d / _JOIN_FILE[kind != "v2"], os.O_WRONLY | os.O_CLOEXEC))
            self._start = self._counts()  # a cgroup used again keeps its counts: this run's are the rise
        except BaseException:
            self.close()
            raise

    def joins(self) -> tuple[tuple[int, bool], ...]:
        """(descriptor, whether joining it must succeed): a v1 cpu group, only a fair share, may
        refuse a real-time process."""
        return tuple((fd, kind != "v1-cpu") for fd, (_, kind) in zip(self.fds, _layout()[0]))

    def _counts(self) -> dict[str, int]:
        """The kernel's counts of limits met: the memory limit's OOM kills, forks refused at pids.max."""
        out = {"memory": 0, "processes": 0}
        for d, (_, kind) in zip(self.dirs, _layout()[0]):
            for name, key, field in _COUNTS.get(kind, ()):
                for line in _read(d / name).splitlines():
                    k, _, v = line.partition(" ")
                    if k == field and v.strip().isdigit():
                        out[key] += int(v)
        return out

    def limits_hit(self) -> list[str]:
        """Which of the run's limits it met ("memory", "processes"), since this run began."""
        now = self._counts()
        return [k for k, v in now.items() if v > self._start.get(k, 0)]

    def close(self) -> None:
        """Close the descriptors; the cgroups, empty now, are kept for the next run when little is
        charged to them (a kept root's files are), else removed (their charge moves up). The first
        (memory, or v2's) says for all: every process of the run joined it, and the others with it."""
        fds, self.fds = self.fds, []
        dirs, self.dirs = self.dirs, []
        if dirs and len(fds) == len(dirs) and _empty(dirs[0]) and _quiet(dirs[0]):
            with _FREE_LOCK:
                if len(_FREE) < _MAX_FREE:
                    _FREE.append((dirs, self.limits, fds))
                    return
        for fd in fds:
            os.close(fd)
        for d in dirs:
            _rmdir(d)


def _forget_in_child() -> None:
    """A forked child makes its own cgroups: the parent's free ones are the parent's."""
    global _FREE_LOCK
    _FREE_LOCK = threading.Lock()
    for _, _, fds in _FREE:
        for fd in fds:
            os.close(fd)
    _FREE.clear()


os.register_at_fork(after_in_child=_forget_in_child)


_COUNTS = {"v1-memory": (("memory.oom_control", "memory", "oom_kill"),),
           "v1-pids": (("pids.events", "processes", "max"),),
           "v2": (("memory.events", "memory", "oom_kill"), ("pids.events", "processes", "max"))}


def _read(path: Path) -> str:
    """A small kernel file's text ('' where it cannot be read): two system calls, no objects."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return os.read(fd, 4096).decode(errors="replace")
        finally:
            os.close(fd)
    except OSError:
        return ""


def _quiet(d: Path) -> bool:
    """Little memory still charged to memory cgroup `d` (v1 or v2)."""
    text = _read(d / "memory.usage_in_bytes").strip() or _read(d / "memory.current").strip()
    return text.isdigit() and int(text) < 16 << 20


def _empty(d: Path) -> bool:
    return os.path.exists(d / "cgroup.procs") and not _read(d / "cgroup.procs").strip()


def _try_write(path: Path, text: str) -> None:
    with contextlib.suppress(OSError):  # a knob this kernel lacks (no swap accounting, say)
        path.write_text(text)


def _rmdir(d: Path) -> None:
    for _ in range(50):  # the last exiting process may still be leaving it
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.002)


# ---- a tmpfs per run, as root: one run cannot fill another's scratch ----------------------------

@functools.cache
def libc() -> ctypes.CDLL:
    """The C library with the mount calls typed (and syscall returning a long), loaded once."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return libc


MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2


def private_scratch(base: str, size_bytes: int, inodes: int = 200_000) -> tuple[str, bool]:
    """(a new, empty run directory under `base`, named with our pid for sweep_lowers, whether it is
    a tmpfs of its own).

    Args:
        base, size_bytes, inodes: the scratch base; how much, and how many files, the run may write.
    """
    path = tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=base)
    if os.geteuid() != 0:
        return path, False
    opts = f"size={size_bytes},nr_inodes={inodes},mode=0700".encode()
    return path, libc().mount(b"verifirst-run", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV, opts) == 0


def unmount(path: str) -> None:
    """Unmount a run tmpfs (lazily) and remove its directory: a private_scratch() given back, its
    files with it (keeping it, emptied, for the next run was measured to gain nothing here: 7.8 vs
    8.0 ms a trivial pair).

    Args:
        path: the mount point.
    """
    libc().umount2(os.fsencode(path), MNT_DETACH)
    with contextlib.suppress(OSError):
        os.rmdir(path)


@atexit.register
def _remove_bases() -> None:
    """This process's cgroup directories, at exit (each run's own is gone by then)."""
    if not _layout.cache_info().currsize:
        return
    for dirs, _, fds in _FREE:
        for fd in fds:
            os.close(fd)
        for d in dirs:
            _rmdir(d)
    for base, _ in _layout()[0]:
        _rmdir(base)
