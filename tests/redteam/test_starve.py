"""Starving or disturbing the concurrent run of a pair (Sandbox.run_pair, as FEH runs gold and
candidate): the gold waits a moment, then does a small thing that works in an idle sandbox; the
candidate first takes a shared resource and holds it (parallel_items_*: another item's candidate, in a
thread of its own, as under num_threads). Success: the gold's output changed (or, for
CPU and inodes, the gold measurably pays for the candidate)."""
from __future__ import annotations

import re

import pytest

from ._payloads import sys_py
from .conftest import Attack, attack_ids, check_attack, marker_lines, stdout

pytestmark = pytest.mark.security
F = "starve"


def _gold_changed(want: str):
    def succeeded(res, ctx):
        g = res["runs"][0]
        if g["stdout"].strip() == want and not g["timed_out"]:
            return None
        return f"the gold printed {g['stdout'].strip()[:80]!r} instead of {want!r} " \
               f"(timed out: {g['timed_out']}; stderr {g['stderr'].strip()[:120]!r})"
    return succeeded


def _cand_said(marker: str):
    return lambda res, ctx: any(marker in r["stdout"] for r in res.get("runs", [])[1::2])


HOLD_INOTIFY = r"""
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
for _ in range(300):
    fd = libc.inotify_init()
    if fd < 0:
        break
    fds.append(fd)
print("INOTIFY-HELD", len(fds), flush=True)
time.sleep(2.0)
"""

HOLD_KEYS = r"""
import time
n, last = 0, 0
for i in range(400):
    r, err = add_key(f"vfrt-fill-{i}", "x" * 200, KEYS["session"])
    if r < 0:
        last = err
        break
    n += 1
print("KEYS-HELD", n, errno.errorcode.get(last, last), flush=True)
time.sleep(2.0)
"""

GOLD_KEY = r"""
r, err = add_key("vfrt-gold-quota", "y" * 10, KEYS["session"])
print("KEY", "ok" if r > 0 else errno.errorcode.get(err, err))
"""

CPU_GOLD = ("sleep 0.5; python3 -c 'import time\nt, c = time.time(), time.process_time()\n"
            "for _ in range(40): sum(range(200000))\n"
            "print(\"GOLD\", round(time.time() - t, 4), round(time.process_time() - c, 4))'")


def _slowdown(res, ctx):
    """(gold's wall/cpu beside a hog) / (the same beside an idle candidate)."""
    ratios = []
    for i in (0, 2):
        m = re.search(r"GOLD ([\d.]+) ([\d.]+)", res["runs"][i]["stdout"])
        if not m:
            return "the gold never finished beside the hog" if i == 2 else None
        wall, cpu = float(m.group(1)), max(float(m.group(2)), 1e-3)
        ratios.append(wall / cpu)
    slow = ratios[1] / max(ratios[0], 1e-3)
    return f"the gold ran {slow:.1f}x slower per CPU second beside the hog" if slow > 3 else None


