"""Spend limits are checked before anything runs: 0 is never "unlimited", a negative or non-numeric limit,
an unknown role or a malformed price is refused naming the field (and the file and line), exit 2, nothing
written. Engine budgets (max_metric_calls) follow the same rule in the Python API."""
import pytest
from typer.testing import CliRunner

import verifirst as vf
from verifirst.cli import app
from verifirst.core.errors import InputError

BAD = [
    ({"max_metric_calls": 0}, "budget.max_metric_calls"),
    ({"max_metric_calls": -3}, "budget.max_metric_calls"),
    ({"max_usd": 0}, "budget.max_usd"),
    ({"max_usd": -1.5}, "budget.max_usd"),
    ({"max_usd": "5"}, "budget.max_usd"),
    ({"max_usd": float("nan")}, "budget.max_usd"),
    ({"max_tokens": 1.5}, "budget.max_tokens"),
    ({"max_lm_calls": 0}, "budget.max_lm_calls"),
    ({"max_wall_s": True}, "budget.max_wall_s"),
    ({"per_role": {"reflection": {"max_usd": 0}}}, "budget.per_role.reflection.max_usd"),
    ({"per_role": {"reflection": {"max_dollars": 1}}}, "budget.per_role.reflection.max_dollars"),
    ({"prices": {"hosted_vllm/m": {"input": 0.2}}}, "budget.prices.hosted_vllm/m"),
]


@pytest.mark.parametrize("kw,field", BAD, ids=[f for _, f in BAD])
def test_api_budget_refuses_a_limit_that_is_no_limit(kw, field):
    with pytest.raises(InputError) as e:
        vf.Budget(**kw)
    assert e.value.field == field


def test_a_budget_with_limits_is_spend_limited():
    assert not vf.Budget(max_metric_calls=8).spend_limited
    assert vf.Budget(max_usd=2.5).spend_limited and vf.Budget(per_role={"task": {"max_lm_calls": 3}}).spend_limited


def _toml(tmp_path, budget: str):
    path = tmp_path / "exp.toml"
    path.write_text(f'[experiment]\nname = "b"\nworkdir = "{tmp_path / "wd"}"\n[suite]\nname = "bash-builtin"\n'
                    f'[program]\nname = "bash-generator"\n[verifier]\nname = "exact"\n[budget]\n{budget}\n')
    return path


@pytest.mark.parametrize("budget,where", [
    ("max_usd = 0", ":11 [budget.max_usd]"),
    ("max_tokens = -5", ":11 [budget.max_tokens]"),
    ("max_lm_calls = 2.5", ":11 [budget.max_lm_calls]"),
    ('max_wall_s = "an hour"', ":11 [budget.max_wall_s]"),
    ("[budget.per_role.reflecton]\nmax_usd = 1", ":11 [budget.per_role.reflecton]"),
    ("[budget.per_role.task]\nmax_usd = -1", ":12 [budget.per_role.task.max_usd]"),
])
def test_experiment_file_budget_errors_name_file_line_and_field(tmp_path, budget, where):
    path = _toml(tmp_path, budget)
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run")])
    assert r.exit_code == 2, r.output
    assert f"{path}{where}" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "run").exists() and not (tmp_path / "wd").exists()  # nothing written


@pytest.mark.parametrize("flag", [["--max-usd", "0"], ["--max-usd", "-2"], ["--max-lm-calls", "0"]])
def test_cli_limit_flags_refuse_zero_and_negative(tmp_path, flag):
    path = _toml(tmp_path, "")
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run"), *flag])
    assert r.exit_code == 2 and f"[{flag[0]}]" in r.output and "0 is not unlimited" in r.output, r.output
    assert not (tmp_path / "run").exists()


# -- the hard stop, end to end ----------------------------------------------------------------------

import json  # noqa: E402

import dspy  # noqa: E402

from verifirst.lm.spend import BudgetExceeded  # noqa: E402
from verifirst.lm.testing import ScriptedEngine, json_answer  # noqa: E402
from verifirst.lm import AccountedLM  # noqa: E402

RULE = "Always answer with the number 42."
PRICES = {"local/cap-task": {"input": 1000.0, "output": 4000.0}, "local/cap-refl": {"input": 1000.0, "output": 4000.0}}


