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
import os
from collections.abc import Iterator
from pathlib import Path

from verifirst.verifiers.bash import _forkserver

SOURCES = [Path(__file__).with_name("_launcher.c"), _forkserver.SOURCE]  # its fork server built in
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
            scratch base, then a directory of ours in the temp dir); see _forkserver.built.
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
            path = _forkserver.built(SOURCES, NAME, flags, [], (parent,), build=build)
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
