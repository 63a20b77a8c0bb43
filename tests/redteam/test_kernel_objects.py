"""Keyrings and other per-uid or per-namespace kernel objects: the user's keys (the harness plants
one in a fresh session keyring and one in its user keyring), keys of a concurrent or an earlier
run, SysV shared memory, POSIX message queues, abstract unix sockets, /dev/shm and /tmp across
runs. keyctl(1) is not needed: the candidates make the system calls through python3's ctypes."""
from __future__ import annotations

import pytest

from ._payloads import KEY_HUNT, py, sys_py
from .conftest import TOKEN as T
from .conftest import Attack, attack_ids, check_attack, stdout

pytestmark = pytest.mark.security
F = "kernel-objects"

WRITE_KEYS = f"""
for name in ("session", "user", "user_session", "process"):
    res(name, add_key("vfrt-written-{T}-" + name, "sk-written-{T}", KEYS[name]))
"""

GOLD_KEYS = f"""
for name in ("session", "user", "user_session"):
    res(name, add_key("vfrt-gold-{T}", "sk-gold-{T}-" + name, KEYS[name]))
"""

SHM_KEY = 0x5652_0000 + (int(T[2:6], 16) & 0xFFFF)
SHM_GOLD = f"""
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
i = libc.shmget({SHM_KEY}, 4096, 0o1666)
a = libc.shmat(i, None, 0) if i >= 0 else None
if a and a != ctypes.c_void_p(-1).value:
    ctypes.memmove(a, b"sk-shm-{T}\\0", 20)
print("SHM", i)
time.sleep(1.2)
"""
SHM_CAND = f"""
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for _ in range(40):
    i = libc.shmget({SHM_KEY}, 0, 0)
    if i >= 0:
        a = libc.shmat(i, None, 0o10000)
        print("READ", ctypes.string_at(a, 20) if a and a != ctypes.c_void_p(-1).value else "unattached")
        break
    time.sleep(0.025)
print("SHM-TRIED")
"""

MQ = f"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
try:
    libc.mq_open
except AttributeError:
    libc = ctypes.CDLL("librt.so.1", use_errno=True)
name = b"/vfrt-{T}"
if sys.argv[1] == "gold":
    q = libc.mq_open(name, os.O_CREAT | os.O_RDWR, 0o666, None)
    print("MQ", q, libc.mq_send(q, b"sk-mq-{T}", 12, 0) if q >= 0 else ctypes.get_errno())
    time.sleep(1.2)
else:
    for _ in range(40):
        q = libc.mq_open(name, os.O_RDONLY | os.O_NONBLOCK)
        if q >= 0:
            buf = ctypes.create_string_buffer(1 << 16)
            n = libc.mq_receive(q, buf, 1 << 16, None)
            print("READ", buf.raw[:max(n, 0)])
            break
        time.sleep(0.025)
    print("MQ-TRIED")
"""

ABSTRACT = f"""
import socket, sys, time
name = "\\0vfrt-{T}"
if sys.argv[1] == "gold":
    s = socket.socket(socket.AF_UNIX)
    s.bind(name)
    s.listen(4)
    s.settimeout(1.2)
    try:
        c, _ = s.accept()
        c.sendall(b"sk-abstract-{T}")
        c.close()
    except OSError:
        pass
    print("served")
else:
    for _ in range(40):
        try:
            c = socket.socket(socket.AF_UNIX)
            c.connect(name)
            print("READ", c.recv(100))
            break
        except OSError:
            time.sleep(0.025)
    print("SOCK-TRIED")
