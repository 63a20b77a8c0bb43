"""vf-sandbox, the sandbox's own launcher (_launcher.c, its fork server _forkserver.c built in),
compiled once per machine with the C compiler on PATH into a directory that is ours and writable
by nobody else, and used in place of bubblewrap. Bubblewrap is used instead with
VERIFIRST_SANDBOX_LAUNCHER=bwrap, when a bwrap is named (Sandbox(bwrap=...), VERIFIRST_BWRAP),
without a compiler, or when the sandbox's probe finds vf-sandbox cannot build the sandbox here.
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

SOURCES = [Path(__file__).with_name("_launcher.c"), Path(__file__).with_name("_forkserver.c")]
BUILD_TIMEOUT_S = 60
NAME = KIND = "vf-sandbox"
# Static first: a fork, exit and exec of a static image cost less (fewer mappings).
BUILDS = (["-static"], [])
_refused = False  # the sandbox's probe failed with vf-sandbox in this process


def built(parents: tuple[Path, ...]) -> Iterator[str]:
    """vf-sandbox built in `parents`, each when reached: a caller stops at the first the sandbox uid
    can run (the scratch base may be mounted noexec).

    Args:
        parents: directories the sandbox uid can traverse, in order of preference.
    """
    return (path for path in map(_built_in, parents) if path is not None)


@functools.cache
def _built_in(parent: Path) -> str | None:
    """vf-sandbox built in `parent` (once per process), in a directory named by the digest of the
    sources, flags and compiler: a build there already (static first), else the first of BUILDS
    that compiles, so a machine without the static C library pays for the failed build once; None
    without a compiler. Whoever could replace it would run code in every run: see built_once."""
    if (cc := _compiler()) is None:
        return None
    try:
        text = b"".join(s.read_bytes() for s in SOURCES)
    except OSError:
        return None
    homes = [(flags, f"launcher-{hashlib.sha256(text + cc.encode() + ' '.join(flags).encode()).hexdigest()[:16]}")
             for flags in BUILDS]
    ready = lambda d: _bwrap_access.trusted(d / NAME, stat.S_ISREG)  # noqa: E731
    for _, home in homes:
        if (found := _bwrap_access.built_already(parent, home, ready)) is not None:
            return str(found / NAME)
    for flags, home in homes:
        def fill(tmp: Path) -> None:
            subprocess.run([cc, "-O2", "-o", str(tmp / NAME), *flags, *map(str, SOURCES)], check=True,
                           capture_output=True, timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
            os.chmod(tmp / NAME, 0o755)
            os.chmod(tmp, 0o755)  # the sandbox uid runs it

        try:
            return str(_bwrap_access.built_once(parent, home, fill, ready) / NAME)
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def refuse(refused: bool = True) -> None:
    """Record that vf-sandbox cannot build the sandbox here (bubblewrap from now on in this
    process), or take that back (bubblewrap could not either).

    Args:
        refused: whether it is refused.
    """
    global _refused
    _refused = refused


def refused() -> bool:
    """Whether the sandbox's probe failed with vf-sandbox in this process."""
    return _refused


def _compiler() -> str | None:
    return next((c for c in (os.environ.get("CC"), shutil.which("cc"), shutil.which("gcc")) if c), None)
