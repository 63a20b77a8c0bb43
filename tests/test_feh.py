"""FehVerifier's decision rules on pairs of runs: identical and empty outputs, INCONCLUSIVE when
nothing is observed, exit status, output presence, file-system effects, line order and cosine
thresholds, containment and usage lines (shared stand-ins: _feh_testkit)."""
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402

from _feh_testkit import F, NO_INCONCLUSIVE, V, bag_embed, cmp, const_embed, run  # noqa: E402
from verifirst.verifiers.base import Verifier  # noqa: E402
from verifirst.verifiers.bash._feh_compare import FehParams, RunView, decide, features  # noqa: E402
from verifirst.verifiers.bash.feh import FehVerifier  # noqa: E402


def test_is_a_verifier_and_identical_outputs_pass():
    assert isinstance(V, Verifier)
    v = cmp(run("a\nb\n"), run("a\nb"))  # a trailing newline is no difference
    assert v.passed and v.score == 1.0 and v.stage == "PASS" and v.details["rule"] == "identical"
    assert v.feedback.startswith("EQUIVALENT")


def test_empty_output_pair_is_judged_by_command_text_not_passed_blindly():
    # with INCONCLUSIVE off, neither printing nor changing anything falls back on command text
    v = cmp(run(), run(), gold="cd /testbed/dir1", cand="export LANG=C", v=NO_INCONCLUSIVE)
    assert not v.passed and v.stage == "NO_OUTPUT" and "neither command printed" in v.feedback
    same = cmp(run(), run(), gold="cd /testbed/dir1", cand="cd /testbed/dir1/", v=NO_INCONCLUSIVE)
    assert cmp(run(), run(), gold="cd /testbed", cand="cd  /testbed", v=NO_INCONCLUSIVE).passed
    assert same.details["rule"] == "no_output_cmd"


def test_gold_without_observable_effect_is_inconclusive_with_reason():
    # the issue: a quiet reference matched any quiet candidate
    v = cmp(run(), run(), gold="cd /testbed/dir1", cand="export LANG=C")
    assert v.inconclusive and "no observable effect" in v.inconclusive
    assert v.stage == "INCONCLUSIVE" and v.passed is None and v.score == 0.0 and v.errors == []
    assert v.feedback.startswith("INCONCLUSIVE: the reference command has no observable effect")
    assert v.details["inconclusive"] == v.inconclusive and v.as_dict()["inconclusive"] == v.inconclusive
    assert cmp(run(), run(), gold="cd /testbed", cand="cd  /testbed").inconclusive  # text alike, not same
    # the same command text is decided; so is a candidate that did something the reference did not
    same = cmp(run(), run(), gold="cd /testbed ", cand="cd /testbed")
    assert same.passed and same.details["rule"] == "same_command" and same.inconclusive is None
    loud = cmp(run(), run("x\n"), gold="cd /testbed", cand="echo x")
    assert not loud.passed and loud.inconclusive is None
    failing = cmp(run(), run("", "no such dir", 1), gold="cd /testbed", cand="cd /nope")
    assert failing.stage == "EXIT_STATUS" and failing.inconclusive is None
    wrote = cmp(run(), run("", fs=[F("/testbed/x")]), gold="cd /testbed", cand="touch /testbed/x")
    assert wrote.stage == "FS_DIFF" and wrote.inconclusive is None


def test_both_failing_differently_is_inconclusive_same_failure_decided():
    g = run("", "bash: line 1: cal: command not found\n", 127)
    v = cmp(g, run("", "bash: line 1: ncal: command not found\n", 127), gold="cal", cand="ncal")
    assert v.inconclusive and "both commands fail" in v.inconclusive and v.stage == "INCONCLUSIVE"
    other_exit = cmp(run("", "ls: cannot access 'x': No such file", 2), run("", "cat: x: No such file", 1))
    assert other_exit.inconclusive and not other_exit.passed
    # the same failure is no observation either (issue 24): inconclusive unless failure is expected
    same_err = run("", "bash: line 1: cal: command not found\n", 127)
    same = cmp(g, same_err, gold="cal", cand="cal -3")
    assert same.inconclusive and "the same way" in same.inconclusive and same.passed is None
    expected = V.compare("t", "cal", "cal -3", g, same_err, expect_failure=True)
    assert expected.passed and expected.inconclusive is None and expected.details["rule"] == "identical"
    printed = cmp(run("a\n", "err", 1), run("b\n", "err", 1))
    assert printed.inconclusive is None and not printed.passed
    assert not cmp(g, run("", "cal: not found", 127), v=NO_INCONCLUSIVE).inconclusive


def test_quiet_wrong_candidate_against_printing_gold_fails():
    v = FehVerifier(embed=const_embed)
    r = v.compare("t", "wc -l < /testbed/a.txt", "cd /testbed", run("42\n"), run())
    assert not r.passed and r.inconclusive is None and r.stage == "OUTPUT"
    assert r.details["rule"] == "output_presence"
    r2 = v.compare("t", "cd /testbed", "wc -l < /testbed/a.txt", run(), run("42\n"))
    assert not r2.passed and r2.inconclusive is None


def test_stderr_only_failure_fails_on_exit_status_with_feedback():
    g = run("hello\n")
    c = run("", "bash: line 1: hel: command not found\n", exit_code=127)
    v = cmp(g, c)
    assert not v.passed and v.stage == "EXIT_STATUS" and v.score == 0.0
    assert "exit status: candidate exit 127, reference exit 0" in v.feedback
    assert "command not found" in v.feedback and v.error_classes == ["EXIT_STATUS"]
    # two different failures with only stderr: compared as output, not as 'both empty'
    v2 = cmp(run("", "ls: cannot access 'x': No such file", 2), run("", "cal: command not found", 127),
             v=NO_INCONCLUSIVE)
    assert not v2.passed and v2.details["rule"] != "no_output_cmd"