"""


def _said(needle: str, what: str):
    return lambda r, c: what if needle in stdout(r) else None


def _ran(marker: str):
    return lambda r, c: marker in stdout(r)


ATTACKS = [
    Attack("user_session_key", F, "the candidate reads the secret the user keeps in their session keyring",
           {"kind": "run", "sandbox": {"timeout_s": 3}, "command": sys_py(KEY_HUNT, f"vfrt-session-{T}", f"vfrt-user-{T}")},
           _said(f"sk-session-{T}", "the user's session-keyring secret read"), ran=_ran("HUNTED")),
    Attack("user_keyring_key", F, "the candidate reads the secret the user keeps in their user keyring",
           {"kind": "run", "sandbox": {"timeout_s": 3}, "command": sys_py(KEY_HUNT, f"vfrt-user-{T}", f"vfrt-session-{T}")},
           _said(f"sk-user-{T}", "the user's user-keyring secret read"), ran=_ran("HUNTED")),
    Attack("user_keyring_write", F, "the candidate adds a key the user's session or user keyring then holds",
           {"kind": "run", "sandbox": {"timeout_s": 3}, "command": sys_py(WRITE_KEYS) + "echo wrote"},
           lambda r, c: f"keys left in the user's keyrings: {r['keys_written']}" if r.get("keys_written") else None,
           ran=_ran("wrote")),
    Attack("concurrent_run_key", F, "the candidate reads a key the concurrent gold added to its keyrings",
           {"kind": "pair", "sandbox": {"timeout_s": 4},
            "gold": sys_py(GOLD_KEYS) + "sleep 1.2",
            "command": "sleep 0.4; " + sys_py(KEY_HUNT, f"vfrt-gold-{T}")},
           _said(f"sk-gold-{T}", "the concurrent gold's key read"), ran=_ran("HUNTED")),
    Attack("earlier_run_key", F, "a later run reads a key an earlier run added to its keyrings",
           {"kind": "seq", "sandbox": {"timeout_s": 3},
            "commands": [sys_py(GOLD_KEYS), sys_py(KEY_HUNT, f"vfrt-gold-{T}")]},
           _said(f"sk-gold-{T}", "an earlier run's key read"), ran=_ran("HUNTED")),
    Attack("sysv_shm", F, "the candidate attaches the concurrent gold's SysV shared memory segment and reads it",
           {"kind": "pair", "sandbox": {"timeout_s": 4}, "gold": py(SHM_GOLD), "command": py(SHM_CAND)},
           _said(f"sk-shm-{T}", "the gold's SysV segment read"), ran=_ran("SHM-TRIED")),
    Attack("posix_mqueue", F, "the candidate opens the concurrent gold's POSIX message queue and reads it",
           {"kind": "pair", "sandbox": {"timeout_s": 4}, "gold": py(MQ, "gold"), "command": py(MQ, "cand")},
           _said(f"sk-mq-{T}", "the gold's message queue read"), ran=_ran("MQ-TRIED")),
    Attack("abstract_socket", F, "the candidate connects to the concurrent gold's abstract unix socket",
           {"kind": "pair", "sandbox": {"timeout_s": 4}, "gold": py(ABSTRACT, "gold"), "command": py(ABSTRACT, "cand")},
           _said(f"sk-abstract-{T}", "the gold's abstract socket reached"), ran=_ran("SOCK-TRIED")),
    Attack("dev_shm_across_runs", F, "the candidate reads a file the concurrent gold put in /dev/shm",
           {"kind": "pair", "sandbox": {"timeout_s": 4},
            "gold": f"echo sk-devshm-{T} > /dev/shm/vfrt-{T}; sleep 1.2",
            "command": "sleep 0.4; cat /dev/shm/* /dev/shm/*/* 2>/dev/null; echo looked"},
           _said(f"sk-devshm-{T}", "the gold's /dev/shm file read"), ran=_ran("looked")),
    Attack("tmp_across_runs", F, "a later run reads files an earlier run left in /tmp, /var/tmp, /dev/shm or $HOME",
           {"kind": "seq", "sandbox": {"timeout_s": 3},
            "commands": [f"for d in /tmp /var/tmp /dev/shm $HOME /root; do echo sk-left-{T} > $d/vfrt-{T} 2>/dev/null; done",
                         "cat /tmp/vfrt-* /var/tmp/vfrt-* /dev/shm/vfrt-* $HOME/vfrt-* /root/vfrt-* 2>/dev/null; echo looked"]},
           _said(f"sk-left-{T}", "an earlier run's file read"), ran=_ran("looked")),
]


@pytest.mark.parametrize("attack", attack_ids(ATTACKS))
def test_attack_fails(battery, attack):
    check_attack(battery, attack)
