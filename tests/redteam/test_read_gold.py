"""Reading the gold or the check: pid 1's memory, /proc, the environment, descriptors, a
free-space side channel, the check's own text."""
from __future__ import annotations

import pytest

from ._payloads import MEM_EVAL, MEMSCAN, py
from .conftest import TOKEN as T
from .conftest import Attack, attack_ids, check_attack, marker_lines, out, passed, stdout

pytestmark = pytest.mark.security
F = "read-gold"

# what a check_script candidate finds in its ancestors' command lines: the check files, base64
CHECK_FROM_ANCESTORS = r"""
import base64, os, re, sys
texts = []
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    for m in re.finditer(rb"printf %s ([A-Za-z0-9+/=]{8,})", cmd):
        try:
            texts.append(base64.b64decode(m.group(1)).decode())
        except Exception:
            pass
wants = [w for t in texts for w in re.findall(r'^\w+="([^"]*)"', t, re.M)]
print("CHECKS", len(texts), file=sys.stderr)
if len(set(wants)) == 1:
    print(wants[0])
"""

# a survivor that copies the check, once written, into the candidate's stdout file (which the
# verdict's feedback quotes to the optimizer); bounded to 3 s
CHECK_COPIER = ("o=$(readlink /proc/$$/fd/1); ( end=$((SECONDS+3)); while [ $SECONDS -lt $end ]; do "
                "for f in ${o%/*}/check/*.sh; do [ -s \"$f\" ] && { read -r -d '' t < \"$f\"; printf '%s' \"$t\" >> $o; "
                "exit 0; }; done; done ) >/dev/null 2>&1 & echo started")

PAD = "the reference command of a task, as long as many are "  # ~55 characters

FEH_GOLDS = ["printf 'x-%s\\n' $((1234*2)); ls /etc | head -3",
             "printf 'y-%s\\n' $((1234*3)); ls /usr | head -2",
             "printf 'z-%s\\n' $((1234*4)); echo $((7*6))"]


def _found(res, needle):
    hits = [ln for ln in marker_lines(out(res), "FOUND") if needle in ln]
    return f"pid 1's memory holds {hits[0][:120]!r}" if hits else None


