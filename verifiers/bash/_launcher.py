"""vf-sandbox, the sandbox's own launcher (_launcher.c), built once per machine where the sandbox
uid can run it, and used in place of bubblewrap.

It takes the bwrap options _bwrap.argv writes and builds the same sandbox (namespaces, mounts,
/dev, /proc, ids, capabilities, exit status; tests/test_sandbox_launcher.py compares what a
command sees under both), with the kernel's work only, in less time per run than bwrap
(benchmarks/perf/sandbox.py, "launchers"). Its fork server is built in (_forkserver.c compiled
with it: nothing is preloaded), so it is linked statically where the C library's archive is
there; its server clones each run's pid 1 itself, with no monitor process between them. It is
compiled with the C compiler on PATH into a directory that is ours and writable by nobody else.

Off with VERIFIRST_SANDBOX_LAUNCHER=bwrap (then bubblewrap, as before), and not used when a
bwrap is named (Sandbox(bwrap=...), VERIFIRST_BWRAP); no compiler, a failed build, or a
launcher that cannot build the sandbox on this kernel (the sandbox's probe): bubblewrap.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

from verifirst.verifiers.bash import _bwrap_access

SOURCES = [Path(__file__).with_name("_launcher.c"), Path(__file__).with_name("_forkserver.c")]  # server built in
BUILD_TIMEOUT_S = 60
NAME = "vf-sandbox"
# Linked statically where the C library's archive is there: a fork, exit and exec of a static
# image cost less (fewer mappings), and each run is two forks of the fork server's image.
BUILDS = (["-static"], [])
KIND = "vf-sandbox"
_refused = False  # the sandbox's probe failed with vf-sandbox in this process


def enabled() -> bool:
    """Whether the sandbox may use vf-sandbox (VERIFIRST_SANDBOX_LAUNCHER=bwrap turns it off)."""
    return os.environ.get("VERIFIRST_SANDBOX_LAUNCHER", KIND) not in ("bwrap", "0")


def built(parents: tuple[Path, ...]) -> Iterator[str]:
    """vf-sandbox built in `parents`, in their order, each built when reached: a caller stops at
    the first the sandbox uid can run (the scratch base may be mounted noexec), so the next ones
    are never built; nothing without a compiler.

    Args:
        parents: directories the sandbox uid can traverse, in order of preference (the sandbox's
            scratch base, then a directory of ours in the temp dir); see built_c.
    """
    for parent in parents:
        path = _built_in(parent)
        if path is not None:
            yield path


@functools.cache
def _built_in(parent: Path) -> str | None:
    """vf-sandbox built in `parent` (once per process), or None where it cannot be: a build that is
    there already (static first), else the first of BUILDS that succeeds; so a machine without the
    static C library pays for the failed static build once, not once per process."""
    for build in (False, True):
        for flags in BUILDS:
            path = built_c(SOURCES, NAME, flags, (parent,), build=build)
            if path is not None:
                _SERVES_ITSELF.add(path)
                return path
    return None


_SERVES_ITSELF: set[str] = set()


def serves_itself(path: str) -> bool:
    """Whether `path` is a vf-sandbox built here: its fork server is built in (nothing to preload).

    Args:
        path: the launcher every run names.
    """
    return path in _SERVES_ITSELF


def refuse(refused: bool = True) -> None:
    """Record that vf-sandbox could not build the sandbox here, wherever it was built (bubblewrap
    from now on in this process), or, with `refused` False, take that back (bubblewrap could not
    either).

    Args:
        refused: whether it is refused.
    """
    global _refused
    _refused = refused


def refused() -> bool:
    """Whether the sandbox's probe failed with vf-sandbox in this process."""
    return _refused


def forkserver_enabled() -> bool:
    """Whether runs may use vf-sandbox's fork server (VERIFIRST_SANDBOX_FORKSERVER=0 turns it off)."""
    return os.environ.get("VERIFIRST_SANDBOX_FORKSERVER", "1") != "0"


def _compiler() -> str | None:
    return next((c for c in (os.environ.get("CC"), shutil.which("cc"), shutil.which("gcc")) if c), None)


def built_c(sources: list[Path], name: str, flags: list[str], parents: tuple[Path, ...],
            build: bool = True) -> str | None:
    """`sources` compiled together (-O2 + `flags`) as the executable `name`, in the first of
    `parents` where that succeeds, in a directory named by the digest of the sources, flags and
    compiler, so it is rebuilt only when they change; None without a compiler or a source, or
    when no build succeeded. Whoever could replace it would run code in every sandbox run: a
    directory that is not ours, or that others can write, is passed over (_bwrap_access).

    Args:
        sources: the C files; the first names the build's directory.
        name: the file built.
        flags: compiler flags before the sources.
        parents: directories the sandbox uid can traverse, in order of preference.
        build: False: only an existing build is returned (None where there is none).
    """
    try:
        text = b"".join(s.read_bytes() for s in sources)
    except OSError:
        return None
    cc = _compiler()
    if cc is None:
        return None
    digest = hashlib.sha256(text + cc.encode() + " ".join(flags).encode()).hexdigest()[:16]
    for parent in map(Path, parents):
        home = parent / f"{sources[0].stem.strip('_')}-{digest}"
        ready = lambda d: _ours(d, name)  # noqa: E731
        if not build:
            found = _bwrap_access.built_already(parent, home.name, ready)
            if found is not None:
                return str(found / name)
            continue

        def fill(tmp: Path) -> None:
            subprocess.run([cc, "-O2", "-o", str(tmp / name), *flags, *map(str, sources)], check=True,
                           capture_output=True, timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
            os.chmod(tmp / name, 0o755)
            os.chmod(tmp, 0o755)  # the sandbox uid runs it

        try:
            return str(_bwrap_access.built_once(parent, home.name, fill, ready) / name)
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def _ours(d: Path, name: str) -> bool:
    """Whether `d/name` is a regular file of ours that nobody else can write."""
    try:
        st = os.lstat(d / name)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022
