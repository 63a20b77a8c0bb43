"""File-system snapshots of a sandbox root and their diff (type, mode, sha256; never mtimes).

The walk uses directory descriptors, so hostile trees (deep nesting, odd names, symlinks out) are
read without following links or building long paths, within a depth and entry budget. With an
overlay root only the upper directory is walked: merged() lays it over the fixture's snapshot.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from verifirst.verifiers.bash import _cgroup
from verifirst.verifiers.bash.fixtures import MOUNT_POINTS, Fixture, write_tree

MAX_DEPTH = 128
MAX_ENTRIES = 50_000
MAX_HASH_BYTES = 256 << 20

_KINDS = {"d": "dir", "-": "file", "l": "symlink", "p": "fifo", "s": "socket", "c": "chardev", "b": "blockdev"}

Record = tuple[str, int, "str | None"]  # kind, permission bits incl. setuid/sticky, digest
WHITEOUT = "whiteout"  # an overlay upper's mark of a removed lower entry
_OPAQUE = ("user.overlay.opaque", "trusted.overlay.opaque")


def kind_of(mode: int) -> str:
    return _KINDS.get(stat.filemode(mode)[0], "other")


@dataclass
class Snapshot:
    records: dict[str, Record] = field(default_factory=dict)
    truncated: bool = False
    opaque: set[str] = field(default_factory=set)  # overlay upper: directories hiding the lower's


_FIXTURE_SNAPSHOTS: dict[str, Snapshot] = {}


def skipped(sysadmin: bool) -> tuple[str, ...]:
    """Top-level names the diff never looks inside: the mount points, less /etc in sysadmin mode."""
    return tuple(m for m in MOUNT_POINTS if not (sysadmin and m == "etc"))


def fixture_snapshot(fx: Fixture, skip: tuple[str, ...] = MOUNT_POINTS) -> Snapshot:
    key = f"{fx.content_hash}:{','.join(skip)}"
    if key not in _FIXTURE_SNAPSHOTS:
        _FIXTURE_SNAPSHOTS[key] = Snapshot({"/" + e.path: (e.kind, e.mode, e.sha256) for e in fx.entries
                                            if e.path.split("/")[0] not in skip})
    return _FIXTURE_SNAPSHOTS[key]


def _opaque(name: str, dir_fd: int) -> bool:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            return any(attr in _OPAQUE and os.getxattr(fd, attr) == b"y" for attr in os.listxattr(fd))
        finally:
            os.close(fd)
    except OSError:
        return False


def _digest(kind: str, name: str, dir_fd: int, budget: list[int]) -> str | None:
    """A file's sha256 ("unreadable", or "too-large" past the bytes left in `budget`), a
    symlink's target's; None for other kinds."""
    try:
        if kind == "symlink":
            return hashlib.sha256(os.fsencode(os.readlink(name, dir_fd=dir_fd))).hexdigest()
        if kind != "file":
            return None
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return "unreadable"
    h = hashlib.sha256()
    try:
        while chunk := os.read(fd, 1 << 20):
            budget[0] -= len(chunk)
            if budget[0] < 0:
                return "too-large"
            h.update(chunk)
    except OSError:
        return "unreadable"
    finally:
        os.close(fd)
    return h.hexdigest()


def snapshot(root: str, skip: tuple[str, ...] = MOUNT_POINTS, upper: bool = False) -> Snapshot:
    """Walk `root` (a sandbox's /, its processes all dead) without following symlinks.

    Args:
        root: the directory to walk.
        skip: top-level names not walked (mount points).
        upper: `root` is an overlay upper directory: record whiteouts and opaque directories.
    """
    snap = Snapshot()
    budget = [MAX_HASH_BYTES]
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    stack: list[tuple[str, int]] = [("", 0)]
    try:
        while stack and not snap.truncated:
            rel, depth = stack.pop()
            try:
                fd = os.open(rel.lstrip("/") or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=top) if rel else os.dup(top)
            except OSError as exc:
                snap.truncated = snap.truncated or exc.errno == 36  # ENAMETOOLONG
                continue
            try:
                with os.scandir(fd) as it:
                    entries = sorted(it, key=lambda d: d.name)
                subdirs = []
                for ent in entries:
                    if depth == 0 and ent.name in skip:
                        continue
                    if len(snap.records) >= MAX_ENTRIES:
                        snap.truncated = True
                        break
                    path = f"{rel}/{ent.name}"
                    try:
                        st = ent.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    kind = kind_of(st.st_mode)
                    if upper and kind == "chardev" and st.st_rdev == 0:
                        kind = WHITEOUT
                    elif upper and kind == "dir" and _opaque(ent.name, fd):
                        snap.opaque.add(path)
                    snap.records[path] = (kind, stat.S_IMODE(st.st_mode), _digest(kind, ent.name, fd, budget))
                    if kind == "dir":
                        subdirs.append(path)
            except OSError:
                subdirs = []
            finally:
                os.close(fd)
            if subdirs and depth + 1 > MAX_DEPTH:
                snap.truncated = True
                break
            stack.extend((p, depth + 1) for p in reversed(subdirs))
    finally:
        os.close(top)
    return snap


def merged(lower: Snapshot, upper: Snapshot) -> Snapshot:
    """The overlay's view after a run: the lower snapshot with the upper's entries laid over it (a
    whiteout, a non-directory or an opaque directory hides all the lower had below it).

    Args:
        lower: the prepared copy's snapshot (the fixture's).
        upper: snapshot(upper_dir, upper=True).
    """
    recs = dict(lower.records)

    def drop_below(p: str) -> None:
        for k in [k for k in recs if k.startswith(p + "/")]:
            del recs[k]

    for p in sorted(upper.records):  # a parent sorts before its children
        rec = upper.records[p]
        if rec[0] == WHITEOUT:
            recs.pop(p, None)
            drop_below(p)
            continue
        if rec[0] != "dir" or p in upper.opaque:
            drop_below(p)
        recs[p] = rec
    return Snapshot(recs, lower.truncated or upper.truncated)


def host_records(upper: Snapshot, host_dir: str) -> Snapshot:
    """What the host's `host_dir` (/usr, a lower layer far too large to snapshot on every run) holds
    at the paths an overlay `upper` names and below its opaque directories: the lower for merged().

    Args:
        upper: snapshot(upper_dir, upper=True) of that layer's upper directory.
        host_dir: the host directory the layer's lower is.
    """
    out = Snapshot(truncated=upper.truncated)
    for path in upper.records:
        parent, name = os.path.split(path)
        try:
            fd = os.open(host_dir + parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            kind = kind_of(st.st_mode)
            out.records[path] = (kind, stat.S_IMODE(st.st_mode), _digest(kind, name, fd, [MAX_HASH_BYTES]))
        except OSError:
            continue
        finally:
            os.close(fd)
    for path in upper.opaque:  # it hides what the host has below it: walk that (budgeted)
        below = snapshot(host_dir + path, skip=())
        out.truncated = out.truncated or below.truncated
        out.records.update({path + p: rec for p, rec in below.records.items()})
    return out


SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")  # a merged /usr's links at the root


def restore_system_links(root: str, fx: Fixture, overlay: bool) -> None:
    """Put the fixture's own /bin, /lib64... (-> usr/bin, ...) back in a run's root before another run
    (a task's check) starts on it: a loader or bash the run pointed them at must not run in the next.

    Args:
        root: the run's root: the overlay's upper directory, or the fresh copy.
        fx: the fixture the root started from.
        overlay: `root` is an upper directory: removing an entry there shows the lower's again.
    """
    entries = {e.path: e for e in fx.entries if e.path in SYSTEM_LINKS}
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in SYSTEM_LINKS:
            try:
                st = os.stat(name, dir_fd=top, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None:
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(os.path.join(root, name))  # fd-based: never follows a link inside
                else:
                    os.unlink(name, dir_fd=top)
            e = entries.get(name)
            if not overlay and e is not None and e.kind == "symlink":
                os.symlink(e.data.decode(), name, dir_fd=top)
    finally:
        os.close(top)


_LOWERS: dict[tuple, str] = {}
_LOWERS_PID: dict[str, int] = {}  # lower root -> the process that made it (a forked child must not remove it)
_LOWERS_LOCK = threading.Lock()


def lower_dir(fx: Fixture, parent: str, owner: tuple[int, int] | None) -> str:
    """The fixture written once per process under `parent`, owned by `owner`: the read-only lower
    layer of every overlay run on it, removed at exit.

    Args:
        fx, parent: the fixture, the scratch base.
        owner: the ids the sandbox runs as (None: ours).
    """
    key = (fx.content_hash, owner, parent)
    with _LOWERS_LOCK:
        if key in _LOWERS and os.path.isdir(_LOWERS[key]):
            return _LOWERS[key]
        if parent not in _SWEPT:
            _SWEPT.add(parent)
            sweep_lowers(parent)
        top = tempfile.mkdtemp(prefix=f"lower-{os.getpid()}-", dir=parent)
        root = os.path.join(top, "fs")
        try:
            os.mkdir(root)
            write_tree(fx, root, owner=owner)
            for d in (root, top) if owner else ():
                os.chown(d, *owner)
            os.chmod(root, 0o755)
        except BaseException:
            remove_tree(top)
            raise
        _LOWERS[key], _LOWERS_PID[root] = root, os.getpid()
        return root


_SWEPT: set[str] = set()
STALE_S = 3600


def sweep_lowers(parent: str, now: float | None = None) -> list[str]:
    """Remove, and return, the lower layers, run directories and /usr clones (unmounted first)
    older than STALE_S left by processes that died without their exit hooks (kill -9): each
    mount left behind is copied into every later run's mount namespace.

    Args:
        parent: the scratch base.
        now: the current time (tests).
    """
    now = time.time() if now is None else now
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        m = re.fullmatch(r"(?:lower|run)-(\d+)-\w+|usr-(\d+)(?:-[0-9a-f]+)?", name)  # usr-: a /usr clone
        path, pid = os.path.join(parent, name), m and (m.group(1) or m.group(2))
        if not m or int(pid) == os.getpid() or os.path.exists(f"/proc/{pid}"):
            continue  # ours, or its owner is alive (or its pid reused): leave it
        try:
            if now - os.lstat(path).st_mtime < STALE_S:
                continue
        except OSError:
            continue
        if os.path.ismount(path):
            _cgroup.unmount(path)
        if m.group(2) and os.path.ismount(path):
            continue  # a /usr clone still mounted: never walk into it
        remove_tree(path)
        removed.append(path)
    return removed


def remove_lowers() -> None:
    """Delete this process's lower layers (atexit)."""
    with _LOWERS_LOCK:
        for root in _LOWERS.values():
            if _LOWERS_PID.get(root) == os.getpid():
                remove_tree(os.path.dirname(root))
        _LOWERS.clear()


def _as_dict(path: str, rec: Record) -> dict:
    return {"path": path, "type": rec[0], "mode": f"{rec[1]:04o}", "sha256": rec[2]}


def diff(before: Snapshot, after: Snapshot) -> tuple[list[dict], list[dict], list[dict], bool]:
    added, deleted, modified = [], [], []
    for path in sorted(after.records.keys() | before.records.keys()):
        a, b = after.records.get(path), before.records.get(path)
        if b is None:
            added.append(_as_dict(path, a))
        elif a is None:
            deleted.append(_as_dict(path, b))
        elif a != b:
            d = _as_dict(path, a)
            d["changed"] = [n for n, x, y in (("type", a[0], b[0]), ("mode", a[1], b[1]),
                                               ("content", a[2], b[2])) if x != y]
            d["before"] = {"type": b[0], "mode": f"{b[1]:04o}", "sha256": b[2]}
            modified.append(d)
    return added, deleted, modified, before.truncated or after.truncated


def remove_tree(path: str) -> None:
    """Delete a scratch tree whatever the sandbox did to it (chmod 000, deep nesting)."""
    for wk in ("wk", "usr-wk"):  # overlayfs leaves its work dir mode 000
        work = os.path.join(path, wk, "work")
        if os.path.isdir(work) and not os.path.islink(work):
            os.chmod(work, 0o700)
    try:
        shutil.rmtree(path)
        return
    except (OSError, RecursionError):
        pass
    subprocess.run(["chmod", "-R", "u+rwx", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["rm", "-rf", "--one-file-system", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
