"""Issue 24, three-state verdicts: an identical failure is INCONCLUSIVE unless the task expects
failure, INCONCLUSIVE and ERROR have passed None, and consumers (the optimizer's metric, the
evaluation, judge validation) keep no verdict apart from a rejection (shared stand-ins:
_feh_testkit)."""
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from _feh_testkit import bag_embed, run  # noqa: E402
from verifirst.core.task import Item  # noqa: E402
from verifirst.verifiers.bash.feh import FehVerifier  # noqa: E402


def test_judge_validation_takes_no_ground_truth_from_an_inconclusive_verdict():
    from verifirst.benchmarks.studies.judge_validation import verify_truth

    v = FehVerifier(run_pair=lambda g, c, f: (run(), run()), embed=bag_embed)
    item = Item("q", {"task": "t"}, {"command": "cd /testbed", "fixture": "empty"})
    passed, why = verify_truth(v, item, "export X=1")
    assert passed is None and why.startswith("inconclusive: the reference command has no observable effect")
    assert verify_truth(v, item, "cd /testbed") == (True, None)


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
