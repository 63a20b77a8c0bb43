"""An experiment file end to end against a real MLflow sqlite store, with scripted LMs."""
import json

import mlflow
import pytest

from conftest import experiment_toml
from verifirst import api
from verifirst import config, experiment
from verifirst.core.errors import ConfigError
from verifirst.lm import Models
from verifirst.lm.testing import json_answer, scripted_lm

RULE = "Always answer with printf."


def task_fn(messages):
    return json_answer(command="printf hi" if "printf" in messages[0]["content"] else "echo hi")


def cfg(tmp_path, **over):
    d = {
        "experiment": {"name": "t-exp", "workdir": str(tmp_path / "wd"), "seed": 0},
        "suite": {"name": "bash-builtin", "limit": 12},
        "program": {"name": "bash-generator"},
        "verifier": {"name": "exact"},
        "splits": {"ratios": [0.5, 0.25, 0.25]},
        "optimizer": {"name": "gepa", "max_metric_calls": 20},
        "models": {"task": "local"},
    }
    for k, v in over.items():
        d.setdefault(k, {}).update(v)
    return config.from_dict(d)


def models():
    return Models(task=scripted_lm(task_fn, cache=True, name="t1"),
                  reflection=scripted_lm(lambda m: json_answer(new_instruction=RULE), role="reflection",
                                         cache=True, name="r1"))


