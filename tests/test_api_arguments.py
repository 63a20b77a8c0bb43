"""vf.optimize's arguments: budgets an optimizer cannot honour, bad types and meaningless settings are
refused as InputError naming the argument; what the run honours is what the report shows."""
import dspy
import pytest

import verifirst as vf
from verifirst.core.errors import InputError
from verifirst.lm.testing import json_answer, scripted_lm


def records(n=10):
    return [{"id": f"q{k}", "question": f"what is the answer #{k}?", "answer": "42"} for k in range(n)]


def metric(example, pred, trace=None):
    return (pred.answer or "").strip() == example.answer


def models():
    return {"task": scripted_lm(lambda m: json_answer(answer="41"))}


def run(tmp_path, optimizer="none", **kw):
    return vf.optimize(dspy.Predict("question -> answer"), records(), kw.pop("metric", metric), optimizer,
                       models=kw.pop("models", None) or models(), workdir=tmp_path / "w", **kw)


# -- budget.max_metric_calls ---------------------------------------------------------------------------


def test_simba_keeps_its_metric_calls_within_max_metric_calls(tmp_path):
    res = run(tmp_path, "simba", budget=vf.Budget(max_metric_calls=100))
    assert 0 < res.report["details"]["metric"]["calls"] <= 100


def test_simba_dry_run_estimate_follows_max_metric_calls(tmp_path):
    def task_calls(mmc):
        est = run(tmp_path, "simba", budget=vf.Budget(max_metric_calls=mmc), dry_run=True)
        return est.by_role()["task"]["calls"]

    assert task_calls(100) < task_calls(400) < task_calls(1000)


def test_simba_refuses_max_metric_calls_too_few_for_one_step(tmp_path):
    with pytest.raises(InputError) as e:
        run(tmp_path, "simba", budget=vf.Budget(max_metric_calls=12))
    assert e.value.field == "budget.max_metric_calls" and "at least" in str(e.value)
    assert not (tmp_path / "w" / "runs").exists()  # refused before anything is written


def test_a_teleprompter_refuses_max_metric_calls_it_would_ignore(tmp_path):
    tp = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=1)
    with pytest.raises(InputError) as e:
        run(tmp_path, tp, budget=vf.Budget(max_metric_calls=50))
    assert e.value.field == "budget.max_metric_calls" and "max_bootstrapped_demos" in str(e.value)


@pytest.mark.parametrize("budget, field", [(vf.Budget(max_metric_calls=50), "budget.max_metric_calls"),
                                           (vf.Budget(auto="light"), "budget.auto")])
def test_autorefine_refuses_a_gepa_budget_it_would_ignore(tmp_path, budget, field):
    from verifirst.benchmarks.perf.estimate import EXAMPLES, _calibration_models, stubborn_answer

    models = _calibration_models(stubborn_answer)
    with pytest.raises(InputError) as e:
        vf.calibrate(EXAMPLES / "outcomes.jsonl", "passfail", models=models, budget=budget,
                     run_dir=tmp_path / "run", workdir=tmp_path / "w")
    assert e.value.field == field and "counts iterations" in str(e.value) and "budget.max_iters" in e.value.expected
    assert not (tmp_path / "run").exists() and all(m.engine.calls == 0 for m in models.values())


# -- argument types: InputError naming the argument, never a raw TypeError or ValueError ---------------


@pytest.mark.parametrize("kw, field", [
    ({"models": {"task": 42}}, "models.task"),
    ({"threshold": "high"}, "threshold"),
    ({"seed": "abc"}, "seed"),
    ({"budget": 5}, "budget"),
    ({"budget": {"max_metric_cals": 5}}, "budget.max_metric_cals"),
    ({"stratify": "answer"}, "stratify"),
])
def test_a_bad_argument_is_an_input_error_naming_it(tmp_path, kw, field):
    with pytest.raises(InputError) as e:
        run(tmp_path, **kw)
    assert e.value.field == field and e.value.expected


def test_a_budget_dict_is_a_budget(tmp_path):
    res = run(tmp_path, "simba", budget={"max_metric_calls": 100})
    assert res.report["budget"]["max_metric_calls"] == 100
    assert res.report["details"]["metric"]["calls"] <= 100


def test_make_splits_names_a_stratify_key_the_items_lack():
    with pytest.raises(InputError) as e:
        vf.make_splits([{"id": "a"}, {"id": "b"}], stratify="label")
    assert e.value.field == "stratify"


# -- settings that would mean nothing are refused --------------------------------------------------------


@pytest.mark.parametrize("threshold", [-1, 0, 2.0])
def test_a_threshold_outside_the_scores_scale_is_refused(tmp_path, threshold):
    with pytest.raises(InputError) as e:
        run(tmp_path, metric=lambda example, pred, trace=None: 0.9, threshold=threshold)
    assert e.value.field == "threshold" and "(0, 1]" in e.value.expected


def test_optimizer_options_for_no_optimizer_are_refused(tmp_path):
    with pytest.raises(InputError) as e:
        run(tmp_path, "none", optimizer_options={"max_metric_cals": 5})
    assert e.value.field == "optimizer_options" and "max_metric_cals" in str(e.value)


# -- what a run gives back ----------------------------------------------------------------------------


def test_the_errors_a_run_raises_are_top_level_names():
    from verifirst.core import errors

    assert vf.RunFailed is errors.RunFailed and vf.ErrorRateExceeded is errors.ErrorRateExceeded
    assert {"RunFailed", "ErrorRateExceeded", "InputError", "LeakageError"} <= set(vf.__all__)


def test_a_result_prints_as_one_short_line(tmp_path):
    res = run(tmp_path, "simba", budget=vf.Budget(max_metric_calls=100), run_dir=tmp_path / "r")
    text = repr(res)
    assert len(text) < 300 and "\n" not in text
    assert str(tmp_path / "r") in text and "'simba'" in text and "test 0.00 -> 0.00" in text
