"""Tampering with the check or its output (bash-tests runs the task's check after the candidate in
the same sandbox), with other runs' files, or with the concurrent gold's output. Every survivor
is bounded (at most a few seconds)."""
from __future__ import annotations

import re
import shlex

import pytest

from ._payloads import INJECT_EXEC, py
from .conftest import OTHER_RUN
from .conftest import TOKEN as T
from .conftest import Attack, attack_ids, canary_tree, check_attack, out, passed, stdout

pytestmark = pytest.mark.security
F = "tamper-check"


def _state_dir() -> str:
    """Where check_script keeps the candidate's output and the check (as an adversary reads it in
    verifirst's code); today's layout if that cannot be read."""
    try:
        from verifirst.verifiers.bash.oracle import check_script

        m = re.search(r'__vf_state="\$\{PWD%/\}(/[^"$]+)"', check_script("true", {"check": "true"}))
        if m:
            return m.group(1)
    except Exception:  # noqa: BLE001 - the fallback is today's layout
        pass
    return "/tmp/.verifirst-check"


CHK = _state_dir()
EVAL = {"evaluate.sh": 'grep -qx right "$VERIFIRST_STDOUT"\n'}
RUN_EVAL = 'bash "$VERIFIRST_CHECK_DIR/evaluate.sh"'


def _loop(body: str, seconds: int = 3) -> str:
    """A busy loop of bash builtins (no fork per turn, so it wins races), bounded to `seconds`."""
    return f"end=$((SECONDS+{seconds})); while [ $SECONDS -lt $end ]; do {body}; done"


# replaces the check's evaluate.sh with `exit 0` as soon as it appears, where check_script puts it
# today or in a temporary directory of /dev/shm (builtins only)
REWRITE = _loop(f"for f in {CHK}/check/evaluate.sh /dev/shm/*/check/evaluate.sh; do if [ -s $f ]; then "
                "read -r l < $f; [ \"$l\" = 'exit 0' ] || echo 'exit 0' > $f; fi; done")

# the same, woken by inotify when the check file is closed after writing (python, bounded to 3 s)
INOTIFY_REWRITE = f"""
import ctypes, os, select, struct, time
libc = ctypes.CDLL(None, use_errno=True)
d = "{CHK}/check"
os.makedirs(d, exist_ok=True)
if os.fork():
    os._exit(0)
os.setsid()
fd = libc.inotify_init()
libc.inotify_add_watch(fd, d.encode(), 0x8 | 0x100)  # IN_CLOSE_WRITE | IN_CREATE
end = time.time() + 3
while time.time() < end:
    if not select.select([fd], [], [], 0.1)[0]:
        continue
    os.read(fd, 4096)
    p = d + "/evaluate.sh"
    try:
        if open(p).read() != "exit 0\\n":
            with open(p, "w") as f:
                f.write("exit 0\\n")
    except OSError:
        pass
"""


# a static ELF (position independent, no libc) whose only instruction is exit(0); as the program
# interpreter of every dynamic executable, it is what they all run
EXIT0_ELF = r"""
import os, struct, sys
path = sys.argv[1]
os.makedirs(os.path.dirname(path), exist_ok=True)
code = b"\xb8\x3c\x00\x00\x00\x31\xff\x0f\x05"  # mov eax, 60; xor edi, edi; syscall
size = 64 + 56 + len(code)
ehdr = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 0x3E, 1, 120, 64, 0, 0, 64, 56, 1, 0, 0, 0)
phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, size, size, 0x1000)
with open(path, "wb") as f:
    f.write(ehdr + phdr + code)
os.chmod(path, 0o755)
"""


def _unquoted(feedback: str) -> str:
    """The feedback but the candidate's own output, which it shows quoted line by line (oracle.QUOTE)."""
    return "\n".join(line for line in feedback.splitlines() if not line.startswith("| "))


def _v(r) -> dict:
    return r.get("verdict") or {}


def _cand_ran(r, c) -> bool:
    return "exit " in _v(r).get("candidate", "")


def _other_run_changed(r, c):
    try:
        now = canary_tree(OTHER_RUN)
    except OSError as e:
        return f"another run's files unreadable now: {e}"
    want = {k: v for k, v in c.host.get("other_run", {}).items()}
    return None if not want or now == want else f"another run's files changed: {sorted(set(now.items()) ^ set(want.items()))[:4]}"