class QA(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def _metric(example, pred, trace=None, pred_name=None, pred_trace=None):
    ok = (pred.answer or "").strip() == example.answer
    return dspy.Prediction(score=float(ok), feedback="right" if ok else "the answer is 42")


def _engines():
    task = ScriptedEngine(lambda m: json_answer(answer="42" if "42" in m[0]["content"] else "41"))
    refl = ScriptedEngine(lambda m: json_answer(new_instruction=RULE))
    return task, refl


def _optimize(run_dir, budget, engines, tmp_path, tracking=None):
    task, refl = engines
    # max_tokens: what a call reserves before it is sent (the scripted answers are shorter)
    models = {"task": AccountedLM("local/cap-task", spec="cap-task", engine=task, cache=True, num_retries=0,
                                  max_tokens=40),
              "reflection": AccountedLM("local/cap-refl", role="reflection", spec="cap-refl", engine=refl, cache=True,
                                        num_retries=0, max_tokens=40)}
    data = [{"id": f"q{k}", "question": f"what is the answer #{k}?", "answer": "42"} for k in range(12)]
    return vf.optimize(dspy.Predict(QA), data, _metric, "gepa", models=models, budget=budget, run_dir=run_dir,
                       workdir=tmp_path / "wd", cache=tmp_path / "cache", tracking=tracking)


def _rows(run_dir):
    out = {}
    for f in sorted((run_dir / "eval").glob("*.jsonl")):
        out[f.stem] = sorted((r["id"], r["status"]) for r in map(json.loads, f.read_text().splitlines()))
    return out


@pytest.mark.parametrize("limit", [{"max_lm_calls": 20}, {"max_usd": 4.0}])  # the whole run: 25 calls, 5.32 USD
def test_a_capped_run_keeps_its_best_so_far_scores_test_and_resumes_to_the_uncapped_rows(tmp_path, limit):
    full = _optimize(tmp_path / "full", vf.Budget(max_metric_calls=30), _engines(), tmp_path / "a")
    engines = _engines()
    run_dir = tmp_path / "capped"
    capped = _optimize(run_dir, vf.Budget(max_metric_calls=30, prices=PRICES, **limit), engines, tmp_path / "b")
    sent = engines[0].calls + engines[1].calls
    key = next(iter(limit))
    stop = capped.report["stopped"]
    assert stop["by"].startswith(f"stopped by budget: {key}") and "held back to score the test split" in stop["by"]
    assert stop["test"] == "scored" and stop["not_scored"] == {"train": "budget", "val": "budget"}
    assert capped.report["splits"]["test"]["after"]["n"] == 3 and capped.report["splits"]["val"]["after"] is None
    state = json.loads((run_dir / "run_state.json").read_text())
    assert state["status"] == "stopped" and state["stopped_by"] == stop["by"]
    if key == "max_lm_calls":
        assert sent <= limit[key]  # one thread: not one call past the cap
    else:
        assert state["spend"]["run"]["usd"] <= limit[key]
    published = json.loads((run_dir / "report.json").read_text())
    assert published["stopped"]["test"] == "scored"
    assert "not scored: budget" in (run_dir / "report.md").read_text()
    again = _optimize(run_dir, vf.Budget(max_metric_calls=30, prices=PRICES, **{key: limit[key] * 100}), engines,
                      tmp_path / "b")
    assert again.report["spend"]["stopped_by"] is None and "stopped" not in again.report
    assert json.loads((run_dir / "run_state.json").read_text())["status"] == "finished"
    assert _rows(run_dir) == _rows(tmp_path / "full") and again.report["splits"] == full.report["splits"]


def test_gepa_stopped_by_the_budget_returns_its_best_completed_candidate(tmp_path):
    engines = _engines()
    capped = _optimize(tmp_path / "run", vf.Budget(max_metric_calls=30, max_lm_calls=22), engines, tmp_path)
    stop = capped.report["stopped"]
    assert stop["kept"].startswith("the optimizer's best on validation") and stop["test"] == "scored"
    assert engines[0].calls + engines[1].calls <= 22
    # the reflection's rule had been accepted on validation before the cap: the run returns it
    assert RULE in capped.program.predictors()[0].signature.instructions
    assert capped.report["splits"]["test"]["after"]["pass_rate"] == 1.0


def test_a_budget_that_leaves_nothing_for_test_claims_nothing(tmp_path):
    # the task role's own limit is not held back for the test split: its evaluation is refused
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    engines = _engines()
    with pytest.raises(BudgetExceeded, match="test not scored: budget") as e:
        _optimize(tmp_path / "run", vf.Budget(max_metric_calls=30, per_role={"task": {"max_lm_calls": 19}}),
                  engines, tmp_path, tracking=vf.MLflow(uri=uri, traces=False))
    assert "resume" in str(e.value) and engines[0].calls <= 19
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["stopped"]["test"] == "not scored: budget" and report["splits"]["test"]["after"] is None
    assert report["instructions_changed"] and RULE in str(report["instructions"])  # a new prompt, not claimed:
    assert mlflow.MlflowClient(uri, registry_uri=uri).search_prompts() == []  # nothing registered
    assert json.loads((tmp_path / "run" / "run_state.json").read_text())["status"] == "stopped"


def test_max_usd_with_a_model_without_a_price_is_refused_before_anything(tmp_path):
    data = [{"id": f"q{k}", "question": f"q{k}?", "answer": "42"} for k in range(8)]
    with pytest.raises(InputError) as e:
        vf.optimize(dspy.Predict(QA), data, _metric, None, budget=vf.Budget(max_usd=1.0),
                    models={"task": {"model": "hosted_vllm/my-model", "api_base": "http://127.0.0.1:9/v1"}},
                    run_dir=tmp_path / "run", workdir=tmp_path / "wd")
    assert e.value.field == "prices" and "hosted_vllm/my-model" in str(e.value)
    assert not (tmp_path / "run").exists() and not (tmp_path / "wd").exists()


def test_cli_run_stopped_by_budget_exits_1_and_says_how_to_resume(tmp_path, monkeypatch):
    from verifirst.lm import Models
    from verifirst.lm.testing import scripted_lm

    engine = ScriptedEngine(lambda m: json_answer(command="echo hi"))
    monkeypatch.setattr("verifirst.lm.make_models", lambda *a, **k: Models(
        task=AccountedLM("local/cli-cap", spec="cli-cap", engine=engine, num_retries=0),
        reflection=scripted_lm(lambda m: json_answer(new_instruction="x"), role="reflection", name="cli-cap-refl")))
    path = _toml(tmp_path, "").with_suffix(".toml")
    path.write_text(path.read_text().replace("[budget]\n", "[optimizer]\nname = \"none\"\n[tracking]\nenabled = false\n"))
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run"), "--max-lm-calls", "5"])
    assert r.exit_code == 1, r.output
    assert "stopped by budget: max_lm_calls 5 for the run reached" in r.output and "resume" in r.output
    assert engine.calls == 5 and "Traceback" not in r.output
    assert json.loads((tmp_path / "run" / "run_state.json").read_text())["status"] == "stopped"


def _calibrate(run_dir, tmp_path, engine, budget):
    from pathlib import Path

    from test_behaviour_unchanged import _judge_answer  # noqa: F401  (the scripted judge, teacher and proposer)

    lm = AccountedLM("local/cap-judge", role="judge", spec="cap-judge", engine=engine, cache=True, num_retries=0)
    outcomes = Path(__file__).resolve().parents[1] / "examples" / "outcomes.jsonl"
    return vf.calibrate(outcomes, models={"judge": lm}, max_iters=2, run_dir=run_dir, workdir=tmp_path / "wd",
                        budget=budget)


@pytest.mark.parametrize("share, kept", [(0.5, "the start program"), (0.85, "the optimizer's best")])
def test_calibration_stops_at_the_cap_and_resumes_to_the_uncapped_rows(tmp_path, share, kept):
    # half the calls: the teacher pass or the start prompt's iteration is cut, so the start prompt stands;
    # 85%: a later iteration is cut, and AutoRefine returns its best completed one on validation
    from test_behaviour_unchanged import _judge_answer

    full_engine = ScriptedEngine(_judge_answer)
    full = _calibrate(tmp_path / "full", tmp_path / "a", full_engine, None)
    cap = int(full_engine.calls * share)
    engine = ScriptedEngine(_judge_answer)
    capped = _calibrate(tmp_path / "capped", tmp_path / "b", engine, vf.Budget(max_lm_calls=cap))
    assert engine.calls <= cap  # one thread: nothing past the cap was sent
    stop = capped.report["stopped"]
    assert stop["by"].startswith(f"stopped by budget: max_lm_calls {cap} for the run reached")
    assert stop["kept"].startswith(kept) and stop["test"] == "scored" and set(capped.report["judge"]["splits"]) == {"test"}
    assert capped.report["details"].get("stop_reason") == ("budget" if share > 0.5 else None)
    again = _calibrate(tmp_path / "capped", tmp_path / "b", engine, vf.Budget(max_lm_calls=10 * full_engine.calls))
    assert "stopped" not in again.report
    assert _rows(tmp_path / "capped") == _rows(tmp_path / "full")
    assert again.report["judge"]["test"] == full.report["judge"]["test"]


def test_cli_run_stopped_in_the_optimizer_prints_what_it_kept_and_exits_0(tmp_path, monkeypatch):
    from verifirst.lm import Models

    task = ScriptedEngine(lambda m: json_answer(command="echo hi"))
    refl = ScriptedEngine(lambda m: json_answer(new_instruction="Answer with a command."))
    monkeypatch.setattr("verifirst.lm.make_models", lambda *a, **k: Models(
        task=AccountedLM("local/cli-gepa", spec="cli-gepa", engine=task, num_retries=0, max_tokens=40),
        reflection=AccountedLM("local/cli-gepa-refl", role="reflection", spec="cli-gepa-refl", engine=refl,
                               num_retries=0, max_tokens=40)))
    path = _toml(tmp_path, "")
    path.write_text(path.read_text().replace('name = "bash-builtin"\n', 'name = "bash-builtin"\nlimit = 12\n').replace(
        "[budget]\n", '[optimizer]\nname = "gepa"\nmax_metric_calls = 30\n[tracking]\nenabled = false\n'))
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run"), "--max-lm-calls", "16"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())  # the console wraps long lines
    assert "Stopped by budget: max_lm_calls 16 for the run reached for the optimizer" in out
    assert "train, val not scored again" in out and "the test split was scored once" in out
    assert "no candidate beat them" not in out  # the optimizer was stopped, not beaten
    assert "the start instructions were kept (stopped by budget): no prompt registered" in out
    assert task.calls + refl.calls <= 16


def test_mlflow_gets_the_spend_metrics_and_the_stop_tag(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    task, refl = _engines()
    models = {"task": AccountedLM("local/cap-task", spec="cap-task", engine=task, num_retries=0, max_tokens=40),
              "reflection": AccountedLM("local/cap-refl", role="reflection", spec="cap-refl", engine=refl,
                                        num_retries=0, max_tokens=40)}
    data = [{"id": f"q{k}", "question": f"what is the answer #{k}?", "answer": "42"} for k in range(12)]
    res = vf.optimize(dspy.Predict(QA), data, _metric, "gepa", models=models, run_dir=tmp_path / "run",
                      budget=vf.Budget(max_metric_calls=30, max_usd=4.0, prices=PRICES), workdir=tmp_path / "wd",
                      tracking=vf.MLflow(uri=uri, experiment="spend", traces=False), name="spend-run")
    stop = res.report["stopped"]
    run = MlflowClient(uri).get_run(res.report["run_id"])
    assert run.data.tags["verifirst.stopped_by"] == stop["by"]
    spent = res.report["spend"]
    assert run.data.metrics["spend/usd"] == pytest.approx(spent["run"]["usd"]) and run.data.metrics["spend/usd"] <= 4.0
    assert run.data.metrics["spend/lm_calls"] == spent["run"]["lm_calls"] == task.calls + refl.calls
    assert run.data.metrics["spend/task/tokens"] == spent["roles"]["task"]["tokens"] > 0
    assert run.data.metrics["spend/reflection/usd"] == pytest.approx(spent["roles"]["reflection"]["usd"])

