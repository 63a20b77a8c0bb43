"""FEH weighs facts (issue 37): short outputs that state different facts pass no similarity rule,
identical failures decide nothing, and the LLM only sees what execution left open."""
import os

import numpy as np
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
from dspy.utils import DummyLM  # noqa: E402

from verifirst.core.task import Item  # noqa: E402
from verifirst.verifiers.bash._feh_compare import FehParams  # noqa: E402
from verifirst.verifiers.bash._feh_params import load_params  # noqa: E402
from verifirst.verifiers.bash.feh import FehVerifier  # noqa: E402


def const_embed(texts):
    """Every text looks alike (cosine 1): only the facts can tell two outputs apart."""
    return np.ones((len(texts), 4), dtype=np.float32) / 2.0


def run(stdout="", stderr="", exit_code=0):
    return {"stdout": stdout, "stderr": stderr, "exit_code": exit_code, "timed_out": False,
            "signal": None, "truncated": False, "fs_diff": {"added": [], "deleted": [], "modified": []}}


FITTED = FehVerifier("nl2sh", embed=const_embed)  # the loader defaults: overlap 0.5, cosine 0.85


def cmp(g, c, gold="gold_cmd", cand="cand_cmd", v=FITTED, **kw):
    return v.compare("t", gold, cand, run(g), run(c), **kw)


def test_a_date_is_not_a_kernel_version():
    date = "Sun Dec  6 04:42:46 UTC 2026\n"
    for kernel in ("#26~22.04.1-Ubuntu SMP Thu Jun 27 19:40:49 UTC 2024\n", "6.5.0-1025-azure\n",
                   "Linux verifirst 6.5.0-1025-azure #26~22.04.1-Ubuntu SMP Thu Jun 27 19:40:49 UTC 2024 "
                   "x86_64 GNU/Linux\n"):
        v = cmp(date, kernel, gold="date", cand="uname -a")
        assert v.passed is False and v.details["rule"] == "facts", kernel
        assert "state different facts" in v.feedback and "2026-12-06" in v.feedback
        assert "facts" in v.details["differences"]


def test_a_shared_preamble_hides_no_difference():
    # EAbench's pre_test.sh announces the expected value first; the answers differ after it
    v = cmp("#++HOST=verifirst\nverifirst\n", "#++HOST=verifirst\n6.18.44-fc-v1272\n", gold="hostname",
            cand="uname -r")
    assert v.passed is False and v.details["rule"] == "facts"
    assert cmp("#++HOST=verifirst\nverifirst\n", "#++HOST=verifirst\nverifirst.\n").passed
    # past the preamble one answered and the other printed nothing of its own
    assert cmp("#++MEM=24683784\n24683784\n", "#++MEM=24683784\n").details["rule"] == "facts"
    # a version is one fact, not its parts: `1` is not stated by 5.2.15(1)-release
    assert cmp("#++V=5.2.15(1)-release\n5.2.15(1)-release\n", "#++V=5.2.15(1)-release\n1\n").passed is False


def test_two_time_zones_differ():
    assert cmp("Etc/UTC\n", "America/New_York\n").details["rule"] == "facts"
    v = cmp("Time zone: Etc/UTC (UTC, +0000)\n", "Time zone: America/New_York (EST, -0500)\n")
    assert v.passed is False and v.details["rule"] == "facts"
    # the same moment told in two zones: clock times 9 hours apart
    assert cmp("Sun Dec  6 04:42:46 UTC 2026\n", "Sun Dec  6 13:42:46 JST 2026\n").passed is False


def test_group_lines_of_different_groups_differ():
    v = cmp("sudo:x:27:test\n", "test:x:1000:\n", gold="getent group sudo", cand="getent group test")
    assert v.passed is False and v.details["rule"] == "facts"
    assert cmp("drwxr-xr-x\n", "-rw-r--r--\n").passed is False  # permission strings
    assert cmp("root\n", "verifirst\n").passed is False  # a user name is not a host name
    assert cmp("4.0K\tdata\n", "12K\tdata\n").passed is False  # sizes


