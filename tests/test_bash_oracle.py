"""bash-tests: the task's own check decides; EAbench's layout read completely (issue 24)."""
from __future__ import annotations

import json
import shutil
import os
from pathlib import Path

import pytest

from verifirst.benchmarks.eabench import load_eabench
from verifirst.core.errors import InputError
from verifirst.core.task import Item
from verifirst.verifiers.bash import fixtures
from verifirst.verifiers.bash.oracle import (CAND_MARK, CHECK_MARK, BashTestsVerifier, candidate_script, check_payload,
                                             check_script, judge)

EATINY = Path(__file__).resolve().parent / "data" / "eabench_tiny"


def _sandbox_or_skip():
    try:
        from verifirst.verifiers.bash import sandbox
        sandbox.default_sandbox(timeout_s=10.0)
    except Exception as e:  # no bwrap / user namespaces on this host
        pytest.skip(f"sandbox unavailable: {e}")


def out(check="", cand="exit 0"):
    return f"{CHECK_MARK}\n{check}\n{CAND_MARK}\n{cand}\n"


def test_exit_status_of_the_check_is_the_verdict():
    ok = judge({"stdout": out("all good"), "exit_code": 0})
    assert ok.passed is True and ok.stage == "PASS" and "all good" in ok.feedback
    bad = judge({"stdout": out("Expected 22 in stdout"), "exit_code": 2})
    assert bad.passed is False and bad.stage == "CHECK" and "Expected 22 in stdout" in bad.feedback
    skip = judge({"stdout": out("no result file"), "exit_code": 125})
    assert skip.passed is None and skip.inconclusive and skip.stage == "INCONCLUSIVE"
    for r in ({"stdout": out(), "exit_code": 127}, {"stdout": out(), "exit_code": -9, "timed_out": True},
              {"stdout": "", "exit_code": 1}):
        v = judge(r)
        assert v.passed is None and v.stage == "ERROR", r  # no verdict, never a rejection
    hung = judge({"stdout": "", "exit_code": -9, "timed_out": True})
    assert hung.passed is False and hung.stage == "TIMEOUT"  # the candidate hung before the check


def test_check_script_stages_the_candidate_and_refuses_escaping_check_files():
    gold = {"check": "grep -q 42 \"$VERIFIRST_STDOUT\"", "workdir": "/app", "prerequisite": "#!/bin/bash\n",
            "script_path": "/app/t.sh", "run": "bash t.sh 7", "check_files": {"bin/h.sh": "echo h"}}
    s = candidate_script("echo 'it''s' 42", gold)
    assert "\ncd /app || exit 1\n" in s and "bash t.sh 7" in s and "(\n#!/bin/bash" not in s
    assert "echo 'it''s' 42" not in s  # the candidate travels base64-encoded, byte for byte
    # the candidate's run holds nothing of the check: not its text, not its files
    assert "grep -q 42" not in s and "echo h" not in s and "bin/h.sh" not in s and CHECK_MARK not in s
    c = check_script(gold)
    assert "grep -q 42" in c and "\ncd /app || exit 1\n" in c and "bash t.sh" not in c
    import io
    import tarfile
    first = {"stdout": "42\n", "stderr": f"setup noise\n{CAND_MARK}\nwarn\n", "exit_code": 3}
    with tarfile.open(fileobj=io.BytesIO(check_payload(gold, first))) as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        assert tar.getmember("check/bin/h.sh").mode == 0o755
    assert got == {"check/bin/h.sh": b"echo h", "stdout": b"42\n", "stderr": b"warn\n", "exit": b"3\n"}
    with pytest.raises(InputError, match="relative path"):
        candidate_script("true", {**gold, "check_files": {"../../etc/x": "y"}})
    v = BashTestsVerifier(run=lambda script, fx, then: pytest.fail("no check: nothing runs"))
    assert v.verify(Item("n", {}, {"command": "x"}), "echo 1").passed is None