def _found_any_pair(res, fmt):
    runs = res.get("runs") or []
    for i in range(1, len(runs), 2):
        hits = [ln for ln in marker_lines(runs[i]["stdout"], "FOUND") if fmt.format(i // 2) in ln]
        if hits:
            return f"pair {i // 2}: the candidate's pid 1 holds the concurrent gold {hits[0][:120]!r}"
    return None


def _scanned(res):
    return any(ln.startswith(("SCANNED", "MEM-ERR", "MAPS-ERR")) for r in res.get("runs", [])
               for ln in r["stdout"].splitlines())


ATTACKS = [
    # first in its battery: the fork server has served only the probe before it
    Attack("mem_eval_feh", F, "a task-blind candidate that evals the command found in pid 1's memory is "
           "judged EQUIVALENT by FehVerifier (any of 3 tasks)",
           {"kind": "feh", "sandbox": {"timeout_s": 3}, "gold": FEH_GOLDS,
            "command": "# VFRTSELF\n" + py(MEM_EVAL)},
           lambda r, c: passed(r),
           ran=lambda r, c: bool(r.get("verdicts")), first=True),
    Attack("mem_concurrent_gold", F, "the concurrent gold's command text is found in the candidate's pid 1 "
           "memory (/proc/1/mem), in any of 3 pairs (a short gold, and long ones with the text at the end, where "
           "a shorter request written over it leaves it)",
           {"kind": "pair", "sandbox": {"timeout_s": 3},
            "pairs": [[("" if i == 0 else f": {PAD * (i * 20)}; ") + f"echo GOLD-{T}-{i}-$((6*7))",
                       py(MEMSCAN, "1", "echo GO", f"LD-{T}-{i}-[^\\x00]*")] for i in range(3)]},
           lambda r, c: _found_any_pair(r, f"echo GOLD-{T}-{{}}-$((6*7))"), ran=lambda r, c: _scanned(r)),
    Attack("mem_earlier_gold", F, "an earlier run's gold (short, or long with the text at the end) is found in a "
           "later run's pid 1 memory",
           {"kind": "seq", "sandbox": {"timeout_s": 3},
            "commands": [f"echo GOLDSEQ-{T}-$((5*5))", f": {PAD * 60}; echo GOLDSEQ-{T}-$((5*5))",
                         py(MEMSCAN, "1", "echo GO", f"LDSEQ-{T}-[^\\x00]*")]},
           lambda r, c: _found(r, f"echo GOLDSEQ-{T}-$((5*5))"), ran=lambda r, c: _scanned(r)),
    Attack("proc_cmdline_environ", F, "the concurrent gold's text is found in some /proc/*/cmdline or "
           "/proc/*/environ the candidate can read",
           {"kind": "pair", "sandbox": {"timeout_s": 3}, "gold": f"sleep 0.6; echo GOLDP-{T}-$((2*2))",
            "command": "sleep 0.2; for p in /proc/[0-9]*; do cat $p/cmdline $p/environ 2>/dev/null; echo; done "
                       f"| tr '\\0' '\\n' | grep -a 'GOLDP-{T}-[$]((2'; echo walked"},
           lambda r, c: "the gold's text in /proc" if f"GOLDP-{T}-$((2*2))" in stdout(r) else None,
           ran=lambda r, c: "walked" in stdout(r)),
    Attack("proc_fd_walk", F, "a descriptor or cwd/root link of some process in the run reaches the host "
           "(the host scratch area's run-/lower-/launcher- entries listed through it)",
           {"kind": "pair", "sandbox": {"timeout_s": 3}, "gold": "sleep 0.5; echo gold",
            "command": "sleep 0.1; for l in /proc/[0-9]*/fd/* /proc/[0-9]*/cwd /proc/[0-9]*/root "
                       "/proc/[0-9]*/map_files/*; do t=$(readlink \"$l\" 2>/dev/null) || continue; "
                       "[ -d \"$l/\" ] && ls -a \"$l/\" 2>/dev/null | sed 's/^/ENTRY /'; [ -d \"$l/..\" ] && "
                       "ls -a \"$l/..\" 2>/dev/null | sed 's/^/ENTRY /'; done | sort -u | head -400; echo walked"},
           lambda r, c: next((ln for ln in stdout(r).splitlines()
                              if ln.startswith("ENTRY ") and ln[6:].startswith(("run-", "lower-", "launcher-"))), None),
           ran=lambda r, c: "walked" in stdout(r)),
    Attack("environment", F, "the harness's environment (a secret variable, the host scratch path) "
           "reaches the command",
           {"kind": "pair", "sandbox": {"timeout_s": 3}, "gold": "echo gold",
            "command": "env; cat /proc/self/environ /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; set | head -200; "
                       "echo walked"},
           lambda r, c: ("the harness's secret variable" if f"vfrt-env-{T}" in out(r)
                         else "the host scratch path" if c.scratch_root and c.scratch_root in out(r) else None),
           ran=lambda r, c: "walked" in stdout(r)),
    Attack("check_from_ancestors", F, "bash-tests: a task-blind candidate reads the check (its files, sent "
           "base64 in the run's script) from its ancestors' command lines and prints the expected answer: PASS",
           {"kind": "tests", "sandbox": {"timeout_s": 4},
            "check": 'bash "$VERIFIRST_CHECK_DIR/evaluate.sh"',
            "check_files": {"evaluate.sh": f'want="vfans-{T}-777"\n[ "$(cat "$VERIFIRST_STDOUT")" = "$want" ]\n'},
            "command": py(CHECK_FROM_ANCESTORS)},
           lambda r, c: passed(r) or (f"the check's text in the candidate's output"
                                      if f"vfans-{T}-777" in (r.get("verdict") or {}).get("candidate", "") else None),
           ran=lambda r, c: "CHECKS" in (r.get("verdict") or {}).get("candidate", "")),
    Attack("check_copied_to_feedback", F, "bash-tests: a survivor copies the check, once written, into the "
           "candidate's output, and the verdict's feedback (read by the optimizer) quotes the check's hidden text",
           {"kind": "tests", "sandbox": {"timeout_s": 4},
            "check": 'bash "$VERIFIRST_CHECK_DIR/evaluate.sh"',
            "check_files": {"evaluate.sh": f'# hidden-{T}\ngrep -qx right "$VERIFIRST_STDOUT"\n'},
            "command": CHECK_COPIER, "repeat": 5},
           lambda r, c: ("the check's text in the feedback"
                         if any(f"hidden-{T}" in v.get("feedback", "") for v in r.get("verdicts") or []) else None),
           ran=lambda r, c: "started" in (r.get("verdict") or {}).get("candidate", "")),
    Attack("free_space_side_channel", F, "the candidate measures the concurrent gold's writes (>= 24 MB) in "
           "the free space of its own / (a shared scratch pool)",
           {"kind": "pair", "sandbox": {"timeout_s": 4},
            "gold": "sleep 0.3; head -c 30M /dev/zero > /tmp/g; sleep 1.5; echo done",
            "command": "a=$(stat -f -c '%a*%S' /); m=0; end=$((SECONDS+3)); while [ $SECONDS -lt $end ]; do "
                       "d=$(( a - $(stat -f -c '%a*%S' /) )); [ $d -gt $m ] && m=$d; [ $m -ge $((24 << 20)) ] && break; "
                       "sleep 0.05; done; echo DELTA $m"},
           lambda r, c: next((f"free space fell by {d} bytes" for d in marker_lines(stdout(r), "DELTA")
                              if d.lstrip("-").isdigit() and int(d) >= 24 << 20), None),
           ran=lambda r, c: bool(marker_lines(stdout(r), "DELTA"))),
]


@pytest.mark.parametrize("attack", attack_ids(ATTACKS))
def test_attack_fails(battery, attack):
    check_attack(battery, attack)