def test_the_same_facts_told_differently_still_pass():
    # a subset of the other's facts is no conflict (`id -u` in `id`)
    assert cmp("1000\n", "uid=1000(test) gid=1000(test) groups=1000(test),27(sudo)\n").passed
    # one day in two formats; two runs of `date` seconds apart; a mode as a string and in octal
    assert cmp("2023-11-14 22:13:20\n", "Tue Nov 14 22:13:20 UTC 2023\n").passed
    assert cmp("Sun Dec  6 04:42:46 UTC 2026\n", "Sun Dec  6 04:42:49 UTC 2026\n").passed
    assert cmp("1765000000\n", "1765000002\n").passed  # Unix time read two seconds apart
    assert cmp("-rw-r-----\n", "0640\n").passed and cmp("7\n", "7.0\n").passed
    # one file named from two places passes; another file does not
    assert cmp("/testbed/dir1/a.txt\n/testbed/dir2/c.txt\n", "./dir1/a.txt\n./dir2/c.txt\n").passed
    assert cmp("a.txt\nb.txt\n", "/srv/a.txt\n/srv/b.txt\n").passed
    assert cmp("/srv/a.txt\n", "/srv/b.txt\n").passed is False
    # sizes with and without units, a trailing slash, a zero offset and UTC, a process tree
    assert cmp("80K\t/workspace\n44K\t/workspace/dir1\n", "80\t/workspace\n44\t/workspace/dir1\n").passed
    assert cmp("/usr/local/bin\n", "/usr/local/bin/\n").passed
    assert cmp("Sun Dec  6 04:55:55 UTC 2026\n", "Sun, 06 Dec 2026 04:55:55 +0000\n").passed
    assert cmp("vf-sandbox---pstree\n", "vf-sandbox(1)---pstree(2)\n").passed
    # one detail among many shared lines (env and printenv name themselves in $_)
    shared = "HOSTNAME=verifirst\nPWD=/\nHOME=/root\nSHLVL=0\nPATH=/usr/bin:/bin\n"
    assert cmp(shared + "_=/usr/bin/env\n", shared + "_=/usr/bin/printenv\n").details["rule"] != "facts"
    # prose words are not facts: the same count worded twice
    assert cmp("There are 5 files in notes\n", "5 files found in the directory notes\n").passed


def test_long_outputs_are_left_to_the_similarity_rules_and_the_switch_turns_it_off():
    g = "".join(f"file{i}.txt {i * 10}\n" for i in range(60))
    c = "".join(f"file{i}.txt {i * 11}\n" for i in range(60))
    assert len(g) > FehParams().fact_chars and cmp(g, c).details["rule"] != "facts"
    off = FehVerifier(FehParams(out_threshold=0.5, fact_chars=0), embed=const_embed)
    assert cmp("Etc/UTC\n", "America/New_York\n", v=off).passed


def test_fact_chars_in_a_params_file(tmp_path):
    p = tmp_path / "p.json"
    p.write_text('{"params": {"fact_chars": 200}}')
    assert load_params(p).fact_chars == 200
    p.write_text('{"params": {"fact_chars": -1}}')
    with pytest.raises(Exception, match="fact_chars"):
        load_params(p)


def test_identical_failures_decide_nothing_unless_failure_is_expected():
    # EAbench's driver prints its own line and exits 0 after the script under it failed
    driver = ("#++ENTRIES=3\n", "bash.sh: line 2: sudo: unknown user test\n", 0)
    v = FITTED.compare("t", "sudo -u test id", "sudo -u test whoami", run(*driver), run(*driver))
    assert v.passed is None and v.inconclusive and "the same way" in v.inconclusive
    partial = ("partial\n", "cp: cannot stat 'x': No such file or directory\n", 1)
    assert FITTED.compare("t", "a", "b", run(*partial), run(*partial)).inconclusive
    expected = FITTED.compare("t", "a", "b", run(*partial), run(*partial), expect_failure=True)
    assert expected.passed is True and expected.details["rule"] == "identical"
    # the same command text is one program in one fixture: decided
    assert FITTED.compare("t", "a", "a", run(*partial), run(*partial)).passed is True
    # a warning-free identical success passes as before
    assert FITTED.compare("t", "a", "b", run("3\n"), run("3\n")).passed is True