def test_eabench_layout_is_read_completely():
    s = load_eabench(EATINY).by_id()
    basic = s["eabench-bash_1-test4"]
    fx = {"/" + e.path: e for e in fixtures.build(basic.gold["fixture"]).entries}
    assert fx["/app/gen.sh"].mode == 0o755 and "/app/test.py" in fx and "/app/bash.sh" not in fx
    assert basic.gold["workdir"] == "/app" and basic.gold["script_path"] == "/app/test4.sh"
    assert basic.gold["check_runs_candidate"] and "python3 test.py" in basic.gold["check"]
    assert "prerequisite" not in s["eabench-bash_1-test1"].gold
    system = s["eabench-bash_2-test2"]
    fx2 = {"/" + e.path: e for e in fixtures.build(system.gold["fixture"]).entries}
    assert fx2["/home/test/data/latest"].kind == "symlink" and fx2["/home/test/data/latest"].data == b"c.txt"
    assert fx2["/home/test/test.sh"].mode == 0o755 and system.gold["run"] == "bash ./test.sh"
    assert set(system.gold["check_files"]) == {"evaluate.sh", "bin/extract_vars.sh", "bin/strip_out_stderr.sh",
                                               "bin/strip_out_stdout.sh"}
    assert s["eabench-bash_2-test3"].meta["arguments"] == ["0x16", "0xff"]
    assert s["eabench-bash_3-test003"].meta["arguments"] == ["20"]
    # a worker process that never loaded the suite rebuilds a test's fixture from the gold's spec
    name, spec = system.gold["fixture"], system.gold["fixture_spec"]
    json.dumps(spec)  # JSON-able: it travels with the item
    before = fixtures.build(name).content_hash
    del fixtures._CACHE[name]
    assert fixtures.ensure(name, spec) == name and fixtures.build(name).content_hash == before
    no_driver = {"/" + e.path: e for e in fixtures.build(s["eabench-bash_3-test001"].gold["fixture"]).entries}
    assert "(. bash.sh)" in no_driver["/home/test/test.sh"].data.decode()  # the benchmark's usual driver
    assert "/home/test/pre_test.sh" in no_driver


@pytest.mark.integration
def test_each_gold_passes_its_own_check_and_another_tasks_script_fails_it():
    _sandbox_or_skip()
    items = load_eabench(EATINY).items
    kinds = {it.gold["suite"] for it in items}
    assert kinds == {"bash_1", "bash_2", "bash_3"} and len(items) >= 12
    v = BashTestsVerifier()
    for i, it in enumerate(items):
        own = v.verify(it, it.gold["command"])
        assert own.passed is True, (it.id, own.feedback)
        other = items[(i + 1) % len(items)]
        wrong = v.verify(it, other.gold["command"])
        assert wrong.passed is False and wrong.stage == "CHECK", (it.id, other.id, wrong.feedback)
        assert wrong.feedback.startswith("FAIL: the task's check said")


@pytest.mark.integration
def test_arguments_and_task_files_reach_the_sandbox():
    _sandbox_or_skip()
    from verifirst.verifiers.bash.feh import FehVerifier

    s = load_eabench(EATINY).by_id()
    hexa = s["eabench-bash_2-test3"]
    feh = FehVerifier("nl2sh")
    r = feh.verify(hexa, "printf '%d\\n' \"$1\"")  # the arguments test.sh passes reach the script
    assert r.passed and r.details["gold"]["stdout"] == "22\n255\n", r.feedback
    assert r.details["gold"]["fs_diff"] == []  # the staged script is no effect of the command
    gen = feh.verify(s["eabench-bash_1-test4"], "sort -rn numbers.txt | head -n 1")  # gen.sh ran: executable
    assert gen.passed and gen.details["gold"]["stdout"] == "42\n", gen.feedback
    links = BashTestsVerifier().verify(s["eabench-bash_3-test002"],
                                       "find /home/test/downloads -type l -printf '%l\\n' | xargs -n1 basename "
                                       "> /home/test/uploads.targets")
    assert links.passed, links.feedback


def test_verify_bash_check_on_the_cli(tmp_path, capsys):
    from verifirst.verifiers.bash.oracle import cli_verify_check

    import glob

    left = set(glob.glob("/dev/shm/verifirst-check.*"))
    check = tmp_path / "check.sh"
    check.write_text('grep -qx 42 "$VERIFIRST_STDOUT" || { echo "expected 42, got: $(cat "$VERIFIRST_STDOUT")"; exit 1; }\n')
    assert cli_verify_check(str(check), "echo 42", as_json=True, unsafe_local=True) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True
    assert cli_verify_check(str(check), "echo 41", unsafe_local=True) == 1
    assert "expected 42, got: 41" in capsys.readouterr().out
    (tmp_path / "skip.sh").write_text("exit 125\n")
    assert cli_verify_check(str(tmp_path / "skip.sh"), "echo 1", unsafe_local=True) == 3
    with pytest.raises(InputError, match="not found") as e:
        cli_verify_check(str(tmp_path / "nope.sh"), "echo 1", unsafe_local=True)
    assert "nope.sh" in str(e.value)
    assert set(glob.glob("/dev/shm/verifirst-check.*")) == left  # without the sandbox: the run's root, not the host's


