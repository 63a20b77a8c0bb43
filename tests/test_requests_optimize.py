"""The optimize/run journey's typed request (verifirst.requests.OptimizeRequest): every vf.optimize
keyword, `verifirst run` option and experiment-file key maps to one field; each field's check runs
before anything is written (a bad value in a temp dir: refused naming the field, the dir stays empty);
what reaches DSPy and MLflow is checked against what they accept."""
from __future__ import annotations

import inspect
import os
from pathlib import Path

import dspy
import pytest
import typer.main
from typer.testing import CliRunner

import verifirst as vf
from verifirst import config
from verifirst.cli import app
from verifirst.core.errors import InputError
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.requests import EXPERIMENT_FIELDS, RUN_FLAGS, OptimizeRequest


def records(n=8):
    return [{"id": f"q{k}", "question": f"what is #{k}?", "answer": "42"} for k in range(n)]


def metric(example, pred, trace=None):
    return (pred.answer or "").strip() == example.answer


def lm():
    return scripted_lm(lambda m: json_answer(answer="41"))


def files(root: Path) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, ds, fs in os.walk(root) for n in ds + fs)


# -- one field per keyword, flag and key --------------------------------------------------------------


def test_every_optimize_keyword_is_one_field_and_every_field_a_keyword():
    assert list(inspect.signature(vf.optimize).parameters) == list(OptimizeRequest.model_fields)


def test_every_experiment_file_key_maps_to_one_field():
    keys = {f"{sec}.{k}" for sec, body in config.SCHEMA.items() for k in body}
    assert set(EXPERIMENT_FIELDS) == keys
    assert set(EXPERIMENT_FIELDS.values()) <= set(OptimizeRequest.model_fields)


def test_load_config_builds_only_request_fields(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kw = vf.load_config(Path(__file__).parent.parent / "examples" / "bash_gepa.toml",
                        models={"task": lm(), "reflection": lm()}, offline=True)
    assert set(kw) <= set(OptimizeRequest.model_fields)
    OptimizeRequest.build(kw, drop_none=False)  # what a file gives is a valid request


@pytest.mark.parametrize("command", ["run", "optimize"])
def test_every_run_option_maps_to_one_field(command):
    cmd = typer.main.get_command(app).commands[command]
    given = {p.opts[0] if p.opts and p.opts[0].startswith("-") else p.name for p in cmd.params}
    assert given == set(RUN_FLAGS)
    assert set(RUN_FLAGS.values()) <= set(OptimizeRequest.model_fields)


# -- each field checked before anything is written ----------------------------------------------------

class _NotAnything:
    pass


# field -> a value its check refuses (the message names the field as shown)
BAD = {
    "program": 42, "data": 42, "metric": 42, "optimizer": "gepx", "splits": (0.5, 0.5), "models": {"tusk": "x"},
    "budget": {"max_usd": -1.0}, "run_dir": "/", "tracking": _NotAnything(), "inputs": [""], "output_field": "",
    "threshold": 2.0, "optimizer_options": {"bogus": 1}, "seed": -1, "threads": 0, "workdir": "/",
    "name": "x" * 300, "max_error_rate": float("nan"), "progress": "yes", "eval_splits": ("tset",),
    "stratify": 42, "adapter": _NotAnything(), "executor": _NotAnything(), "compile_kwargs": {"x": 1},
    "no_val": "yes", "no_test": "yes", "callbacks": 42, "echo": 42, "cache": "", "config": 42,
    "dry_run": "yes", "confirm": 42, "objective": "cheapest", "margin": float("inf"),
}
SHOWN = {"optimizer": "optimizer", "optimizer_options": "optimizer_options.bogus", "budget": "budget.max_usd",
         "compile_kwargs": "compile_kwargs", "objective": "objective"}


def test_every_field_has_a_bad_value_case():
    assert set(BAD) == set(OptimizeRequest.model_fields)


@pytest.mark.parametrize("field", sorted(BAD))
def test_each_field_is_checked_before_anything_is_written(field, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kw = dict(program=dspy.Predict("question -> answer"), data=records(), metric=metric,
              optimizer="gepa" if field == "optimizer_options" else "none",
              models={"task": lm(), "reflection": lm()}, workdir=tmp_path / "w")
    kw[field] = BAD[field]
    with pytest.raises(InputError) as e:
        vf.optimize(**kw)
    assert f"[{SHOWN.get(field, field)}" in str(e.value), str(e.value)
    assert files(tmp_path) == [], f"{field}: files written for a refused request"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "nan", 1e400])
def test_nan_and_inf_refused_alike_for_every_float_keyword(tmp_path, value):
    for field in ("threshold", "max_error_rate", "margin"):
        with pytest.raises(InputError) as e:
            vf.optimize(dspy.Predict("question -> answer"), records(), metric, None, models={"task": lm()},
                        workdir=tmp_path / "w", **{field: value})
        assert f"[{field}]" in str(e.value)
    assert files(tmp_path) == []


