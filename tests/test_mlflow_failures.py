"""What MLflow shows of a run that failed or scored nothing: the reason on the run (a tag and its
description) and in run_state.json, the evaluation that made it fail ended FAILED, no pass rate over
no scored item, and the run's budget, split sizes and seed as parameters."""
import json

import dspy
import pytest
from mlflow import MlflowClient

import verifirst as vf
from verifirst.core.redaction import register_secret
from verifirst.lm.testing import json_answer, scripted_lm

SECRET = "sk-test-FAILUREMSGSECRET"


class QA(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def _metric(example, pred, trace=None):
    return float((pred.answer or "").strip() == example.answer)


DATA = [{"id": f"q{k}", "question": f"what is the answer #{k}?", "answer": "42"} for k in range(15)]


def _down(messages):
    raise ConnectionError(f"Connection refused (key {SECRET})")


def _up(messages):
    return json_answer(answer="42")


def _optimize(tmp_path, answer, **kw):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    return uri, vf.optimize(dspy.Predict(QA), DATA, _metric, "none", models={"task": scripted_lm(answer)},
                            run_dir=tmp_path / "run", workdir=tmp_path / "wd", name="fails",
                            tracking=vf.MLflow(uri=uri, experiment="failures", traces=False), **kw)


def _runs(uri: str) -> dict:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("failures")
    return {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}


def test_a_failed_run_says_why_on_its_mlflow_run_and_in_run_state(tmp_path):
    register_secret(SECRET)
    with pytest.raises(vf.RunFailed):
        _optimize(tmp_path, _down, max_error_rate=None)
    runs = _runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    parent = runs["fails"]
    why = parent.data.tags["verifirst.failure"]
    assert parent.info.status == "FAILED" and why.startswith("RunFailed: run failed: before train")
    assert parent.data.tags["mlflow.note.content"] == why and SECRET not in why and "***" in why
    ev = runs["eval/before/train"]  # the evaluation whose results failed the run
    assert ev.info.status == "FAILED" and "none of its" in ev.data.tags["verifirst.failure"]
    state = json.loads((tmp_path / "run" / "run_state.json").read_text())
    assert state["status"] == "failed" and state["failure"] == why


def test_a_failed_run_resumes_on_its_run_directory(tmp_path):
    with pytest.raises(vf.RunFailed):
        _optimize(tmp_path, _down, max_error_rate=None)
    assert json.loads((tmp_path / "run" / "run_state.json").read_text())["status"] == "failed"
    _, res = _optimize(tmp_path, _up, max_error_rate=None)  # the same run: resumed, not refused
    assert res.report["splits"]["train"]["before"]["pass_rate"] == 1.0
    assert json.loads((tmp_path / "run" / "run_state.json").read_text())["status"] == "finished"


def test_a_run_stopped_by_its_error_rate_says_why(tmp_path):
    with pytest.raises(Exception) as e:
        _optimize(tmp_path, _down)
    parent = _runs(f"sqlite:///{tmp_path / 'mlflow.db'}")["fails"]
    assert parent.info.status == "FAILED"
    assert parent.data.tags["verifirst.failure"].startswith(type(e.value).__name__ + ": ")
    assert parent.data.tags["mlflow.note.content"] == parent.data.tags["verifirst.failure"]


def test_an_evaluation_without_a_verdict_logs_counts_and_no_rates(tmp_path):
    with pytest.raises(vf.RunFailed):
        _optimize(tmp_path, _down, max_error_rate=None)
    runs = _runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    m = runs["eval/before/train"].data.metrics
    assert m["scored"] == 0 and m["n"] == m["errors"] > 0
    assert not {"pass_rate", "mean_score", "ci_lo", "ci_hi"} & set(m)
    assert "before_train_pass_rate" not in runs["fails"].data.metrics
    assert runs["fails"].data.metrics["before_train_scored"] == 0


def test_a_scored_evaluation_still_logs_its_rates(tmp_path):
    uri, _ = _optimize(tmp_path, _up)
    runs = _runs(uri)
    m = runs["eval/before/train"].data.metrics
    assert m["pass_rate"] == 1.0 and m["mean_score"] == 1.0 and m["scored"] == m["n"] > 0
    assert runs["fails"].data.metrics["before_train_pass_rate"] == 1.0


def test_api_runs_log_budget_splits_and_seed_as_params(tmp_path):
    uri, res = _optimize(tmp_path, _up, budget=vf.Budget(max_lm_calls=500), seed=7, splits=(0.6, 0.2, 0.2))
    params = _runs(uri)["fails"].data.params
    sizes = res.report["sizes"]
    assert params["budget.max_lm_calls"] == "500" and "budget.max_usd" not in params
    assert params["seed"] == "7" and params["splits.ratios"] == "0.6, 0.2, 0.2"
    assert [params[f"splits.{s}"] for s in ("train", "val", "test")] == [str(sizes[s]) for s in ("train", "val", "test")]
    assert {"split_digest", "suite_size", "optimizer", "metric"} <= set(params)  # the names runs had before
