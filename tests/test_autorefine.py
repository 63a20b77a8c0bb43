"""AutoRefine loop, teacher, edits and resume, pinned with the rule-following scripted LM of
_autorefine_world (see its docstring): the loop only improves the judge if it really writes rules
into the prompt. The scripted world is re-exported here for the test files that import it from
test_autorefine.
"""
from __future__ import annotations

import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
import pytest  # noqa: E402

from _autorefine_world import (CHECK_RE, FAIL_RULE, FIELD_RE, HAZARDS, PASS_RULE, Interrupt,  # noqa: E402,F401,F811
                               RuleFollowingLM, _Engine, hazard, make_world, rule_verdict, split, world)
from verifirst.core.errors import LeakageError  # noqa: E402
from verifirst.judge import edits as _edits  # noqa: E402
from verifirst.judge.autorefine import STATE_FILE, CalibrationMismatch, refine_judge  # noqa: E402
from verifirst.judge.calibrate import run_calibration  # noqa: E402
from verifirst.judge.programs import PassFailJudge  # noqa: E402


# -- the loop -----------------------------------------------------------------------------
def test_loop_discovers_rules_and_beats_uncalibrated_on_held_out(world, tmp_path):
    suite, manifest = world
    lm = RuleFollowingLM()
    report = run_calibration(suite, manifest, "passfail", lm, lm, lm, batch_size=100, max_iters=5, run_dir=tmp_path,
                             n_boot=300)
    judged = report["judge"]  # the judge section of the driver's report
    prompt = judged["calibrated_prompt"]
    assert "FAIL if the code contains `eval(`" in prompt
    assert "PASS if the code contains `literal_eval(`" in prompt
    assert "FAIL if the code contains `os.system(`" in prompt
    t = judged["test"]
    cal, unc = t["judges"]["calibrated"]["pi"], t["judges"]["uncalibrated"]["pi"]
    assert unc <= 0.0 < 0.5 < cal
    cmp = t["comparisons"]["calibrated_vs_uncalibrated"]
    assert cmp["pi_ci95"][0] > 0 and cmp["mcnemar_exact"]["p_value"] < 0.05
    for key in ("fail_recall", "fail_precision", "pass_recall"):
        assert key in t["judges"]["calibrated"]
    teach = judged["teacher"]
    assert teach["abstain"] > 0 and teach["keep"] > 0 and teach["correct"] == 0
    assert set(teach["stats"]["by_label"]) == {"PASS", "FAIL"}
    assert "stage" in teach["stats"]["by_meta"]
    assert (tmp_path / "calibrated_prompt.txt").read_text().strip() == prompt.strip()
    assert json.loads((tmp_path / "report.json").read_text())["judge"]["calibrated_prompt"] == prompt
    # the loop's own record: train pi rises, selection by validation
    its = judged["loop"]["iterations"]
    assert its[0]["train_pi"] < its[-1]["train_pi"]
    assert judged["loop"]["selected_iteration"] == max(its, key=lambda i: (i["val_pi"], -i["iteration"]))["iteration"]


def test_abstained_samples_never_reach_disagreement_analysis(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM()
    res = refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, run_dir=tmp_path)
    skipped = [i for i, d in res.teacher.items() if d.decision == "SKIP"]
    assert skipped
    by_id = {it.id: it for it in train}
    shown = "\n".join(f.get("disagreements", "") for r, f in lm.calls if r == "proposer")
    judged_train = {f["code"] for r, f in lm.calls if r == "judge"}
    for i in skipped:
        code = by_id[i].inputs["code"]
        assert code.splitlines()[0] not in shown  # function names are unique per item
        assert code not in judged_train or any(code == v.inputs["code"] for v in val)
    for it in res.iterations:
        assert not set(it["disagreements"]) & set(skipped)


def test_teacher_sees_exactly_view_plus_label(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM()
    refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, max_iters=1)
    teacher_calls = [f for r, f in lm.calls if r == "teacher"]
    assert len(teacher_calls) == len(train)
    for f in teacher_calls:
        assert set(f) == {"code", "task", "outcome_label"}
        blob = json.dumps(f)
        assert "draft" not in blob and "review" not in blob  # metadata never shown
    ids = {it.id for it in train}
    assert not any(i in json.dumps(f) for f in teacher_calls for i in ids)  # nor ids


def test_no_test_item_reaches_the_optimizer(world, tmp_path):
    suite, manifest = world
    _, _, test = split(suite, manifest)
    lm = RuleFollowingLM()
    run_calibration(suite, manifest, "passfail", lm, lm, lm, batch_size=100, max_iters=2, run_dir=tmp_path, n_boot=50)
    test_codes = {it.inputs["code"] for it in test}
    optimizer_roles = ("teacher", "proposer", "applier")
    for role, f in lm.calls:
        if role in optimizer_roles:
            blob = json.dumps(f)
            assert not any(c.splitlines()[0] in blob for c in test_codes)
    assert not set(manifest.seen) & set(manifest.test)
    # and the guard refuses a leak outright
    with pytest.raises(LeakageError):
        manifest.admit_to_optimizer(manifest.test[:1])


def test_test_split_refused_once_seen(world, tmp_path):
    suite, manifest = world
    manifest.seen.add(manifest.test[0])
    with pytest.raises(LeakageError):
        run_calibration(suite, manifest, "passfail", RuleFollowingLM(), RuleFollowingLM(),
                        RuleFollowingLM(), max_iters=1, run_dir=tmp_path, n_boot=10)