ATTACKS = [
    Attack("scratch_fill", F, "the candidate fills the scratch space: the concurrent gold's 3 MB write fails "
           "(prints other than 3000000)",
           {"kind": "pair", "sandbox": {"timeout_s": 5},
            "gold": "sleep 1.0; head -c 3000000 /dev/zero > /tmp/g; wc -c < /tmp/g",
            "command": "for i in 1 2 3 4 5; do head -c 60M /dev/zero > /tmp/f$i 2>/dev/null || break; done; "
                       "echo FILLED $(df -m / | tail -1); sleep 2.0"},
           _gold_changed("3000000"), ran=_cand_said("FILLED")),
    Attack("inode_pool_shared", F, "the concurrent gold's 1000 new files show in the candidate's free-inode "
           "count (one inode pool for all runs: exhausting it starves the gold)",
           {"kind": "pair", "sandbox": {"timeout_s": 4},
            "gold": "sleep 0.3; mkdir /tmp/d && cd /tmp/d && touch $(seq 1000); sleep 1.5; echo done",
            "command": "a=$(stat -f -c %d /); m=0; end=$((SECONDS+3)); while [ $SECONDS -lt $end ]; do "
                       "d=$(( a - $(stat -f -c %d /) )); [ $d -gt $m ] && m=$d; [ $m -ge 800 ] && break; sleep 0.05; "
                       "done; echo IDELTA $m"},
           lambda r, c: next((f"free inodes fell by {v} while the gold made files" for v in marker_lines(stdout(r), "IDELTA")
                              if v.isdigit() and int(v) >= 800), None),
           ran=_cand_said("IDELTA")),
    Attack("inotify_exhaust", F, "the candidate holds every inotify instance its uid may have: the "
           "concurrent gold's inotify_init fails",
           {"kind": "pair", "sandbox": {"timeout_s": 5},
            "gold": "sleep 1.0; python3 -c 'import ctypes; print(\"INOTIFY\", \"ok\" if "
                    "ctypes.CDLL(None).inotify_init() >= 0 else \"fail\")'",
            "command": sys_py(HOLD_INOTIFY)},
           _gold_changed("INOTIFY ok"), ran=_cand_said("INOTIFY-HELD")),
    Attack("pids_exhaust", F, "the candidate holds processes up to nproc=64: the concurrent gold cannot start "
           "8 short processes",
           {"kind": "pair", "sandbox": {"timeout_s": 5, "nproc": 64},
            "gold": "mkfifo /tmp/p; exec 3<>/tmp/p; read -t 1.0 -u 3; ok=0; for i in 1 2 3 4 5 6 7 8; do "
                    "/bin/true && ok=$((ok+1)); done 2>/dev/null; echo FORKS $ok",
            "command": "for i in $(seq 70); do sleep 2 & done 2>/dev/null; echo HELD; wait"},
           _gold_changed("FORKS 8"), ran=lambda r, c: len(r.get("runs", [])) == 2),
    Attack("shm_exhaust", F, "the candidate fills /dev/shm (160 MB, bounded): the concurrent gold's 3 MB "
           "write to /dev/shm fails",
           {"kind": "pair", "sandbox": {"timeout_s": 5},
            "gold": "sleep 1.0; head -c 3000000 /dev/zero > /dev/shm/g; wc -c < /dev/shm/g",
            "command": "for i in 1 2 3 4; do head -c 40M /dev/zero > /dev/shm/f$i 2>/dev/null || break; done; "
                       "echo FILLED; sleep 2.0"},
           _gold_changed("3000000"), ran=_cand_said("FILLED")),
    Attack("keyring_quota_exhaust", F, "the candidate fills its uid's key quota: the concurrent gold's add_key "
           "fails with EDQUOT",
           {"kind": "pair", "sandbox": {"timeout_s": 5},
            "gold": "sleep 1.0; " + sys_py(GOLD_KEY), "command": sys_py(HOLD_KEYS)},
           lambda r, c: (f"the gold's add_key: {stdout(r, 0).strip()!r}" if "EDQUOT" in stdout(r, 0) else None),
           ran=_cand_said("KEYS-HELD")),
    Attack("cpu_hog", F, "40 busy loops, each in its own session (so scheduler autogroups do not pool them), "
           "slow the concurrent gold's CPU work > 3x (per CPU second, against the same gold beside an idle candidate)",
           {"kind": "pair", "sandbox": {"timeout_s": 6}, "alone": True,  # the other modes' batteries wait
            "pairs": [[CPU_GOLD, "sleep 1"],
                      [CPU_GOLD, "for i in $(seq 40); do setsid -f bash -c 'end=$((SECONDS+4)); while [ $SECONDS -lt "
                                 "$end ]; do :; done'; done; sleep 3; echo HOGGED"]]},
           _slowdown, ran=lambda r, c: len(r.get("runs", [])) == 4 and "GOLD" in r["runs"][0]["stdout"]),
]


# Two items evaluated in parallel threads (FehVerifier under num_threads): item A's pair and item B's at
# once, on one Sandbox; B's candidate takes the shared resource while A's gold runs (runs [A gold, A
# candidate, B gold, B candidate]).
ATTACKS += [
    Attack("parallel_items_scratch_fill", F, "item B's candidate, in another thread, fills the scratch space: "
           "item A's gold's 3 MB write fails (prints other than 3000000)",
           {"kind": "pair", "threads": True, "sandbox": {"timeout_s": 6},
            "pairs": [["sleep 1.0; head -c 3000000 /dev/zero > /tmp/g; wc -c < /tmp/g", "true"],
                      ["true", "for i in 1 2 3 4 5; do head -c 60M /dev/zero > /tmp/f$i 2>/dev/null || break; done; "
                               "echo FILLED; sleep 3.0"]]},
           _gold_changed("3000000"), ran=_cand_said("FILLED")),
    Attack("parallel_items_inotify", F, "item B's candidate, in another thread, holds every inotify instance "
           "its uid may have: item A's gold's inotify_init fails",
           {"kind": "pair", "threads": True, "sandbox": {"timeout_s": 6},
            "pairs": [["sleep 1.5; python3 -c 'import ctypes; print(\"INOTIFY\", \"ok\" if "
                       "ctypes.CDLL(None).inotify_init() >= 0 else \"fail\")'", "true"],
                      ["true", sys_py(HOLD_INOTIFY.replace("time.sleep(2.0)", "time.sleep(3.0)"))]]},
           _gold_changed("INOTIFY ok"), ran=_cand_said("INOTIFY-HELD")),
]


@pytest.mark.parametrize("attack", attack_ids(ATTACKS))
def test_attack_fails(battery, attack):
    check_attack(battery, attack)