def test_run_logs_parent_nested_runs_metrics_artifacts_and_prompt(tmp_path):
    exp = cfg(tmp_path)
    out = api.run(exp, run_dir=tmp_path / "run1", progress=False, models=models(), echo=lambda m: None)
    rep = out.report
    assert set(rep["splits"]) == {"train", "val", "test"}
    assert (tmp_path / "run1" / "report.md").read_text().count("McNemar") >= 1
    client = mlflow.MlflowClient(tracking_uri=out.tracking_uri)
    parent = client.get_run(out.run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.params["split_digest"] == rep["split_digest"]
    assert "before_test_pass_rate" in parent.data.metrics
    assert parent.data.metrics["items_inconclusive_after"] == 0 and parent.data.metrics["tracking_failures"] == 0
    assert rep["tracking_failures"] == {"count": 0, "first": None}
    children = client.search_runs([parent.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{out.run_id}'")
    names = {c.info.run_name for c in children}
    assert {"eval/before/test", "eval/after/test", "optimize/gepa"} <= names
    assert all(c.info.status == "FINISHED" for c in children)
    opt = next(c for c in children if c.info.run_name == "optimize/gepa")
    assert client.get_metric_history(opt.info.run_id, "val_score")
    # no orphan top-level runs besides the parent
    tops = [r for r in client.search_runs([parent.info.experiment_id])
            if "mlflow.parentRunId" not in r.data.tags]
    assert [r.info.run_id for r in tops] == [out.run_id]
    arts = {a.path for a in client.list_artifacts(out.run_id)}
    assert {"report", "program", "split_manifest.json", "usage.json", "config.json"} <= arts
    # GEPA kept the seed instructions (no proposal beat them): nothing new, so nothing registered
    assert not rep["instructions_changed"] and "prompt_uri" not in rep
    assert not client.search_prompts(filter_string="name = 't-exp-instructions'")
    mlflow.set_tracking_uri(out.tracking_uri)
    traces = mlflow.search_traces(locations=[parent.info.experiment_id], return_type="list")
    assert traces, "program calls must be traced"
    scored = [t for t in traces if any(a.name == "verifier_score" for a in t.info.assessments)]
    assert scored and {t.info.tags.get("verifirst.split") for t in scored} >= {"test"}


def test_second_identical_run_costs_zero_lm_calls(tmp_path):
    exp = cfg(tmp_path, tracking={"traces": False})
    first = api.run(exp, run_dir=tmp_path / "a", progress=False, models=models(), echo=lambda m: None)
    assert first.report["usage_this_run"]["lm_calls"] > 0
    second = api.run(exp, run_dir=tmp_path / "b", progress=False, models=models(), echo=lambda m: None)
    u = second.report["usage_this_run"]
    assert u["lm_calls"] == 0 and u["cache_hits"] > 0
    strip = lambda r: {s: (b["before"]["pass"], b["after"]["pass"]) for s, b in r["splits"].items()}
    assert strip(first.report) == strip(second.report)


def test_config_errors_name_file_line_and_key(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('[experiment]\nname = "x"\n\n[suite]\nname = "bash-builtin"\nlimt = 3\n')
    with pytest.raises(ConfigError) as e:
        config.load(p)
    msg = str(e.value)
    assert "bad.toml:6" in msg and "suite.limt" in msg and "limit" in msg
    p.write_text('[experiment]\nthreads = "two"\n')
    with pytest.raises(ConfigError, match=r"bad.toml:2.*experiment.threads.*int"):
        config.load(p)
    p.write_text('[suite]\nname = "bash-builtin"\n[program]\nname = "bash-generator"\n[verifier]\nname="exact"\n'
                 '[models]\ntask = "nosuchprovider/model-x"\n')
    with pytest.raises(ConfigError, match=r"models.task"):
        config.load(p)
    p.write_text("[suite\nname=1")
    with pytest.raises(ConfigError, match="TOML"):
        config.load(p)


def test_unreachable_tracking_server_fails_before_work(tmp_path):
    from verifirst.core.errors import VerifirstError

    exp = cfg(tmp_path, tracking={"uri": "http://127.0.0.1:9", "traces": False})
    with pytest.raises(VerifirstError, match="unreachable"):
        api.run(exp, run_dir=tmp_path / "r", progress=False, models=models(), echo=lambda m: None)
    assert not (tmp_path / "r" / "report.json").exists()
    out = api.run(exp, run_dir=tmp_path / "r2", progress=False, models=models(), echo=lambda m: None, offline=True)
    assert out.tracking_uri.startswith("sqlite:")


def test_prompt_registry_reuses_an_identical_latest_version(tmp_path):
    from verifirst.tracking import Tracker

    tr = Tracker(tmp_path / "wd", autolog=False)
    a = tr.register_prompt("p-instr", "Say hi.", tags={"split_digest": "d1", "run_id": "r1"})
    assert tr.register_prompt("p-instr", "Say hi.", tags={"split_digest": "d1", "run_id": "r2"}) == a
    b = tr.register_prompt("p-instr", "Say hello.", tags={"split_digest": "d1", "run_id": "r3"})
    c = tr.register_prompt("p-instr", "Say hello.", tags={"split_digest": "d2", "run_id": "r4"})
    assert len({a, b, c}) == 3 and c.endswith("/3")


def test_default_run_dirs_never_reuse_one_started_in_the_same_second(tmp_path, monkeypatch):
    import time as _time

    from verifirst.loop.rundir import new_run_dir

    monkeypatch.setattr(_time, "strftime", lambda fmt: "20260101-000000")
    first = new_run_dir(tmp_path, "exp")
    assert first == tmp_path / "runs" / "exp-20260101-000000" and not first.exists()
    first.mkdir(parents=True)
    second = new_run_dir(tmp_path, "exp")
    assert second.name == "exp-20260101-000000-2"
    second.mkdir()
    assert new_run_dir(tmp_path, "exp").name == "exp-20260101-000000-3"


def test_vf_run_is_optimize_of_load_config_and_matches_the_cli_path(tmp_path):
    import verifirst as vf

    path = tmp_path / "exp.toml"
    path.write_text(experiment_toml(tmp_path / "wd", name="t-api", limit=12,
                                    optimizer={"name": "gepa", "max_metric_calls": 20},
                                    tracking={"enabled": False}))
    kw = vf.load_config(path, models=models())
    assert kw["optimizer"] == "gepa" and kw["tracking"] is None and kw["output_field"] == "command"
    res = vf.run(path, models=models(), run_dir=tmp_path / "api")
    out = api.run(config.load(path), run_dir=tmp_path / "cli", progress=False, models=models(), echo=lambda m: None)
    assert res.report["split_digest"] == out.report["split_digest"]
    for s in ("train", "val", "test"):
        for phase in ("before", "after"):
            a, b = res.report["splits"][s][phase], out.report["splits"][s][phase]
            assert (a["n"], a["pass"], a["errors"]) == (b["n"], b["pass"], b["errors"]), (s, phase)
    assert (tmp_path / "api" / "report.md").exists()


def test_vf_mlflow_is_a_callback_of_the_driver(tmp_path, monkeypatch):
    import os

    import dspy

    import verifirst as vf

    uri = f"sqlite:///{tmp_path / 'ml.db'}"
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    items = [{"id": f"i{k}", "task": f"say hi #{k}", "command": "printf hi"} for k in range(8)]

    def exact(example, pred, trace=None):
        return pred.command == example.command

    from verifirst.programs.bash import BashGenerator

    res = vf.optimize(BashGenerator(), items, exact, "gepa", splits=(0.5, 0.25, 0.25),
                      models={"task": scripted_lm(task_fn), "reflection": scripted_lm(
                          lambda m: json_answer(new_instruction=RULE), role="reflection")},
                      budget=vf.Budget(max_metric_calls=12), run_dir=tmp_path / "run", workdir=tmp_path,
                      tracking=vf.MLflow(uri=uri, experiment="api", traces=False), name="api-run")
    client = mlflow.MlflowClient(tracking_uri=uri)
    parent = client.get_run(res.report["run_id"])
    assert parent.info.status == "FINISHED" and "before_test_pass_rate" in parent.data.metrics
    children = client.search_runs([parent.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    names = {c.info.run_name for c in children}
    assert {"eval/before/test", "eval/after/test", "optimize/gepa"} <= names
    opt = next(c for c in children if c.info.run_name == "optimize/gepa")
    assert client.get_metric_history(opt.info.run_id, "val_score")  # each optimizer iteration
    assert dspy.settings.lm is None or dspy.settings.lm.model != "local/scripted"  # caller's settings untouched
    # nor the caller's environment: MLflow's set_experiment wrote the run's experiment id into it
    assert "MLFLOW_EXPERIMENT_ID" not in os.environ