def test_verbose_variant_with_same_fs_effect_passes():
    fs = [F("/testbed/b.txt", "12")]
    g = run("", fs=fs)
    c = run("'/testbed/a.txt' -> '/testbed/b.txt'\n", fs=fs)
    v = cmp(g, c, gold="cp /testbed/a.txt /testbed/b.txt", cand="cp -v /testbed/a.txt /testbed/b.txt")
    assert v.passed and v.details["rule"] == "fs_effect" and "file-system changes match" in v.feedback
    off = FehVerifier(FehParams(fs_effect_wins=False), embed=bag_embed)
    assert not cmp(g, c, v=off).passed


def test_fs_difference_fails_and_names_paths():
    g = run("", fs=[F("/testbed/out.txt", "11")])
    c = run("", fs=[F("/testbed/other.txt", "11")])
    v = cmp(g, c)
    assert not v.passed and v.stage == "FS_DIFF"
    assert "only reference: added /testbed/out.txt" in v.feedback
    assert "only candidate: added /testbed/other.txt" in v.feedback
    assert v.details["gold"]["fs_diff"][0]["path"] == "/testbed/out.txt"
    # same path, other content
    v2 = cmp(g, run("", fs=[F("/testbed/out.txt", "22")]))
    assert not v2.passed and "content differs: added /testbed/out.txt" in v2.feedback
    # with the content veto off, other contents may pass on output; other paths never do
    loose = FehVerifier(FehParams(fs_veto=False), embed=bag_embed)
    assert cmp(run("x", fs=[F("/o", "1")]), run("x", fs=[F("/o", "2")]), v=loose).passed
    v3 = cmp(run("x"), run("x", fs=[F("/testbed/Hello.java")]), v=loose)
    assert not v3.passed and v3.stage == "FS_DIFF"


def test_line_order_and_cosine_threshold():
    assert cmp(run("b\na\n"), run("a\nb\n")).details["rule"] in ("identical", "output_equal")
    strict = FehVerifier(FehParams(sorted_lines_equal=False), embed=bag_embed)
    g, c = run("total 4 alpha beta gamma delta"), run("total 4 alpha beta gamma epsilon")
    s = float(np.dot(*bag_embed(["total 4 alpha beta gamma delta", "total 4 alpha beta gamma epsilon"])))
    lo = FehVerifier(FehParams(out_threshold=s - 0.01), embed=bag_embed)
    hi = FehVerifier(FehParams(out_threshold=s + 0.01), embed=bag_embed)
    assert cmp(g, c, v=lo).passed and not cmp(g, c, v=hi).passed
    assert cmp(g, c, v=hi).stage == "OUTPUT" and "stdout differs" in cmp(g, c, v=hi).feedback
    assert abs(cmp(g, c, v=lo).score - s) < 1e-6
    assert not strict.compare("t", "a", "b", run("b\na"), run("a\nb"), ).details["rule"] == "identical"


def test_status_veto_can_be_switched_off():
    g, c = run("", exit_code=1), run("")  # grep finding nothing vs find finding nothing
    f = features(RunView.of(g), RunView.of(c))
    f.cos_cmd = 0.9
    assert decide(f, FehParams()).stage == "EXIT_STATUS"
    assert decide(f, FehParams(status_veto=False)).rule == "no_output_cmd"
    assert features(RunView.of(g), RunView.of(c), "ls ", "ls").same_command


def test_containment_and_output_over_status_rules():
    g = run("uid=0(root) gid=0(root) groups=0(root)")
    c = run("0(root)")
    assert not cmp(g, c).passed  # off by default (S1's rule has no containment)
    on = FehVerifier(FehParams(overlap_threshold=0.5), embed=bag_embed)
    v = cmp(g, c, v=on)
    assert v.passed and v.details["rule"] == "output_overlap"
    strict = FehVerifier(FehParams(overlap_threshold=0.5, overlap_min_tokens=3), embed=bag_embed)
    assert not cmp(g, c, v=strict).passed  # too few tokens to trust containment
    same_out = run("Only in /a: x\n"), run("Only in /a: x\n", exit_code=1)  # diff | sort vs diff
    assert cmp(*same_out).stage == "EXIT_STATUS"
    assert cmp(*same_out, v=FehVerifier(FehParams(output_over_status=True), embed=bag_embed)).passed


def test_usage_lines_never_pass_a_similarity_rule():
    twin = run("Usage: bash <limit>  (prints twin primes up to limit)\n", exit_code=1)
    fib = run("Usage: bash <count>  (prints Fibonacci numbers)\n", exit_code=1)
    loose = FehVerifier(FehParams(overlap_threshold=0.5, out_threshold=0.5, inconclusive=False), embed=const_embed)
    r = cmp(twin, fib, v=loose)
    assert r.passed is False and r.details["rule"] != "output_overlap"
    # with INCONCLUSIVE on (the default): both runs show only a usage line, nothing decides
    assert cmp(twin, fib, v=FehVerifier("nl2sh", embed=const_embed)).inconclusive
    assert cmp(twin, twin, v=FehVerifier("nl2sh", embed=const_embed)).inconclusive  # the same usage line too
    # a usage line printed with exit 0 against real output is no match either
    ok_usage = run("usage: fib N\n")
    assert cmp(run("0\n1\n1\n2\n"), ok_usage, v=FehVerifier("nl2sh", embed=const_embed)).passed is False
    # real output that merely mentions usage is output
    assert cmp(run("disk usage: 42%\n"), run("disk usage: 42%\n")).passed