# -- third-party arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize("options, shown, says", [
    ({"candidate_selection_strategy": "best"}, "optimizer_options.candidate_selection_strategy", "'pareto'"),
    ({"max_merge_invocations": "five"}, "optimizer_options.max_merge_invocations", "integer"),
    ({"max_full_evals": 3}, "optimizer_options.max_full_evals", "verifirst sets it"),
    ({"auto": "light"}, "optimizer_options.auto", "max_metric_calls or auto"),
    ({"skip_perfect": True}, "optimizer_options.skip_perfect", "skip_perfect_score"),
])
def test_gepa_options_are_checked_against_dspy_gepa(tmp_path, options, shown, says):
    with pytest.raises(InputError) as e:
        vf.optimize(dspy.Predict("question -> answer"), records(), metric, "gepa",
                    models={"task": lm(), "reflection": lm()}, workdir=tmp_path / "w", optimizer_options=options)
    assert f"[{shown}]" in str(e.value) and says in str(e.value)
    assert files(tmp_path) == []


def test_simba_options_are_checked_against_dspy_simba(tmp_path):
    with pytest.raises(InputError) as e:
        vf.optimize(dspy.Predict("question -> answer"), records(), metric, "simba",
                    models={"task": lm(), "reflection": lm()}, workdir=tmp_path / "w",
                    optimizer_options={"temperature_for_sampling": "hot"})
    assert "[optimizer_options.temperature_for_sampling]" in str(e.value)


def test_mipro_compile_kwargs_types_are_checked(tmp_path):
    tp = dspy.MIPROv2(metric=metric, auto=None, num_candidates=2, prompt_model=lm(), task_model=lm())
    with pytest.raises(InputError) as e:
        vf.optimize(dspy.Predict("question -> answer"), records(), metric, tp, models={"task": lm()},
                    workdir=tmp_path / "w", compile_kwargs={"num_trials": "many"})
    assert "[compile_kwargs.num_trials]" in str(e.value)
    assert files(tmp_path) == []


@pytest.mark.parametrize("name", ["team/run", "run:1", "a\x00b"])
def test_a_run_name_mlflow_would_refuse_is_refused_before_the_run(tmp_path, name):
    with pytest.raises(InputError) as e:
        vf.optimize(dspy.Predict("question -> answer"), records(), metric, None, models={"task": lm()},
                    workdir=tmp_path / "w", name=name, tracking=vf.MLflow())
    assert "[name]" in str(e.value)
    assert files(tmp_path) == []


def test_a_data_set_name_with_a_slash_makes_a_name_mlflow_takes():
    from verifirst.requests import PROMPT_NAME, default_run_name, prompt_name

    assert PROMPT_NAME.match(prompt_name(default_run_name("org/data set:v1")))


def test_an_mlflow_experiment_name_too_long_is_refused(tmp_path):
    with pytest.raises(InputError) as e:
        vf.optimize(dspy.Predict("question -> answer"), records(), metric, None, models={"task": lm()},
                    workdir=tmp_path / "w", tracking=vf.MLflow(experiment="e" * 501))
    assert "[tracking.experiment]" in str(e.value)


def test_paths_expand_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    res = vf.optimize(dspy.Predict("question -> answer"), records(), metric, None, models={"task": lm()},
                      workdir="~/w", run_dir="~/r")
    assert res.run_dir == tmp_path / "r" and (tmp_path / "r" / "report.json").exists()
    assert not (tmp_path / "~").exists()


# -- experiment files ---------------------------------------------------------------------------------

EXP = """
[experiment]
name = "{name}"
workdir = "{workdir}"
[suite]
name = "outcomes"
path = "data.jsonl"
[program]
name = "passfail-judge"
options = {{ view = "title" }}
[verifier]
name = "label"
[models]
task = "local"
reflection = "local"
[optimizer]
name = "{optimizer}"
{options}
[tracking]
enabled = {tracking}
"""


def _exp(folder: Path, **kw) -> Path:
    vals = dict(name="e", workdir="w", optimizer="none", options="", tracking="false")
    vals.update(kw)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.jsonl").write_text("".join(f'{{"id": "r{k}", "label": "{"PASS" if k % 2 else "FAIL"}", '
                                               f'"title": "change {k}"}}\n' for k in range(8)))
    p = folder / "exp.toml"
    p.write_text(EXP.format(**vals))
    return p


def test_experiment_paths_resolve_against_the_files_folder(tmp_path, monkeypatch):
    p = _exp(tmp_path / "proj")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    exp = config.load(p)
    assert exp.suite["path"] == str(tmp_path / "proj" / "data.jsonl")
    assert exp.experiment["workdir"] == "w"  # outputs go where the command runs, where `ui` looks


def test_experiment_workdir_expands_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    exp = config.load(_exp(tmp_path / "proj", workdir="~/vf"))
    assert exp.experiment["workdir"] == str(tmp_path / "home" / "vf")