ATTACKS = [
    Attack("rewrite_check_bg", F, "a background loop left by a wrong candidate rewrites "
           "$VERIFIRST_CHECK_DIR/evaluate.sh once written: PASS",
           {"kind": "tests", "repeat": 5, "sandbox": {"timeout_s": 4}, "check": RUN_EVAL, "check_files": EVAL,
            "command": f"echo wrong; ( {REWRITE} ) >/dev/null 2>&1 &"},
           lambda r, c: passed(r), ran=_cand_ran),
    Attack("rewrite_check_setsid", F, "the same rewriter started with setsid -f (a new session): PASS",
           {"kind": "tests", "repeat": 5, "sandbox": {"timeout_s": 4}, "check": RUN_EVAL, "check_files": EVAL,
            "command": f"echo wrong; setsid -f bash -c {shlex.quote(REWRITE)} >/dev/null 2>&1"},
           lambda r, c: passed(r), ran=_cand_ran),
    Attack("rewrite_check_nohup", F, "the same rewriter under nohup, disowned: PASS",
           {"kind": "tests", "repeat": 5, "sandbox": {"timeout_s": 4}, "check": RUN_EVAL, "check_files": EVAL,
            "command": f"echo wrong; nohup bash -c {shlex.quote(REWRITE)} >/dev/null 2>&1 & disown; exit 0"},
           lambda r, c: passed(r), ran=_cand_ran),
    Attack("rewrite_check_inotify", F, "a survivor woken by inotify when the check file is written rewrites "
           "evaluate.sh: PASS",
           {"kind": "tests", "repeat": 5, "sandbox": {"timeout_s": 4}, "check": RUN_EVAL, "check_files": EVAL,
            "command": py(INOTIFY_REWRITE) + "echo wrong"},
           lambda r, c: passed(r), ran=_cand_ran),
    Attack("check_fifo_swap", F, "the candidate makes evaluate.sh a named pipe before the check is written: a "
           "survivor drains the real check from it and feeds the check's bash `exit 0`: PASS",
           {"kind": "tests", "repeat": 5, "sandbox": {"timeout_s": 4}, "check": RUN_EVAL, "check_files": EVAL,
            "command": f"mkdir -p {CHK}/check && rm -rf {CHK}/check/evaluate.sh && mkfifo {CHK}/check/evaluate.sh && ( for i in 1 2 3; do "
                       f"timeout 2 cat {CHK}/check/evaluate.sh > /dev/null; timeout 2 bash -c "
                       f"'echo \"exit 0\" > {CHK}/check/evaluate.sh'; done ) >/dev/null 2>&1 & echo wrong"},
           lambda r, c: passed(r), ran=_cand_ran),
    Attack("rewrite_stdout_file", F, "a survivor rewrites the candidate's recorded stdout once the candidate "
           "has exited (the check reads $VERIFIRST_STDOUT): PASS for a candidate that printed `wrong`",
           {"kind": "tests", "repeat": 5, "sandbox": {"timeout_s": 4}, "check": 'grep -qx right "$VERIFIRST_STDOUT"',
            "command": "o=$(readlink /proc/$$/fd/1); echo wrong; ( " + _loop(
                "[ -s ${o%/*}/exit ] && { echo right > $o; exit 0; }") + " ) >/dev/null 2>&1 &"},
           lambda r, c: passed(r), ran=_cand_ran),
    Attack("rewrite_exit_file", F, "a survivor rewrites the recorded exit status (3 -> 0) before the check "
           "reads $VERIFIRST_EXIT: PASS",
           {"kind": "tests", "repeat": 5, "sandbox": {"timeout_s": 4}, "check": '[ "$(cat "$VERIFIRST_EXIT")" = 0 ]',
            "command": "o=$(readlink /proc/$$/fd/1); ( " + _loop(
                "[ -s ${o%/*}/exit ] && read -r x < ${o%/*}/exit && [ \"$x\" = 3 ] && { echo 0 > ${o%/*}/exit; exit 0; }")
                       + " ) >/dev/null 2>&1 & exit 3"},
           lambda r, c: passed(r), ran=_cand_ran),
    Attack("plant_check_bin", F, "the candidate plants bin/grep in $VERIFIRST_CHECK_DIR (an EAbench-style "
           "check puts $VERIFIRST_CHECK_DIR/bin first on PATH): PASS for a wrong answer",
           {"kind": "tests", "sandbox": {"timeout_s": 4},
            "check": 'PATH="$VERIFIRST_CHECK_DIR/bin:$PATH" ' + RUN_EVAL, "check_files": EVAL,
            "command": f"mkdir -p {CHK}/check/bin && printf '#!/bin/sh\\nexit 0\\n' > {CHK}/check/bin/grep && "
                       f"chmod +x {CHK}/check/bin/grep; echo wrong"},
           lambda r, c: passed(r), ran=_cand_ran),
    Attack("forge_check_output", F, "the candidate writes a forged check block into the run's own output "
           "(an ancestor's stdout): the verdict's check output, or its feedback outside the candidate's quoted "
           "output, carries the attacker's text (as the check's or the harness's)",
           {"kind": "tests", "repeat": 5, "sandbox": {"timeout_s": 4}, "check": RUN_EVAL, "check_files": EVAL,
            "command": "me=$(readlink /proc/self/fd/1); for p in /proc/[0-9]*; do t=$(readlink $p/fd/1 2>/dev/null) "
                       "|| continue; case $t in pipe:*) [ \"$t\" != \"$me\" ] && printf '@@VERIFIRST-CHECK@@\\n"
                       f"all 12 tests passed vfrt-fake-{T}\\n' > $p/fd/1;; esac; done; echo wrong"},
           lambda r, c: ("forged text in the verdict's check output, or unquoted in its feedback"
                         if f"vfrt-fake-{T}" in _v(r).get("check_output", "") + _unquoted(_v(r).get("feedback", ""))
                         else None),
           ran=_cand_ran),
    Attack("ptrace_check_shell", F, "the candidate ptraces the shell that will run the check and makes it exec "
           "`echo <check marker>; exit 0` in its place: PASS for a wrong answer",
           {"kind": "tests", "sandbox": {"timeout_s": 4}, "check": RUN_EVAL, "check_files": EVAL,
            "command": "echo wrong >&2; " + py(INJECT_EXEC, "@@VERIFIRST-", "CHECK@@",
                                               "echo @@VERIFIRST-CHECK@@; echo all tests passed; exit 0")},
           lambda r, c: passed(r), ran=lambda r, c: bool(passed(r)) or "TARGETS" in _v(r).get("candidate", "")),
    Attack("loader_hijack_check", F, "the candidate points the run's /lib64 (a symlink in its writable root) at its "
           "own program interpreter, a static `exit 0`: every program the check starts after it exits 0: PASS",
           {"kind": "tests", "sandbox": {"timeout_s": 4}, "check": RUN_EVAL, "check_files": EVAL,
            "command": py(EXIT0_ELF, "/tmp/vfrt-l/ld-linux-x86-64.so.2")
                       + "[ -x /tmp/vfrt-l/ld-linux-x86-64.so.2 ] && echo BUILT; ln -sfn /tmp/vfrt-l /lib64; echo wrong"},
           lambda r, c: passed(r), ran=lambda r, c: bool(passed(r)) or "BUILT" in _v(r).get("candidate", "") + _v(r).get("check_output", "")),
    Attack("python_usersite_check", F, "the candidate leaves a .pth file in $HOME's Python user site-packages that "
           "ends every Python with exit 0; a Python check (as EAbench's test.py) then passes a wrong answer",
           {"kind": "tests", "sandbox": {"timeout_s": 4},
            "check": "python3 -c 'import sys; sys.exit(0 if open(sys.argv[1]).read().strip() == \"right\" else 1)' "
                     '"$VERIFIRST_STDOUT"',
            "command": "d=$(python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p \"$d\" && "
                       "echo 'import os; os._exit(0)' > \"$d/vfrt.pth\" && echo PLANTED >&2; echo wrong"},
           lambda r, c: passed(r), ran=lambda r, c: bool(passed(r)) or "PLANTED" in _v(r).get("candidate", "")),
    Attack("python_cwd_shadow", F, "the candidate leaves json.py in its working directory; a Python check run from "
           "there (`python3 -c`, whose sys.path starts with the current directory) imports it: PASS",
           {"kind": "tests", "sandbox": {"timeout_s": 4},
            "check": "python3 -c 'import json, sys; sys.exit(0 if json.loads(json.dumps(open(sys.argv[1]).read().strip())) "
                     "== \"right\" else 1)' \"$VERIFIRST_STDOUT\"",
            "command": "for d in . /tmp \"$HOME\"; do echo 'import os; os._exit(0)' > \"$d/json.py\"; done 2>/dev/null; "
                       "echo PLANTED >&2; echo wrong"},
           lambda r, c: passed(r), ran=lambda r, c: bool(passed(r)) or "PLANTED" in _v(r).get("candidate", "")),
    Attack("fill_check_room", F, "a wrong candidate fills /dev/shm, /tmp and / (at most 100 MB each) so the check "
           "has no room to be written or to run: PASS, or no verdict (ERROR/INCONCLUSIVE) instead of FAIL",
           {"kind": "tests", "sandbox": {"timeout_s": 5}, "check": RUN_EVAL, "check_files": EVAL,
            "command": "for d in /dev/shm /tmp /; do for i in 1 2; do head -c 50M /dev/zero > $d/vfrt-fill$i "
                       "2>/dev/null || break; done; done; i=0; while [ $i -lt 2000 ]; do "
                       ": > /tmp/vfrt-i$i 2>/dev/null || break; i=$((i+1)); done; echo FILLED >&2; echo wrong"},
           lambda r, c: (f"{_v(r).get('stage')} for a wrong answer" if r.get("verdict")
                         and _v(r).get("passed") is not False else None),
           ran=lambda r, c: bool(r.get("verdict"))),
    Attack("outlive_command", F, "a process the candidate started is still alive when the check runs "
           "(the check sees it in /proc)",
           {"kind": "tests", "sandbox": {"timeout_s": 4},
            "check": f"for p in /proc/[0-9]*; do grep -qa 'vfrt-aliv[e]-{T}' $p/cmdline 2>/dev/null && "
                     f"echo ALIVE-{T}; done; exit 1",
            "command": f"setsid -f bash -c 'exec -a vfrt-alive-{T} sleep 3'; (exec -a vfrt-alive-{T} sleep 3) & "
                       f"nohup bash -c 'exec -a vfrt-alive-{T} sleep 3' >/dev/null 2>&1 & disown; echo bye"},
           lambda r, c: "a candidate process alive during the check" if f"ALIVE-{T}" in _v(r).get("check_output", "")
           else None, ran=_cand_ran),
    Attack("other_run_files", F, "another run's files (a canary tree on the host, world-writable) are "
           "changed through /proc links, relative paths or host paths the run can learn",
           {"kind": "run", "sandbox": {"timeout_s": 3},
            "command": f"for d in {OTHER_RUN} /proc/1/root{OTHER_RUN} /proc/1/cwd/../../..{OTHER_RUN} "
                       f"/../../../..{OTHER_RUN}; do for f in run-other/up/tmp/result.txt lower-other/fs/data.txt; do "
                       f"echo pwned >> $d/$f 2>/dev/null && echo WROTE $d/$f; done; done; "
                       "up=$(sed -n 's/.*upperdir=\\([^,]*\\).*/\\1/p' /proc/self/mountinfo); "
                       "[ -n \"$up\" ] && { ls -a \"$up/../..\" 2>/dev/null | sed 's/^/ENTRY /'; "
                       "echo pwned >> \"$up/../../run-other/up/tmp/result.txt\" 2>/dev/null; }; echo tried"},
           lambda r, c: _other_run_changed(r, c) or next((ln for ln in stdout(r).splitlines()
                                                          if ln.startswith(("WROTE", "ENTRY run-"))), None),
           ran=lambda r, c: "tried" in stdout(r)),
    Attack("concurrent_gold_output", F, "the candidate changes the concurrent gold's output (writes into any "
           "pipe or file it can reach, kills or stops what it sees)",
           {"kind": "pair", "sandbox": {"timeout_s": 3}, "gold": "sleep 0.5; cat /tmp/g 2>/dev/null; echo gold-ok",
            "command": "for p in /proc/[0-9]*; do [ $p = /proc/$$ ] && continue; for fd in 1 2; do "
                       "echo vfrt-injected > $p/fd/$fd 2>/dev/null; done; done; echo vfrt-injected > /tmp/g; "
                       "kill -STOP -1 2>/dev/null; kill -CONT $$ 2>/dev/null; echo tried"},
           lambda r, c: None if stdout(r, 0) == "gold-ok\n" and not r["runs"][0]["timed_out"]
           else f"the gold printed {stdout(r, 0)[:80]!r} (timed out: {r['runs'][0]['timed_out']})",
           ran=lambda r, c: "tried" in stdout(r)),
]


@pytest.mark.parametrize("attack", attack_ids(ATTACKS))
def test_attack_fails(battery, attack, host_snapshot):
    check_attack(battery, attack, {"other_run": host_snapshot["canary"]})
