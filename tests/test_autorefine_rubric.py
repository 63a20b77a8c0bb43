"""AutoRefine on a rubric judge: checks proposed instead of rules, the threshold chosen on train
and kept when a finished calibration is resumed (the scripted world: _autorefine_world)."""
from __future__ import annotations

import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import re  # noqa: E402

from _autorefine_world import RuleFollowingLM, world  # noqa: E402,F401,F811
from verifirst.judge.autorefine import choose_threshold  # noqa: E402
from verifirst.judge.calibrate import run_calibration  # noqa: E402


# -- rubric -------------------------------------------------------------------------------
RUBRIC = ("Score each check from 0 to 1.\nChecks:\n- [w=2] correct: the code does what the task asks\n"
          "- [w=1] clear: the code is readable")


class RubricRuleLM(RuleFollowingLM):
    """Proposes rubric checks instead of rules when the judge prompt is a rubric."""

    def _proposer(self, instr, f):
        edits = []
        for just in re.findall(r"justification: (.*)", f.get("disagreements", "")):
            m = re.search(r"calls `([^`]+)`.*?safe alternative: `([^`]+)`", just)
            if m:
                name = re.sub(r"\W", "", m.group(1))
                edits += [{"op": "add", "direction": "FAIL",
                           "rule": f"- [w=1] no_{name}: the code does not contain `{m.group(1)}`"},
                          {"op": "add", "direction": "PASS",
                           "rule": f"- [w=1] uses_{re.sub(chr(92) + 'W', '', m.group(2))}: the code contains `{m.group(2)}`"}]
        return {"edits": [e for n, e in enumerate(edits) if e not in edits[:n]]}

    def _applier(self, instr, f):
        edits = json.loads(f["edits"])
        return {"new_prompt": f["judge_prompt"] + "".join("\n" + e["rule"] for e in edits)}


def test_rubric_threshold_chosen_on_train_and_reported_both_ways(world, tmp_path):
    suite, manifest = world
    lm = RubricRuleLM()
    report = run_calibration(suite, manifest, "rubric", lm, lm, lm, batch_size=100, max_iters=3, run_dir=tmp_path,
                             prompt=RUBRIC, n_boot=200)
    judged = report["judge"]
    t = judged["test"]
    assert {"calibrated", "uncalibrated_default_threshold", "uncalibrated_train_threshold"} <= set(t["judges"])
    assert "calibrated_vs_uncalibrated_train_threshold" in t["comparisons"]
    assert "no_eval: the code does not contain `eval(`" in judged["calibrated_prompt"]
    thr = judged["calibrated_threshold"]
    assert thr is not None and 0 < thr < 1 and thr != 0.5
    assert t["judges"]["calibrated"]["pi"] > t["judges"]["uncalibrated_train_threshold"]["pi"]


def test_choose_threshold_maximizes_pi():
    run = {"a": {"score": 0.2}, "b": {"score": 0.4}, "c": {"score": 0.7}, "d": {"score": 0.9}}
    labels = {"a": "FAIL", "b": "FAIL", "c": "PASS", "d": "PASS"}
    t = choose_threshold(run, labels, 0.5)
    assert 0.4 < t <= 0.7
    labels2 = {"a": "FAIL", "b": "FAIL", "c": "FAIL", "d": "PASS"}
    assert 0.7 < choose_threshold(run, labels2, 0.5) <= 0.9



def test_rubric_calibration_resumed_after_the_engine_keeps_its_threshold(world, tmp_path):
    """The driver reloads a finished engine's program from optimized_program.json: the rubric's
    train-chosen threshold must come back with its prompt, or the after-evaluation judges at 0.5."""
    suite, manifest = world
    lm = RubricRuleLM()
    first = run_calibration(suite, manifest, "rubric", lm, lm, lm, batch_size=100, max_iters=3, run_dir=tmp_path,
                            prompt=RUBRIC, n_boot=50)
    assert first["judge"]["calibrated_threshold"] not in (None, 0.5)
    for f in (tmp_path / "eval").glob("after_*.jsonl"):
        f.unlink()  # killed after the engine finished, before the after-evaluation
    again = run_calibration(suite, manifest, "rubric", lm, lm, lm, batch_size=100, max_iters=3, run_dir=tmp_path,
                            prompt=RUBRIC, n_boot=50)
    assert again["splits"]["test"]["after"] == first["splits"]["test"]["after"]
    assert again["judge"]["test"]["judges"]["calibrated"] == first["judge"]["test"]["judges"]["calibrated"]