# -- balance and length cap -------------------------------------------------------------
def test_unbalanced_proposal_is_reasked_and_pairs_land_together(world):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM()
    res = refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, max_iters=3)
    rounds = [it["edits"] for it in res.iterations[1:]]
    assert rounds and all(r["rebalance_asked"] for r in rounds)
    for r in rounds:
        kept = r["kept"]
        assert sum(e["direction"] == "FAIL" for e in kept) == sum(e["direction"] == "PASS" for e in kept)


def test_unpaired_fail_reasons_are_dropped_not_applied(world):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM(pair_edits=False)
    res = refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, max_iters=3)
    assert "FAIL if the code contains" not in res.prompt
    r = res.iterations[1]["edits"]
    assert r["dropped_unbalanced"] and not r["kept"]
    assert res.stop_reason == "no_usable_edits"


def test_length_cap_is_enforced_on_the_rewrite(world):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM(pad_rewrite=400)  # the applier bloats every rewrite past the cap
    judge = PassFailJudge(["code", "task"])
    cap = len(judge.prompt) + 200
    res = refine_judge(judge, train, val, lm, lm, judge_lm=lm, batch_size=100, max_iters=3, length_cap=cap)
    assert all(it["prompt_chars"] <= cap for it in res.iterations)
    assert len(res.prompt) <= cap
    r = res.iterations[1]["edits"]
    assert r["applier"] == "deterministic" and any("too long" in p for p in r["applier_problems"])
    assert "Be thorough" not in res.prompt
    assert "FAIL if the code contains `eval(`" in res.prompt  # the pair still fit


def test_length_cap_drops_whole_pairs_when_tight():
    prompt = "Judge the code."
    edits = [_edits.Edit("add", "FAIL", "FAIL if the code contains `eval(`"),
             _edits.Edit("add", "PASS", "PASS if the code contains `literal_eval(`"),
             _edits.Edit("add", "FAIL", "FAIL if the code contains `os.system(`"),
             _edits.Edit("add", "PASS", "PASS if the code contains `subprocess.run(`")]
    one_pair = _edits.apply_deterministic(prompt, edits[:2])
    lm = RuleFollowingLM(pad_rewrite=100)
    rnd = _edits.EditRound()
    with dspy.context(lm=lm):
        out = _edits.EditApplier()(prompt, edits, len(one_pair), rnd)
    assert out == one_pair and len(out) <= len(one_pair)
    assert len(rnd.dropped_for_length) == 2 and _edits.is_balanced(rnd.dropped_for_length and
                                                                  [_edits.Edit(**e) for e in rnd.dropped_for_length])


def test_balance_function():
    E = _edits.Edit
    kept, dropped = _edits.balance([E("add", "FAIL", "a"), E("add", "FAIL", "b"), E("add", "PASS", "c"),
                                    E("remove", "PASS", "", "old rule")])
    assert [e.rule for e in kept] == ["a", "c", ""] and [e.rule for e in dropped] == ["b"]
    assert _edits.is_balanced(kept)


# -- resume -------------------------------------------------------------------------------
def test_resume_after_interrupt_loses_at_most_one_iteration(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    full = refine_judge(PassFailJudge(["code", "task"]), train, val, RuleFollowingLM(), RuleFollowingLM(),
                     judge_lm=RuleFollowingLM(), max_iters=5, batch_size=100)
    per_eval = len([i for i, d in full.teacher.items() if d.kept]) + len(val)
    # kill during the evaluation of iteration 2 (iterations 0 and 1 done)
    lm = RuleFollowingLM(interrupt_after=2 * per_eval + 5)
    with pytest.raises(Interrupt):
        refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, run_dir=tmp_path)
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["teacher_done"] and [i["iteration"] for i in state["iterations"]] == [0, 1]
    lm2 = RuleFollowingLM()
    res = refine_judge(PassFailJudge(["code", "task"]), train, val, lm2, lm2, judge_lm=lm2, batch_size=100, run_dir=tmp_path)
    assert not [c for c in lm2.calls if c[0] == "teacher"]  # teacher pass not redone
    judged = sum(1 for r, _ in lm2.calls if r == "judge")
    abstained = sum(d.decision == "SKIP" for d in full.teacher.values())  # judged once for the review queue
    assert judged == (len(full.iterations) - 2) * per_eval + abstained  # only the lost iteration onward
    assert res.prompt == full.prompt and res.selected_iteration == full.selected_iteration
    # a third call finds the run complete and calls nothing
    lm3 = RuleFollowingLM()
    refine_judge(PassFailJudge(["code", "task"]), train, val, lm3, lm3, judge_lm=lm3, batch_size=100, run_dir=tmp_path)
    assert not lm3.calls


def test_resume_mid_teacher_pass(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM(interrupt_after=20, interrupt_role="teacher")
    with pytest.raises(Interrupt):
        refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, run_dir=tmp_path)
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert len(state["teacher"]) == 16 and not state["teacher_done"]
    lm2 = RuleFollowingLM()
    refine_judge(PassFailJudge(["code", "task"]), train, val, lm2, lm2, judge_lm=lm2, batch_size=100, run_dir=tmp_path,
              max_iters=1)
    assert sum(1 for r, _ in lm2.calls if r == "teacher") == len(train) - 16


def test_other_calibration_in_same_run_dir_is_refused(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM()
    refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, run_dir=tmp_path, max_iters=1)
    with pytest.raises(CalibrationMismatch):
        refine_judge(PassFailJudge(["code", "task"], prompt="Other prompt."), train, val, lm, lm, judge_lm=lm, batch_size=100,
                  run_dir=tmp_path, max_iters=1)

