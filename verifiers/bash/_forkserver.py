"""Build the C the sandbox runs (vf-sandbox: _launcher.c with its fork server, _forkserver.c, built
in) once per machine, where the sandbox uid can run it.

Every sandbox run used to exec the launcher: a new image, dynamic linking and the C library's
start-up, whose CPU feature probing traps to the hypervisor on a virtual machine (measured
here: a no-libc binary starts in 0.07 ms, a static glibc one in 0.7 ms). The fork server pays
that once per process (see the C file for what the child sees). _spawner starts it and talks
to it; this module only compiles it.

The C is built with the compiler on PATH ($CC, cc, gcc) into the first directory of `parents`
that is ours and writable by nobody else, named by the digest of the source, flags and
compiler, so a rebuild happens only when they change. No compiler or a failed build: the
sandbox uses bubblewrap, started with Popen.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

from verifirst.verifiers.bash import _bwrap_access

SOURCE = Path(__file__).with_name("_forkserver.c")
BUILD_TIMEOUT_S = 60


def enabled() -> bool:
    """Whether runs may use the fork server (VERIFIRST_SANDBOX_FORKSERVER=0 turns it off)."""
    return os.environ.get("VERIFIRST_SANDBOX_FORKSERVER", "1") != "0"


def _compiler() -> str | None:
    return next((c for c in (os.environ.get("CC"), shutil.which("cc"), shutil.which("gcc")) if c), None)


def built(sources: list[Path], name: str, flags: list[str], libs: list[str], parents: tuple[Path, ...],
          build: bool = True) -> str | None:
    """`sources` compiled together (-O2 + `flags`, linked with `libs`) as `name`, 0644 for a library
    and 0755 otherwise, in the first of `parents` where that succeeds, in a directory named by the
    digest of the sources, flags and compiler, so it is rebuilt only when they change; None
    without a compiler or a source, or when no build succeeded.

    Args:
        sources: the C files; the first names the build's directory.
        name: the file built.
        flags, libs: compiler flags before the sources, libraries after them.
        parents: as for library().
        build: False: only an existing build is returned (None where there is none).
    """
    try:
        text = b"".join(s.read_bytes() for s in sources)
    except OSError:
        return None
    cc = _compiler()
    if cc is None:
        return None
    digest = hashlib.sha256(text + cc.encode() + " ".join(flags + libs).encode()).hexdigest()[:16]
    mode = 0o644 if "-shared" in flags else 0o755
    for parent in map(Path, parents):
        home = parent / f"{sources[0].stem.strip('_')}-{digest}"
        if not build:
            found = _bwrap_access.built_already(parent, home.name, lambda d: _ours(d, name))
            if found is not None:
                return str(found / name)
            continue
        try:
            return _built(cc, [*flags, *map(str, sources), *libs], name, mode, parent, home)
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


def _built(cc: str, args: list[str], name: str, mode: int, parent: Path, home: Path) -> str:
    """`name` in `home`, compiled there first when missing (_bwrap_access.built_once)."""
    def fill(tmp: Path) -> None:
        subprocess.run([cc, "-O2", "-o", str(tmp / name), *args], check=True,
                       capture_output=True, timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
        os.chmod(tmp / name, mode)
        os.chmod(tmp, 0o755)  # the sandbox uid loads or runs it

    return str(_bwrap_access.built_once(parent, home.name, fill, lambda d: _ours(d, name)) / name)