def test_cli_needs_gold_or_check(tmp_path):
    from typer.testing import CliRunner

    from verifirst.cli import app

    r = CliRunner().invoke(app, ["verify", "bash", "--pred", "echo 1"])
    assert r.exit_code == 2 and "--check" in r.output
    check = tmp_path / "c.sh"
    check.write_text('grep -q 1 "$VERIFIRST_STDOUT"\n')
    r = CliRunner().invoke(app, ["verify", "bash", "--check", str(check), "--pred", "echo 1", "--fixture", "empty",
                                 "--unsafe-local", "--json"])
    assert r.exit_code == 0, r.output
    assert os.environ.get("VERIFIRST_STDOUT") is None  # set inside the sandbox only


def test_eabench_task_with_a_link_out_of_its_directory_is_refused(tmp_path):
    import shutil

    root = tmp_path / "ea"
    shutil.copytree(EATINY, root, symlinks=True)
    evil = root / "bash_3" / "test002" / "home" / "test" / "secrets"
    evil.symlink_to("/etc/shadow")
    with pytest.raises(InputError, match="outside the task directory") as e:
        load_eabench(root)
    assert "bash_3/test002/home/test/secrets" in str(e.value)


def test_registered_as_a_verifier():
    from verifirst.core.registry import component
    from verifirst.verifiers.base import Verifier

    cls = component("verifier", "bash-tests")
    assert cls is BashTestsVerifier and isinstance(cls(run=lambda s, f: None), Verifier)


REWRITER = ("(while :; do for f in /tmp/.verifirst-check/check/* /dev/shm/*/check/* /dev/shm/*/check/*/*; do "
            "[ -f \"$f\" ] && printf 'exit 0\\n' > \"$f\"; done; done) >/dev/null 2>&1 & disown; "
            "setsid sh -c 'sleep 3' & echo 41")


@pytest.mark.security
def test_a_candidate_cannot_rewrite_the_check_or_see_it():
    """A background loop that rewrites every check file it can find (issue 33: PASS in 4 of 4 tries
    before the check ran in a run of its own), and a candidate that looks for the check's text."""
    _sandbox_or_skip()
    gold = {"command": "echo 42", "check": 'grep -qx 42 "$VERIFIRST_STDOUT" || { echo "got $(cat "$VERIFIRST_STDOUT")"; exit 1; }',
            "check_files": {"evaluate.sh": "exit 1\n"}}
    v = BashTestsVerifier(timeout_s=5)
    for _ in range(3):
        r = v.verify(Item("t", {}, gold), REWRITER)
        assert r.passed is False and r.stage == "CHECK" and "got 41" in r.feedback, r.feedback
    peek = v.verify(Item("t", {}, gold), "grep -rl VERIFIRST_STDOUT / /proc/*/cmdline 2>/dev/null | head -3; "
                                         "ls /tmp/.verifirst-check /dev/shm")
    assert peek.passed is False and "VERIFIRST_STDOUT" not in peek.details["candidate"], peek.details["candidate"]
    assert v.verify(Item("t", {}, gold), "echo 42").passed is True


@pytest.mark.security
@pytest.mark.skipif(os.geteuid() != 0, reason="a scratch of its own per run (root)")
def test_a_candidate_that_fills_its_scratch_fails_rather_than_leaving_no_verdict():
    _sandbox_or_skip()
    gold = {"command": "echo 42", "check": 'grep -qx 42 "$VERIFIRST_STDOUT"'}
    filler = "for i in $(seq 64); do head -c 60000000 /dev/zero > /f$i 2>/dev/null || break; done; echo 42"
    r = BashTestsVerifier(timeout_s=8).verify(Item("t", {}, gold), filler)
    assert (r.passed, r.stage) == (False, "LIMIT") and "filled its scratch" in r.feedback, r.feedback


@pytest.mark.security
def test_a_candidate_that_holds_a_check_which_runs_it_fails():
    """A check that runs the candidate itself shares its run: a candidate that keeps it waiting
    past the time limit is a FAIL, not no verdict."""
    _sandbox_or_skip()
    gold = {"command": "echo 42", "check_runs_candidate": True,
            "check": 'out=$(bash "$VERIFIRST_CANDIDATE") && [ "$out" = 42 ]'}
    v = BashTestsVerifier(timeout_s=3)
    assert v.verify(Item("t", {}, gold), "echo 42").passed is True
    r = v.verify(Item("t", {}, gold), "setsid sleep 30 & echo 42")
    assert (r.passed, r.stage) == (False, "LIMIT"), r.feedback


