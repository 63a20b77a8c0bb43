"""The dry-run spend estimate: calls per role within 10% of the same scripted run's (GEPA and AutoRefine
running their full course), "up to" counts that hold as bounds for runs that stop early, no model
called and nothing written (no run directory, no cache, no MLflow store), the CLI's table, and a run
whose estimate exceeds --max-usd refused in CI mode unless --yes."""
import json

import dspy
import pytest
from typer.testing import CliRunner

import verifirst as vf
from verifirst.benchmarks.perf import estimate as bench
from verifirst.cli import app
from verifirst.lm import AccountedLM, Models
from verifirst.lm.testing import ScriptedEngine, json_answer
from verifirst.loop.estimate import SpendEstimate


@pytest.mark.parametrize("name", ["gepa", "autorefine"])
def test_estimate_is_within_10_percent_per_role_of_the_scripted_run(tmp_path, name):
    got = bench.compare(bench.SCENARIOS[name](), tmp_path)
    assert got["dry_run_lm_calls"] == 0 and got["dry_run_wrote_nothing"]
    for role, r in got["per_role"].items():
        assert r["actual"] > 0 and abs(r["rel_error"]) <= 0.10, (role, r)
        assert r["tokens_in_range"], (role, r)
    assert set(got["per_role"]) == ({"task", "reflection"} if name == "gepa" else {"judge", "teacher", "reflection"})
    assert got["goal_met"]


@pytest.mark.parametrize("name", ["gepa-solved", "autorefine-stops"])
def test_up_to_counts_bound_runs_that_stop_early(tmp_path, name):
    got = bench.compare(bench.SCENARIOS[name](), tmp_path)
    assert got["goal_met"], got["per_role"]
    assert any(r["bound"] == "up to" and r["estimate"] > r["actual"] for r in got["per_role"].values())


class QA(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def _metric(example, pred, trace=None, pred_name=None, pred_trace=None):
    return float((pred.answer or "").strip() == example.answer)


def test_dry_run_calls_no_model_and_writes_nothing(tmp_path):
    task = ScriptedEngine(lambda m: json_answer(answer="42"))
    refl = ScriptedEngine(lambda m: json_answer(new_instruction="Say 42."))
    models = {"task": AccountedLM("local/dry-task", spec="dry-task", engine=task, num_retries=0),
              "reflection": AccountedLM("local/dry-refl", role="reflection", spec="dry-refl", engine=refl,
                                        num_retries=0)}
    data = [{"id": f"q{k}", "question": f"question {k}?", "answer": "42"} for k in range(16)]
    est = vf.optimize(dspy.ChainOfThought(QA), data, _metric, "gepa", models=models, dry_run=True,
                      budget=vf.Budget(max_metric_calls=20, max_usd=5.0,
                                       prices={"local/dry-task": {"input": 1.0, "output": 2.0}}),
                      workdir=tmp_path / "wd", cache=tmp_path / "cache", tracking=vf.MLflow(offline=True))
    assert isinstance(est, SpendEstimate)
    assert task.calls == 0 and refl.calls == 0
    assert not (tmp_path / "wd").exists() and not (tmp_path / "cache").exists()  # no run dir, cache, MLflow store
    rep = est.as_dict()
    json.dumps(rep)  # JSON-able
    assert rep["by_role"]["task"]["calls"] > 0 and rep["by_role"]["reflection"]["bound"] == "up to"
    assert rep["total"]["usd_low"] <= rep["total"]["usd_high"] and rep["limits"]["max_usd"] == 5.0
    phases = {ln["phase"] for ln in rep["lines"]}
    assert {"before train", "before val", "before test", "optimize", "after test"} <= phases
    assert "up to" in est.render()


def test_calibrate_dry_run_calls_no_model_and_writes_nothing(tmp_path):
    engine = ScriptedEngine(bench.stubborn_answer)
    lm = AccountedLM("local/dry-judge", role="judge", spec="dry-judge", engine=engine, num_retries=0)
    est = vf.calibrate(bench.EXAMPLES / "outcomes.jsonl", models={"judge": lm}, max_iters=2, dry_run=True,
                       workdir=tmp_path / "wd", tracking=vf.MLflow(offline=True))
    assert engine.calls == 0 and not (tmp_path / "wd").exists()
    lines = est.as_dict()["lines"]
    assert any("teacher" in ln["what"] for ln in lines) and any(ln["phase"] == "report" for ln in lines)


PRICES = '[budget.prices."local/cli-dry"]\ninput = 1000.0\noutput = 1000.0\n'


def _toml(tmp_path, optimizer: str = "none", budget: str = PRICES):
    path = tmp_path / "exp.toml"
    path.write_text(f'[experiment]\nname = "d"\nworkdir = "{tmp_path / "wd"}"\n[suite]\nname = "bash-builtin"\n'
                    f'limit = 8\n[program]\nname = "bash-generator"\n[verifier]\nname = "exact"\n'
                    f'[optimizer]\nname = "{optimizer}"\n[tracking]\nenabled = false\n{budget}')
    return path


@pytest.fixture
def scripted_cli(monkeypatch):
    """The CLI's models: one scripted task LM priced by the file's [budget.prices]; its engine counts calls."""
    engine = ScriptedEngine(lambda m: json_answer(command="echo hi"))
    monkeypatch.setattr("verifirst.lm.make_models", lambda *a, **k: Models(
        task=AccountedLM("local/cli-dry", spec="cli-dry", engine=engine, num_retries=0)))
    return engine


def test_cli_dry_run_prints_the_table_and_exits_0(tmp_path, scripted_cli):
    path = _toml(tmp_path)
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run"), "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "dry run: spend estimate" in r.output and "before train" in r.output and "total" in r.output
    assert scripted_cli.calls == 0 and not (tmp_path / "run").exists() and not (tmp_path / "wd").exists()
    r = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["by_role"]["task"]["calls"] == 8


def test_cli_calibrate_dry_run_prints_the_table(tmp_path, monkeypatch):
    engine = ScriptedEngine(bench.stubborn_answer)
    monkeypatch.setattr("verifirst.judge.calibrate.make_lm", lambda spec, role="task", **k: AccountedLM(
        f"local/{role}", role=role, spec=role, engine=engine, num_retries=0))
    r = CliRunner().invoke(app, ["calibrate", "--outcomes", str(bench.EXAMPLES / "outcomes.jsonl"), "--dry-run",
                                 "--max-iters", "2", "--workdir", str(tmp_path / "wd")])
    assert r.exit_code == 0, r.output
    assert "AutoRefine teacher" in r.output and "up to" in r.output
    assert engine.calls == 0 and not (tmp_path / "wd").exists()


def test_cli_run_over_max_usd_needs_yes_in_ci_mode(tmp_path, scripted_cli, monkeypatch):
    path = _toml(tmp_path)
    est = vf.run(path, dry_run=True)
    high = est.total["usd_high"]
    cap = f"{high / 2:.6f}"  # below the estimate's high end, far above what the scripted run spends
    monkeypatch.setenv("CI", "true")
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run"), "--max-usd", cap])
    assert r.exit_code == 2, r.output
    assert "--yes" in r.output and "exceeds max_usd" in r.output and "Traceback" not in r.output
    assert scripted_cli.calls == 0 and not (tmp_path / "run").exists()
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run"), "--max-usd", cap, "--yes"])
    assert r.exit_code == 0, r.output
    assert scripted_cli.calls == 8 and (tmp_path / "run" / "report.json").exists()


def test_cli_run_within_max_usd_asks_nothing(tmp_path, scripted_cli, monkeypatch):
    path = _toml(tmp_path)
    high = vf.run(path, dry_run=True).total["usd_high"]
    monkeypatch.setenv("CI", "true")
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run"), "--max-usd", f"{high * 2:.6f}"])
    assert r.exit_code == 0, r.output
    assert "--yes" not in r.output and scripted_cli.calls == 8


def test_dry_run_with_a_bad_config_is_refused_naming_file_line_and_field(tmp_path):
    path = _toml(tmp_path, budget="[budget]\nmax_usd = 0\n")
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run"), "--dry-run"])
    assert r.exit_code == 2, r.output
    assert f"{path}:16 [budget.max_usd]" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "run").exists() and not (tmp_path / "wd").exists()


