"""Escaping the run's limits: through pid 1 (ptrace makes it fork a shell that has pid 1's
limits, not the command's), and limits that hold per process but not per run (memory over
several processes, /dev/shm). Sizes are kept small: the limits are
set low (memory_mb=64..96, nproc=32, file_size_mb=8, cpu_s=1) and each attack goes 2x past them."""
from __future__ import annotations

import re

import pytest

from ._payloads import inject
from .conftest import Attack, attack_ids, check_attack, marker_lines, stdout

pytestmark = pytest.mark.security
F = "limits"


def _num(res, prefix: str) -> float | None:
    vals = [float(m.group(0)) for v in marker_lines(stdout(res), prefix)
            if (m := re.match(r"-?\d+(\.\d+)?", v))]
    return max(vals) if vals else None


def _over(prefix: str, limit: float, what: str):
    def succeeded(res, ctx):
        n = _num(res, prefix)
        return f"{what}: {n:g} (limit {limit:g})" if n is not None and n > limit else None
    return succeeded


def _ran(marker: str):
    """The attack printed `marker`, or a per-run limit killed the whole run before it could (held)."""
    def ran(res, ctx):
        r = (res.get("runs") or [{}])[-1]
        killed = not r.get("timed_out") and (r.get("exit_code") in (137, -9) or r.get("signal") == 9)
        return marker in stdout(res) or killed
    return ran


ALLOC = "/usr/bin/python3 -c 'import sys; x = b\"\\1\" * (int(sys.argv[1]) << 20); print(\"ALLOC\", len(x) >> 20)' "
# burns CPU up to argv[1] seconds, printing its CPU time each 0.05 s of it (so a kill shows how far it got)
BURN = ("/usr/bin/python3 -c 'import sys, time\nn = 0.05\nwhile n <= float(sys.argv[1]):\n"
        "    while time.process_time() < n: pass\n    print(\"CPU\", round(n, 2), flush=True); n += 0.05' ")

ATTACKS = [
    Attack("ptrace_pid1_memory", F, "a shell forked from pid 1 (ptrace) allocates 160 MB under memory_mb=64",
           {"kind": "run", "sandbox": {"timeout_s": 6, "memory_mb": 64},
            "command": inject(ALLOC + "160")},
           _over("ALLOC", 64, "MB allocated in one process"), ran=_ran("INJECT")),
    Attack("ptrace_pid1_nproc", F, "a shell forked from pid 1 (ptrace) runs 60 processes at once under nproc=32",
           {"kind": "run", "sandbox": {"timeout_s": 6, "nproc": 32},
            "command": inject("for i in $(seq 60); do sleep 2 & done 2>/dev/null; sleep 0.2; "
                              "set -- /proc/[0-9]*; echo PROCS $#")},
           _over("PROCS", 40, "processes in the run"), ran=_ran("INJECT")),
    Attack("ptrace_pid1_fsize", F, "a shell forked from pid 1 (ptrace) writes a 20 MB file under file_size_mb=8",
           {"kind": "run", "sandbox": {"timeout_s": 6, "file_size_mb": 8},
            "command": inject("head -c 20M /dev/zero > /tmp/big; echo SIZE $(( $(stat -c %s /tmp/big) >> 20 ))")},
           _over("SIZE", 8, "MB file"), ran=_ran("INJECT")),
    Attack("ptrace_pid1_cpu", F, "a shell forked from pid 1 (ptrace) uses 1.3 s of CPU under cpu_s=1",
           {"kind": "run", "sandbox": {"timeout_s": 6, "cpu_s": 1},
            "command": inject(BURN + "1.3")},
           _over("CPU", 1.02, "CPU seconds in one process (RLIMIT_CPU stops it at 1.0)"), ran=_ran("INJECT")),
    Attack("memory_many_processes", F, "3 processes hold 60 MB each at once (180 MB) under memory_mb=96",
           {"kind": "run", "sandbox": {"timeout_s": 4, "memory_mb": 96},
            "command": "for i in 1 2 3; do /usr/bin/python3 -c 'import time, sys; x = b\"\\1\" * (60 << 20); "
                       "open(\"/tmp/held-\" + sys.argv[1], \"w\").close(); time.sleep(1.2)' $i & done; "
                       "for t in $(seq 100); do set -- /tmp/held-*; [ -e \"$1\" ] && [ $# -ge 3 ] && break; sleep 0.02; done; "
                       "set -- /tmp/held-*; [ -e \"$1\" ] || set --; echo HELD $(( $# * 60 )); kill $(jobs -p) 2>/dev/null"},
           _over("HELD", 144, "MB held at once by the run's processes"), ran=_ran("HELD")),
    Attack("shm_beyond_memory", F, "the run stores 160 MB in /dev/shm (tmpfs: memory) under memory_mb=64",
           {"kind": "run", "sandbox": {"timeout_s": 4, "memory_mb": 64},
            "command": "for i in 1 2 3 4; do head -c 40M /dev/zero > /dev/shm/f$i 2>/dev/null; "
                       "echo SHM $(( $(cat /dev/shm/f* 2>/dev/null | wc -c) >> 20 )); done"},
           _over("SHM", 128, "MB stored in /dev/shm"), ran=_ran("SHM")),
    Attack("cgroup_escape", F, "the run moves itself to another cgroup (any cgroup.procs or tasks file it can "
           "write) or raises one of its cgroup limits (memory, pids)",
           {"kind": "run", "sandbox": {"timeout_s": 4},
            "command": "before=$(cat /proc/self/cgroup | tr '\\n' ' '); for f in $(find /sys/fs/cgroup -maxdepth 4 "
                       "\\( -name cgroup.procs -o -name tasks \\) 2>/dev/null | head -100); do echo $$ 2>/dev/null > $f "
                       "&& echo MOVED $f; done; for f in $(find /sys/fs/cgroup -maxdepth 4 \\( -name memory.max -o "
                       "-name memory.limit_in_bytes -o -name pids.max -o -name memory.memsw.limit_in_bytes \\) "
                       "2>/dev/null | head -100); do echo max 2>/dev/null > $f && echo RAISED $f; echo -1 2>/dev/null > $f "
                       "&& echo RAISED $f; done; after=$(cat /proc/self/cgroup | tr '\\n' ' '); "
                       "[ \"$before\" = \"$after\" ] || echo \"MOVED cgroup $before -> $after\"; echo tried"},
           lambda r, c: next((ln for ln in stdout(r).splitlines() if ln.startswith(("MOVED", "RAISED"))), None),
           ran=_ran("tried")),
]


@pytest.mark.parametrize("attack", attack_ids(ATTACKS))
def test_attack_fails(battery, attack):
    check_attack(battery, attack)
