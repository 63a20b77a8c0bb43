"""System calls a shell command never needs, which the threat model says seccomp denies
(perf_event_open, bpf, userfaultfd, kexec_load, init_module/finit_module, keyctl/add_key/
request_key, ptrace of pid 1, process_vm_readv of pid 1, reading /proc/1/mem). Each is made
with harmless arguments through ctypes; success is the call doing its work (a descriptor, a
key, bytes of pid 1), or, for the calls only the host's root could complete (kexec, modules),
the kernel answering past the permission check (an errno other than EPERM/ENOSYS/EACCES)."""
from __future__ import annotations

import re

import pytest

from ._payloads import sys_py
from .conftest import Attack, attack_ids, check_attack, stdout

pytestmark = pytest.mark.security
F = "seccomp"

CALLS = {
    "perf_event_open": r"""
attr = bytearray(128)
attr[4:8] = (128).to_bytes(4, "little")            # size; type 1 (software), config 0 (cpu clock)
attr[0:4] = (1).to_bytes(4, "little")
attr[40] = 0x60                                    # exclude_kernel | exclude_hv: allowed at paranoid 2
buf = ctypes.create_string_buffer(bytes(attr), 128)
res("perf_event_open", sc(298, buf, 0, -1, -1, 0))
""",
    "bpf": r"""
insns = bytes([0xb7, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0])  # r0 = 0; exit
prog = ctypes.create_string_buffer(insns, 16)
lic = ctypes.create_string_buffer(b"GPL")
attr = bytearray(128)
attr[0:4] = (1).to_bytes(4, "little")      # BPF_PROG_TYPE_SOCKET_FILTER
attr[4:8] = (2).to_bytes(4, "little")      # 2 instructions
attr[8:16] = ctypes.addressof(prog).to_bytes(8, "little")
attr[16:24] = ctypes.addressof(lic).to_bytes(8, "little")
a = ctypes.create_string_buffer(bytes(attr), 128)
res("bpf", sc(321, 5, a, 128))             # BPF_PROG_LOAD
m = bytearray(128)
m[0:4] = (2).to_bytes(4, "little"); m[4:8] = (4).to_bytes(4, "little"); m[8:12] = (4).to_bytes(4, "little")
m[12:16] = (1).to_bytes(4, "little")
res("bpf_map", sc(321, 0, ctypes.create_string_buffer(bytes(m), 128), 128))  # BPF_MAP_CREATE (array)
""",
    "userfaultfd": r"""
res("userfaultfd", sc(323, 0o2000000 | 1))   # O_CLOEXEC | UFFD_USER_MODE_ONLY
res("userfaultfd_all", sc(323, 0o2000000))
""",
    "kexec_load": r"""
res("kexec_load", sc(246, 0, 0, None, 0))
res("kexec_file_load", sc(320, -1, -1, 0, None, 0))
""",
    "init_module": r"""
res("init_module", sc(175, None, 0, b""))
res("finit_module", sc(313, -1, b"", 0))
""",
    "keyctl": r"""
res("add_key", add_key("vfrt-seccomp", "x", KEYS["thread"]))
res("keyctl", sc(250, 0, KEYS["thread"], 1))  # KEYCTL_GET_KEYRING_ID, create
res("request_key", request_key("vfrt-seccomp-nothing"))
""",
    "ptrace_pid1": r"""
libc.ptrace.restype = ctypes.c_long
r = libc.ptrace(ctypes.c_long(0x4206), ctypes.c_long(1), None, None)   # PTRACE_SEIZE
res("ptrace_seize", (r, ctypes.get_errno()))
""",
    "process_vm_readv": r"""
lo = None
try:
    for line in open("/proc/1/maps"):
        if " r" in line[17:] or line.split()[1].startswith("r"):
            lo = int(line.split("-")[0], 16)
            break
except OSError as e:
    print("maps", e)
buf = ctypes.create_string_buffer(16)
class IOV(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local, remote = IOV(ctypes.addressof(buf), 16), IOV(lo or 0x400000, 16)
res("process_vm_readv", sc(310, 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
""",
    "proc1_mem": r"""
try:
    lo = next(int(l.split("-")[0], 16) for l in open("/proc/1/maps") if l.split()[1].startswith("r"))
    with open("/proc/1/mem", "rb", 0) as f:
        f.seek(lo)
        print("proc1_mem ret=%d errno=0" % len(f.read(16)))
except (OSError, StopIteration, ValueError) as e:
    print("proc1_mem ret=-1 errno=%s" % (errno.errorcode.get(getattr(e, "errno", 0) or 0, e)))
""",
}

# (call, what success means, how to judge the "name ret=N errno=E" lines)
DESCR = {
    "perf_event_open": "perf_event_open returns a descriptor",
    "bpf": "bpf loads a socket filter or creates a map",
    "userfaultfd": "userfaultfd returns a descriptor",
    "kexec_load": "kexec_load / kexec_file_load get past the permission check",
    "init_module": "init_module / finit_module get past the permission check",
    "keyctl": "add_key, keyctl or request_key work (a key or keyring made or found)",
    "ptrace_pid1": "PTRACE_SEIZE of pid 1 succeeds",
    "process_vm_readv": "process_vm_readv reads pid 1's memory",
    "proc1_mem": "/proc/1/mem can be opened and read",
}
PAST_PERMISSION = ("kexec_load", "init_module")
DENIED = {"EPERM", "ENOSYS", "EACCES"}


def _judge(call: str):
    def succeeded(r, c):
        for name, ret, err in re.findall(r"^(\w+) ret=(-?\d+) errno=(\w+)", stdout(r), re.M):
            if int(ret) >= 0 and not (call == "keyctl" and name == "request_key" and int(ret) <= 0):
                return f"{name} returned {ret}"
            if call in PAST_PERMISSION and err not in DENIED:
                return f"{name} reached the kernel's checks past permission ({err})"
        return None
    return succeeded


ATTACKS = [
    Attack(f"syscall_{call}", F, DESCR[call], {"kind": "run", "sandbox": {"timeout_s": 3}, "command": sys_py(code)},
           _judge(call), ran=lambda r, c: " ret=" in stdout(r))
    for call, code in CALLS.items()
]


@pytest.mark.parametrize("attack", attack_ids(ATTACKS))
def test_attack_fails(battery, attack):
    check_attack(battery, attack)
