"""Build the bwrap fork server (_forkserver.c) once per machine, where the sandbox uid can load it.

Every sandbox run used to exec bwrap: a new image, dynamic linking and the C library's
start-up, whose CPU feature probing traps to the hypervisor on a virtual machine (measured
here: a no-libc binary starts in 0.07 ms, a static glibc one in 0.7 ms). The fork server
pays that once per process: bwrap, preloaded with this library, forks for each run and runs
its own main with the run's argv (see the C file for what the child sees). _spawner starts it
and talks to it; this module only compiles it.

The library is built with the C compiler on PATH ($CC, cc, gcc) into the first directory of
`parents` where the build and a load by the sandbox uid work, named by the digest of the
source, so a rebuild happens only when the source changes. No compiler, a failed build or a
server that does not start: runs go through the Python spawner as before.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("_forkserver.c")
BUILD_TIMEOUT_S = 60


def enabled() -> bool:
    """Whether runs may use the fork server (VERIFIRST_SANDBOX_FORKSERVER=0 turns it off)."""
    return os.environ.get("VERIFIRST_SANDBOX_FORKSERVER", "1") != "0"


def _compiler() -> str | None:
    return next((c for c in (os.environ.get("CC"), shutil.which("cc"), shutil.which("gcc")) if c), None)


@functools.cache
def library(parents: tuple[Path, ...]) -> str | None:
    """The fork-server library's path, built on first use; None when it cannot be built.

    Args:
        parents: directories the sandbox uid can traverse, in order of preference (the sandbox's
            scratch base, then a directory of ours in the temp dir).
    """
    try:
        source = SOURCE.read_bytes()
    except OSError:
        return None
    cc = _compiler()
    if cc is None:
        return None
    digest = hashlib.sha256(source + cc.encode()).hexdigest()[:16]
    for parent in parents:
        target = Path(parent) / f"forkserver-{digest}" / "libverifirst-forkserver.so"
        if target.is_file():
            return str(target)
        try:
            return _build(cc, target)
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def _build(cc: str, target: Path) -> str:
    """Compile into a temporary name beside `target`, then rename (a concurrent build loses nothing)."""
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(target.parent, 0o755)  # the sandbox uid loads it: readable, in a traversable directory
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", tmp, str(SOURCE), "-ldl"], check=True,
                       capture_output=True, timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return str(target)
