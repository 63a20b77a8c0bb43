"""The seccomp filter every sandboxed command runs under, built with libseccomp (through ctypes).

What it denies and why: docs/sandbox-threat-model.md, (e). Denied calls fail with EPERM, so a tool
that tries one reports an error instead of dying. The program is exported once per process in the
format bubblewrap's `--seccomp FD` reads, which vf-sandbox reads too. Where libseccomp is missing,
`program()` is None and `verifirst doctor` says so.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import tempfile

__all__ = ["DENIED", "DENIED_ON_PID1", "program", "program_fd", "unavailable_reason"]

DENIED = ("keyctl", "add_key", "request_key", "perf_event_open", "bpf", "userfaultfd",
          "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
          "acct", "swapon", "swapoff", "reboot", "syslog", "iopl", "ioperm", "quotactl",
          "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "fanotify_init",
          "io_uring_setup", "io_uring_enter", "io_uring_register", "kcmp", "setns",
          "mbind", "set_mempolicy", "move_pages", "vhangup", "pivot_root", "mount", "umount2",
          "fsopen", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr")
# (call, argument index holding the target pid): denied when that pid is 1, the run's init.
DENIED_ON_PID1 = (("ptrace", 1), ("process_vm_readv", 0), ("process_vm_writev", 0),
                  ("pidfd_open", 0), ("kill", 0), ("tkill", 0), ("tgkill", 0))

_ALLOW = 0x7FFF0000
_ERRNO_EPERM = 0x00050000 | errno.EPERM
_CMP_MASKED_EQ = 7  # the low 32 bits only: a pid is an int, whatever the register's upper half holds


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


@functools.cache
def _lib() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def unavailable_reason() -> str | None:
    """Why no filter can be built here (None: it can)."""
    return None if _lib() is not None else "libseccomp (libseccomp.so.2) is not installed"


@functools.cache
def program() -> bytes | None:
    """The filter as bubblewrap's `--seccomp` reads it (None where libseccomp is missing). A call
    this architecture does not have is skipped; a call from a foreign architecture (32-bit code)
    kills the process, libseccomp's default."""
    lib = _lib()
    if lib is None:
        return None
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise OSError(ctypes.get_errno(), "seccomp_init failed")
    try:
        for name, index in [(name, None) for name in DENIED] + list(DENIED_ON_PID1):
            if (nr := lib.seccomp_syscall_resolve_name(name.encode())) < 0:
                continue
            cmps = [] if index is None else [_ArgCmp(index, _CMP_MASKED_EQ, 0xFFFFFFFF, 1)]
            if (rc := lib.seccomp_rule_add_array(ctx, _ERRNO_EPERM, nr, len(cmps), (_ArgCmp * 1)(*cmps))) != 0:
                raise OSError(-rc, f"seccomp rule for syscall {nr}: {os.strerror(-rc)}")
        with tempfile.TemporaryFile() as fh:
            rc = lib.seccomp_export_bpf(ctx, fh.fileno())
            if rc != 0:
                raise OSError(-rc, f"seccomp_export_bpf failed: {os.strerror(-rc)}")
            fh.seek(0)
            return fh.read()
    finally:
        lib.seccomp_release(ctx)


def program_fd(ids: tuple[int, int] | None) -> int | None:
    """A pipe's read end holding program() for one run (the caller passes it on and closes it);
    None where there is no filter.

    Args:
        ids: the ids the launcher runs as, who must be able to read the pipe.
    """
    code = program()
    if code is None:
        return None
    r, w = os.pipe()
    try:
        if ids:
            os.fchown(r, *ids)
        os.write(w, code)  # some hundred bytes: less than the pipe's buffer
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)
    return r