@pytest.mark.parametrize("kw, says", [
    (dict(optimizer="gepa", options='options = { candidate_selection_strategy = "best" }'),
     "[optimizer.options.candidate_selection_strategy]"),
    (dict(optimizer="gepa", options="options = { max_full_evals = 2 }"), "[optimizer.options.max_full_evals]"),
    (dict(name="team/exp", tracking="true"), "[experiment.name]"),
])
def test_experiment_file_third_party_values_refused_at_their_line(tmp_path, monkeypatch, kw, says):
    p = _exp(tmp_path / "proj", **kw)
    monkeypatch.chdir(tmp_path / "proj")
    before = files(tmp_path)
    res = CliRunner().invoke(app, ["run", str(p)])
    assert res.exit_code == 2, res.output
    assert says in res.output and f"{p}:" in res.output, res.output
    assert files(tmp_path) == before


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_an_infinite_spend_limit_is_refused_as_nan_is(value):
    with pytest.raises(InputError) as e:
        vf.Budget(max_usd=value)
    assert "[budget.max_usd]" in str(e.value) and "finite" in str(e.value)


# -- every experiment-file key: a bad value is refused at its key, before anything is written --------

FILE_BASE = {"experiment": {"name": '"e"', "workdir": '"wd"'},
             "suite": {"name": '"outcomes"', "path": '"data.jsonl"'},
             "program": {"name": '"passfail-judge"', "options": '{ view = "title" }'},
             "verifier": {"name": '"label"'}, "optimizer": {"name": '"none"'},
             "models": {"task": '"openai/gpt-4o-mini"'}, "tracking": {"enabled": "false"}}
BAD_KEYS = {
    "experiment.name": '"' + "x" * 300 + '"', "experiment.workdir": '"/etc/passwd"', "experiment.seed": "-1",
    "experiment.threads": "0", "experiment.max_error_rate": "nan", "experiment.executor": '"gpu"',
    "experiment.ray_address": "3", "experiment.description": "3",
    "suite.name": '"nope"', "suite.path": '"missing.jsonl"', "suite.limit": "0", "suite.options": "{ bogus = 1 }",
    "program.name": '"nope"', "program.options": '{ veiw = "x" }',
    "verifier.name": '"nope"', "verifier.options": "{ bogus = 1 }",
    "splits.ratios": "[0.5, 0.5]", "splits.stratify": "3", "splits.manifest": '"missing.json"',
    "splits.no_val": '"yes"', "splits.no_test": '"yes"', "splits.by": '"size"', "splits.time_field": "3",
    "splits.windows": "true",
    "optimizer.name": '"nope"', "optimizer.options": "{ bogus = 1 }", "optimizer.max_metric_calls": "0",
    "optimizer.auto": '"huge"', "optimizer.max_iters": "0",
    "models.task": '""', "models.reflection": "3", "models.teacher": "3", "models.judge": "3",
    "models.temperature": "5",
    "budget.max_usd": "inf", "budget.max_tokens": "0", "budget.max_lm_calls": "-1", "budget.max_wall_s": "nan",
    "budget.per_role": "{ tusk = { max_usd = 1 } }", "budget.prices": '{ x = 3 }',
    "objective.kind": '"cheap"', "objective.margin": "1.5", "objective.models": '"x"', "objective.reference": "3",
    "objective.candidates": "3",
    "tracking.uri": '"bogus://x"', "tracking.experiment": '""', "tracking.enabled": '"yes"',
    "tracking.register_prompt": '"yes"', "tracking.traces": '"yes"',
}


def test_every_experiment_key_has_a_bad_value_case():
    assert set(BAD_KEYS) == set(EXPERIMENT_FIELDS)


@pytest.mark.parametrize("key", sorted(BAD_KEYS))
def test_each_experiment_key_is_checked_before_anything_is_written(key, tmp_path, monkeypatch):
    import verifirst.loop.driver

    def reached(*a, **k):
        raise AssertionError(f"{key}: the run reached the driver")

    monkeypatch.setattr(verifirst.loop.driver, "run", reached)
    sec, k = key.split(".")
    secs = {s: dict(b) for s, b in FILE_BASE.items()}
    secs.setdefault(sec, {})[k] = BAD_KEYS[key]
    if sec == "tracking" and k != "enabled":
        secs["tracking"]["enabled"] = "true"
    (tmp_path / "data.jsonl").write_text("".join(
        f'{{"id": "r{i}", "label": "{"PASS" if i % 2 else "FAIL"}", "title": "t{i}"}}\n' for i in range(8)))
    (tmp_path / "e.toml").write_text("".join(f"[{s}]\n" + "".join(f"{a} = {v}\n" for a, v in b.items())
                                             for s, b in secs.items()))
    monkeypatch.chdir(tmp_path)
    before = files(tmp_path)
    res = CliRunner().invoke(app, ["run", "e.toml"])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"{key}: a traceback: {res.exception!r}") from res.exception
    assert res.exit_code == 2, res.output
    assert "e.toml" in res.output and key in res.output, res.output
    assert files(tmp_path) == before, f"{key}: files written for a refused file"
