"""The host's /usr as a lower layer a run can write over (copy-on-write), as root.

A task's setup may replace a binary (`cp stub /usr/bin/hostname`). Inside a run's user namespace
the host's root-owned files belong to nobody, so an overlay could not copy them up: as root we
make, once per process, a read-only idmapped clone of /usr in which host ids 0.. show as the
sandbox's (root inside a run), attached under the scratch base, which only root can enter. Where
it cannot be made (not root, no idmapped mounts), `lower()` is None and /usr is a read-only bind.
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import os

from verifirst.verifiers.bash import _bwrap, _cgroup

__all__ = ["lower", "unavailable_reason"]

_OPEN_TREE, _MOVE_MOUNT, _MOUNT_SETATTR = 428, 429, 442  # x86_64 and aarch64 share these numbers
OPEN_TREE_CLONE, AT_RECURSIVE, AT_EMPTY_PATH = 1, 0x8000, 0x1000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV, MOUNT_ATTR_IDMAP = 0x1, 0x2, 0x4, 0x100000


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


_STATE: dict[str, object] = {}
ADMIN_NPROC = 16  # the mapping's own namespace runs nothing


def _make(at: str, ids: tuple[int, int], src: str) -> str:
    libc = _cgroup.libc()
    tree = libc.syscall(_OPEN_TREE, -100, os.fsencode(src), OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC)
    if tree < 0:
        raise OSError(ctypes.get_errno(), f"open_tree {src}: {os.strerror(ctypes.get_errno())}")
    ns = None
    try:
        ns = _bwrap.admin_userns(ids, ADMIN_NPROC)  # ids 0.. on disk show as ids[0].. (root as the run's root)
        attr = _MountAttr(MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, ns)
        if libc.syscall(_MOUNT_SETATTR, tree, b"", AT_EMPTY_PATH | AT_RECURSIVE, ctypes.byref(attr),
                        ctypes.sizeof(attr)) != 0:
            raise OSError(ctypes.get_errno(), f"idmap {src}: {os.strerror(ctypes.get_errno())}")
        os.makedirs(at, mode=0o755, exist_ok=True)
        if libc.syscall(_MOVE_MOUNT, tree, b"", -100, os.fsencode(at), MOVE_MOUNT_F_EMPTY_PATH) != 0:
            raise OSError(ctypes.get_errno(), f"attach {src} at {at}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(tree)
        if ns is not None:
            os.close(ns)
    atexit.register(_detach, at, os.getpid())
    return at


def _detach(at: str, owner: int) -> None:
    if os.getpid() == owner:
        _cgroup.unmount(at)


def lower(base: str, ids: tuple[int, int] | None, src: str = "/usr") -> str | None:
    """The idmapped read-only clone of `src` under `base` (made on first use), or None.

    Args:
        base: the scratch base (0711, root's).
        ids: the sandbox's host ids; None (not root): no clone.
        src: the tree: the host's /usr, or a task image's.
    """
    if ids is None or os.geteuid() != 0:
        _STATE.setdefault("why", "not root: /usr is read-only in runs")
        return None
    key = f"{base}:{ids}:{os.getpid()}:{src}"
    if key not in _STATE:
        tag = "" if src == "/usr" else "-" + hashlib.sha256(os.fsencode(src)).hexdigest()[:12]
        try:
            _STATE[key] = _make(os.path.join(base, f"usr-{os.getpid()}{tag}"), ids, src)
        except (OSError, _bwrap.SandboxUnavailable) as exc:
            _STATE[key], _STATE["why"] = None, f"no idmapped /usr here ({exc}): /usr is read-only in runs"
    return _STATE[key]  # type: ignore[return-value]


def unavailable_reason() -> str | None:
    """Why runs cannot write over /usr here (None: they can, or it was not tried yet)."""
    return _STATE.get("why")  # type: ignore[return-value]
