"""AutoRefine's reports and edges: the held-out report, the engine protocol, bad input, LM
errors that are never FAILs, and a test split with one label class (the scripted world:
_autorefine_world)."""
from __future__ import annotations

import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest  # noqa: E402

from _autorefine_world import RuleFollowingLM, make_world, split, world  # noqa: E402,F401,F811
from verifirst.core.errors import ErrorRateExceeded, InputError  # noqa: E402
from verifirst.judge.autorefine import STATE_FILE, AutoRefineEngine, refine_judge  # noqa: E402
from verifirst.judge.calibrate import run_calibration  # noqa: E402
from verifirst.judge.judge_report import held_out_report  # noqa: E402
from verifirst.judge.programs import PassFailJudge  # noqa: E402
from verifirst.optimizers.base import Budget, EngineContext  # noqa: E402


# -- report ---------------------------------------------------------------------------------
def test_held_out_report_from_per_item_verdicts():
    labels = {f"i{k}": ("FAIL" if k % 3 == 0 else "PASS") for k in range(30)}
    good = dict(labels)
    good["i1"] = "FAIL"
    base = {k: "PASS" for k in labels}
    base["i2"] = None  # an LM error: left out of every row, counted
    r = held_out_report(labels, {"cal": good, "base": base}, "cal", ["base"], n_boot=200)
    assert r["n_scored"] == 29 and r["excluded_lm_errors"] == 1
    cal = r["judges"]["cal"]
    assert cal["fail_recall"] == 1.0 and cal["fail_precision"] == pytest.approx(10 / 11)
    assert r["judges"]["base"]["fail_recall"] == 0.0 and r["judges"]["base"]["pass_recall"] == 1.0
    cmp = r["comparisons"]["cal_vs_base"]
    assert cmp["pi_delta"] > 0.5 and cmp["pi_ci95"][0] > 0
    assert cmp["mcnemar_exact"]["b"] == 10 and cmp["mcnemar_exact"]["c"] == 1


# -- engine protocol ---------------------------------------------------------------------
def test_engine_compile(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM()
    ctx = EngineContext(run_dir=tmp_path, reflection_lm=lm, teacher_lm=lm, task_lm=lm)
    logged = []
    ctx.log_metrics = lambda m, s: logged.append((s, m))
    res = AutoRefineEngine(batch_size=100).compile(PassFailJudge(["code", "task"]), None, [i.example() for i in train],
                                     [i.example() for i in val], Budget(max_iters=3), ctx)
    assert "FAIL if the code contains `eval(`" in res.program.prompt
    assert res.history[0]["iteration"] == 0 and len(res.history) >= 2
    assert [s for s, _ in logged] == [h["iteration"] for h in res.history]
    assert res.details["calibrated_prompt"] == res.program.prompt


def test_calibrate_rejects_bad_input(world):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    with pytest.raises(InputError):
        refine_judge(PassFailJudge(["code"]), train, val, None, None, length_cap=10)
    with pytest.raises(InputError):
        refine_judge(PassFailJudge(["code"]), train, [], None, None)


class GarbageJudgeLM(RuleFollowingLM):
    """Answers the judge role with text no adapter can parse."""

    def respond(self, system, user):
        if self.role(system) == "judge":
            self.calls.append(("judge", {}))
            return "I cannot decide."
        return super().respond(system, user)


def test_lm_errors_are_not_fails(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = GarbageJudgeLM()
    with pytest.raises(ErrorRateExceeded):
        refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, run_dir=tmp_path)
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["teacher_done"] and not state["iterations"]  # the teacher pass is kept
    from verifirst.judge.autorefine import run_judge
    run = run_judge(PassFailJudge(["code", "task"]), train[:3], lm)
    assert all(v["verdict"] is None and v["error"] for v in run.values())


def test_one_label_class_on_test_is_flagged_and_validation_verdicts_are_reported(tmp_path, capsys):
    from verifirst.judge.printing import print_calibration
    from verifirst.loop.splits import SplitManifest

    suite = make_world(n_groups=10, seed=3, opaque_rate=0.0)
    passing = [it.id for it in suite.items if it.gold["label"] == "PASS"]
    test = passing[:4]
    rest = [it.id for it in suite.items if it.id not in test]
    manifest = SplitManifest(rest[::2], rest[1::2], test, 0, (0.5, 0.25, 0.25))
    lm = RuleFollowingLM()
    report = run_calibration(suite, manifest, "passfail", lm, lm, lm, batch_size=100, max_iters=1,
                             run_dir=tmp_path, n_boot=50)
    judged = report["judge"]
    assert judged["test"]["label_counts"] == {"PASS": 4, "FAIL": 0}
    assert any("test split has one label class (all PASS): π is undefined/degenerate" in w
               for w in judged["warnings"])
    assert not any(w.startswith("validation split") for w in judged["warnings"])
    print_calibration(report)
    assert "test split has one label class (all PASS): π is undefined/degenerate" in capsys.readouterr().out
    val = judged["validation"]
    assert set(val["labels"]) == set(manifest.val) and set(val["verdicts"]["calibrated"]) == set(manifest.val)
    chosen = judged["loop"]["iterations"][judged["loop"]["selected_iteration"]]
    assert val["pi"] == chosen["val_pi"]