@pytest.mark.security
@pytest.mark.parametrize("attack", [
    "printf '#!/bin/sh\\nexit 0\\n' > /usr/bin/python3; echo 41",  # the check's interpreter, replaced
    "mkdir -p ~/.local/lib/python3.11/site-packages && "
    "echo 'import sys; sys.exit(0)' > ~/.local/lib/python3.11/site-packages/x.pth; echo 41",  # user site
    "echo 'import sys; sys.exit(0)' > json.py; echo 41",  # a module beside the check's working directory
])
def test_nothing_the_candidate_wrote_runs_inside_the_check(attack):
    """The check run starts on the candidate's root, but with a fresh /usr, a fresh HOME and no
    Python user site or script directory on sys.path: a replaced python3, a .pth or a json.py the
    candidate left cannot run in the check (each passed a wrong answer before)."""
    _sandbox_or_skip()
    gold = {"command": "echo 42", "check": "python3 -c \"import json, os, sys; "
                                           "sys.exit(0 if open(os.environ['VERIFIRST_STDOUT']).read().strip() == '42' else 1)\""}
    v = BashTestsVerifier(timeout_s=8)
    assert v.verify(Item("t", {}, gold), "echo 42").passed is True
    r = v.verify(Item("t", {}, gold), attack)
    assert (r.passed, r.stage) == (False, "CHECK"), r.feedback


@pytest.mark.security
def test_a_sysadmin_candidate_cannot_preload_into_the_check():
    """In sysadmin mode /etc is the run's own: the check run binds the host's loader and NSS files
    and an empty /etc/ld.so.preload over what the candidate wrote there."""
    _sandbox_or_skip()
    gold = {"command": "echo 42", "check": 'grep -qx 42 "$VERIFIRST_STDOUT"', "fixture": "sysadmin"}
    v = BashTestsVerifier(timeout_s=8)
    if not shutil.which("cc"):
        pytest.skip("no C compiler to build the preloaded library")
    evil = ("printf '#include <unistd.h>\\nvoid __attribute__((constructor)) f(void) { _exit(0); }\\n' > /tmp/e.c && "
            "cc -shared -fPIC -o /tmp/e.so /tmp/e.c && echo /tmp/e.so > /etc/ld.so.preload; echo 41")
    r = v.verify(Item("t", {}, gold), evil)
    assert (r.passed, r.stage) == (False, "CHECK"), r.feedback
    assert v.verify(Item("t", {}, gold), "echo 42").passed is True


@pytest.mark.security
@pytest.mark.parametrize("attack", [
    # /bin at a directory of its own whose bash exits 0: the check run's `/bin/bash -c` would be it
    "rm /bin && mkdir /bin && printf '#!/usr/bin/sh\\nexit 0\\n' > /bin/bash && chmod +x /bin/bash; echo 41",
    # /lib64 at a directory whose program interpreter exits 0: every dynamic program of the check
    "rm /lib64 && mkdir /lib64 && cp /usr/bin/true /lib64/ld-linux-x86-64.so.2; echo 41",
])
def test_the_roots_system_links_are_the_fixtures_again_in_the_check(attack):
    _sandbox_or_skip()
    gold = {"command": "echo 42", "check": 'grep -qx 42 "$VERIFIRST_STDOUT"'}
    r = BashTestsVerifier(timeout_s=8).verify(Item("t", {}, gold), attack)
    assert (r.passed, r.stage) == (False, "CHECK"), r.feedback


@pytest.mark.security
def test_a_candidate_that_prints_everything_fails_a_check_that_looks_for_the_answer():
    """Output stuffing: a check that greps the output for the answer passes a candidate that prints
    every number; the item's reference prints one word, so the candidate fails (stage STUFFING).
    A slightly more talkative right answer still passes."""
    _sandbox_or_skip()
    gold = {"command": "echo $((6 * 7))", "check": 'grep -qw 42 "$VERIFIRST_STDOUT"'}
    v = BashTestsVerifier(timeout_s=8)
    r = v.verify(Item("t", {}, gold), "seq 0 300")
    assert (r.passed, r.stage) == (False, "STUFFING") and "301 distinct words" in r.feedback, r.feedback
    assert v.verify(Item("t", {}, gold), "echo the answer is 42").passed is True
    assert BashTestsVerifier(timeout_s=8, stuffing_ratio=None).verify(Item("t", {}, gold), "seq 0 300").passed is True