def test_item_expect_failure_reaches_the_rule():
    out = ("#++ENTRIES=3\n", "usermod: user 'test' does not exist\n", 0)
    v = FehVerifier("nl2sh", run_pair=lambda g, c, fx: (run(*out), run(*out)), embed=const_embed)
    item = Item("x", {"task": "t"}, {"command": "usermod -L test", "fixture": "empty"})
    assert v.verify(item, "usermod -U test").inconclusive
    failing = Item("y", {"task": "t"}, {"command": "usermod -L test", "fixture": "empty", "expect_failure": True})
    assert v.verify(failing, "usermod -U test").passed is True


def _lm(*answers):
    return DummyLM([{"equivalent": a} for a in answers], adapter=dspy.JSONAdapter())


def test_llm_decides_only_what_execution_leaves_open():
    # facts decided it: the LM (which has no answers) is never asked
    v = FehVerifier("nl2sh", embed=const_embed, llm="arbiter", lm=_lm(), arbiter_margin=1.0)
    r = cmp("Etc/UTC\n", "America/New_York\n", v=v)
    assert r.details["rule"] == "facts" and v.lm_failures == 0 and "said" not in r.details["llm"]
    c = FehVerifier("nl2sh", embed=const_embed, llm="confirm", lm=_lm())
    fs = {"added": [{"path": "/x", "type": "file", "mode": 0o644, "sha256": "a"}], "deleted": [], "modified": []}
    g, k = dict(run("copied x\n"), fs_diff=fs), dict(run("'a' -> 'x'\n"), fs_diff=fs)
    r = c.compare("t", "cp -v a x", "cp a x && echo done", g, k)  # the same file effect decides
    assert r.passed and r.details["rule"] == "fs_effect" and c.lm_failures == 0
    # a similarity verdict is confirmed, and the feedback says why it asked and what it showed
    yes = FehVerifier("nl2sh", embed=const_embed, llm="confirm", lm=_lm("false"))
    r = cmp("There are 5 files\n", "5 files found here\n", v=yes)
    assert r.passed is False and r.details["llm"]["said"] is False
    assert "asked because rule output_cosine" in r.feedback and "both outputs (17 and 18 chars)" in r.feedback


def test_a_candidate_that_prints_everything_contains_no_answer():
    """Output stuffing (issue 33's reward hacks): a task-blind candidate that dumps its environment,
    listings and numbers contains the gold's answer among its tokens; containment alone used to call
    it equivalent (`echo $PATH`, `hostname` against an environment dump). Containment counts only
    when the larger output is at most overlap_max_ratio times the smaller."""
    env = "".join(f"{k}={v}\n" for k, v in (("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
                                            ("HOME", "/root"), ("HOSTNAME", "verifirst"), ("PWD", "/"),
                                            ("SHLVL", "1"), ("TERM", "dumb"), ("LANG", "C.UTF-8")))
    stuffed = env + "".join(f"{i}\n" for i in range(40)) + "bin\nboot\ndev\netc\nhome\nlib\ntmp\nusr\nvar\n"
    never = FehVerifier("nl2sh", embed=lambda t: np.eye(len(t), 4, dtype=np.float32))  # texts never alike
    for gold in ("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n", "verifirst\n", "7\n",
                 "bin\nboot\ndev\netc\nhome\nlib\ntmp\nusr\nvar\n"):
        v = cmp(gold, stuffed, v=never)
        assert v.passed is False, (gold, v.details.get("rule"))
    ls = "a.txt\nb.txt\nc.txt\n"
    ls_l = "".join(f"-rw-r--r-- 1 root root 12 Jan  1 00:00 {n}\n" for n in ("a.txt", "b.txt", "c.txt"))
    assert cmp(ls, ls_l, v=never).passed is True  # a verbose form of the same answer still counts