def test_dry_run_on_a_run_directory_to_resume_says_it_makes_fewer_calls(tmp_path):
    lm = AccountedLM("local/dry-task", spec="dry-task", engine=ScriptedEngine(lambda m: json_answer(answer="42")),
                     num_retries=0)
    data = [{"id": f"q{k}", "question": f"question {k}?", "answer": "42"} for k in range(8)]
    kw = dict(models={"task": lm}, run_dir=tmp_path / "run", workdir=tmp_path / "wd")
    vf.optimize(dspy.Predict(QA), data, _metric, None, **kw)
    state = (tmp_path / "run" / "run_state.json").read_text()
    est = vf.optimize(dspy.Predict(QA), data, _metric, None, dry_run=True, **kw)
    assert any("resumes" in n for n in est.notes)
    assert (tmp_path / "run" / "run_state.json").read_text() == state  # the dry run left it as it was


def test_cli_calibrate_over_max_usd_needs_yes_in_ci_mode(tmp_path, monkeypatch):
    engine = ScriptedEngine(bench.stubborn_answer)
    monkeypatch.setattr("verifirst.judge.calibrate.make_lm", lambda spec, role="task", **k: AccountedLM(
        "openai/gpt-4o-mini", role=role, spec="gpt-4o-mini", engine=engine, num_retries=0))  # LiteLLM's price
    monkeypatch.setenv("CI", "1")
    args = ["calibrate", "--outcomes", str(bench.EXAMPLES / "outcomes.jsonl"), "--max-iters", "1",
            "--workdir", str(tmp_path / "wd"), "--run-dir", str(tmp_path / "run"), "--offline", "--max-usd", "0.0001"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.output
    assert "--yes" in r.output and "exceeds max_usd" in r.output and engine.calls == 0
    assert not (tmp_path / "run").exists() and not (tmp_path / "wd").exists()  # refused: nothing written


def test_cli_optimize_runs_the_file_not_a_dry_run(tmp_path, scripted_cli):
    r = CliRunner().invoke(app, ["optimize", str(_toml(tmp_path)), "--run-dir", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    assert scripted_cli.calls == 8 and (tmp_path / "run" / "report.json").exists()
