"""What a cost objective shows: the Pareto plot and table in report.html and `verifirst run`'s table
(points, marks, intervals), per-candidate metrics in MLflow, and the dry run's estimate per model
against the calls the scripted engines counted. Refusals of bad input from the command line too."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

import io

import pytest

import verifirst as vf
from test_bad_input import cli, files, here  # noqa: F401  (the fixture)
from test_objective import PRICES, BashGenerator, _Metric, data, world
from verifirst.report import print_report
from verifirst.report.pareto import front_table, points


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("objective")
    cheap, dear, refl = world()
    goal = {"kind": "cheapest-not-worse", "margin": 0.05, "models": [cheap, dear],
            "reference": {"model": dear, "prompt": None}}
    kw = dict(models={"task": cheap, "reflection": refl}, budget=vf.Budget(max_metric_calls=30, prices=PRICES),
              objective=goal)
    est = vf.optimize(BashGenerator(), data(), _Metric(), "gepa", run_dir=tmp / "dry", workdir=tmp / "wd",
                      dry_run=True, **kw)
    assert not (tmp / "wd").exists()  # a dry run writes nothing
    before = {"cheap": cheap.engine.calls, "dear": dear.engine.calls}
    res = vf.optimize(BashGenerator(), data(), _Metric(), "gepa", run_dir=tmp / "run", workdir=tmp / "wd",
                      tracking=vf.MLflow(offline=True), **kw)
    calls = {"cheap": cheap.engine.calls - before["cheap"], "dear": dear.engine.calls - before["dear"],
             "reflection": refl.engine.calls}
    return res, est, calls, tmp


def test_pareto_points_marks_and_intervals(tracked):
    res = tracked[0]
    pts = {p["label"]: p for p in points(res.report)}
    assert set(pts) == {"local/cheap · as given", "local/cheap · optimized", "local/dear · as given"}
    assert pts["local/cheap · optimized"]["chosen"] and pts["local/cheap · optimized"]["front"]
    assert pts["local/dear · as given"]["reference"] and not pts["local/dear · as given"]["front"]
    assert not pts["local/cheap · as given"]["front"]  # dearer per item than the optimized prompt, and worse
    for p in pts.values():
        lo, hi = p["ci95"]
        assert lo <= p["quality"] <= hi and hi - lo > 0  # a Wilson interval around each point
    plots = res.run_dir / "plots" / "pareto.png"
    assert plots.exists() and plots.stat().st_size > 5000
    html = (res.run_dir / "report.html").read_text()
    assert "data-plot='pareto'" in html and "data-objective='front'" in html
    assert html.count("<tr class='chosen'>") == 1 and "local/cheap · optimized" in html
    assert res.report["objective"]["verdict"] in html


def test_front_table_as_printed_by_verifirst_run(tracked):
    res = tracked[0]
    text = front_table(res.report)
    lines = text.splitlines()
    assert lines[0].startswith("objective cheapest-not-worse (margin 0.05): local/cheap · optimized is non-inferior")
    rows = [ln for ln in lines if ln.startswith("local/")]
    assert rows[0].startswith("local/cheap · optimized") and rows[0].rstrip().endswith("chosen")
    assert rows[-1].rstrip().endswith("reference")
    assert any(ln.startswith("test split (chosen − reference, 6 items): Δ pass rate +0.000 [0.00, 0.00], McNemar p = 1")
               for ln in lines)
    from rich.console import Console

    buf = io.StringIO()
    print_report(res.report, console=Console(file=buf, width=200))
    shown = buf.getvalue()
    assert "non-inf" in shown and "local/cheap · optimized" in shown and "McNemar p = 1" in shown


def test_mlflow_has_a_run_per_candidate_with_its_metrics(tracked):
    import mlflow

    res, _, _, tmp = tracked
    rid = res.report["objective"]["mlflow_run_id"]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp / 'wd' / 'mlflow.db'}")
    parent = client.get_run(rid)
    assert parent.data.params["chosen"] == "local/cheap · optimized"
    assert parent.data.metrics["test_delta_usd_per_item"] < 0
    kids = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{rid}'")
    by_name = {r.info.run_name: r for r in kids}
    assert set(by_name) == {"local/cheap · as given", "local/cheap · optimized", "local/dear · as given"}
    for r in kids:
        m = r.data.metrics
        assert {"val_pass_rate", "val_usd_per_item", "val_tokens_per_item", "val_latency_p50_s",
                "train_usd_per_item"} <= set(m)
    assert by_name["local/cheap · optimized"].data.tags["verifirst.chosen"] == "true"
    assert by_name["local/cheap · optimized"].data.metrics["test_usd_per_item"] < \
        by_name["local/dear · as given"].data.metrics["test_usd_per_item"]
    arts = [a.path for a in client.list_artifacts(rid, "objective")]
    assert "objective/pareto.png" in arts and "objective/objective.json" in arts


def test_dry_run_estimates_each_model_within_ten_percent(tracked):
    res, est, calls, _ = tracked
    assert set(est.per_model) == {"local/cheap", "local/dear"}
    test_calls = len(res.manifest.test)  # each model scored test once after the choice (chosen / reference)
    for name, model in (("cheap", "local/cheap"), ("dear", "local/dear")):
        task = est.per_model[model].by_role()["task"]["calls"]
        made = calls[name] - test_calls
        assert abs(task - made) <= 0.1 * made, (model, task, made)
    assert "all models:" in est.render() and est.total["usd_high"] > 0


# -- bad input from the command line: exit 2, nothing written --------------------------------------
EXP = """[experiment]
name = "t"
workdir = "wd"

[suite]
name = "bash-builtin"

[program]
name = "bash-generator"

[verifier]
name = "exact"

[models]
task = "local"

[objective]
{objective}
"""


@pytest.mark.parametrize("objective, flags, expect", [
    ('kind = "cheapest"\nmargin = 0.02', [], ["e.toml:18", "[objective.kind]", "unknown objective 'cheapest'"]),
    ('kind = "cheapest-not-worse"\nmargin = 0', [], ["e.toml:19", "[objective.margin]", "outside (0, 1)"]),
    ('kind = "fastest-not-worse"\nmargin = 1.5', [], ["e.toml:19", "[objective.margin]", "outside (0, 1)"]),
    ('kind = "cheapest-not-worse"\nmargin = 0.02\nmodels = ["local", "openai/no-such-model-x"]', [],
     ["e.toml:20", "[objective.models]", "no price known for model 'openai/no-such-model-x'"]),
    ('kind = "quality"', ["--objective", "cheapest"], ["[--objective]", "unknown objective 'cheapest'"]),
    ('kind = "quality"', ["--objective", "cheapest-not-worse", "--margin", "0"], ["[--margin]", "outside (0, 1)"]),
    ('kind = "quality"', ["--objective", "cheapest-not-worse"], ["objective cheapest-not-worse needs a margin"]),
    ('kind = "quality"', ["--objective", "quality", "--margin", "0.02"], ["[--margin]", "for objective quality"]),
    ('kind = "cheapest-not-worse"\nmargin = 0.02\nmodels = ["local", "openai/no-such-model-x"]', ["--margin", "0.1"],
     ["e.toml:20", "no price known for model 'openai/no-such-model-x'"]),
])
def test_bad_objectives_from_the_command_line(here, objective, flags, expect):  # noqa: F811
    (here / "e.toml").write_text(EXP.format(objective=objective))
    before = files(here)
    code, out = cli(["run", "e.toml", *flags])
    assert code == 2 and out.startswith("error: "), out
    for text in expect:
        assert text in out, out
    assert files(here) == before and not (here / "wd").exists()


def test_dry_run_from_the_command_line_estimates_each_model(here):  # noqa: F811
    import json

    (here / "e.toml").write_text(EXP.format(objective='kind = "cheapest-not-worse"\nmargin = 0.02\n'
                                                     'models = ["local", "openai/gpt-4o-mini"]')
                                 .replace('name = "bash-builtin"', 'name = "bash-builtin"\nlimit = 12'))
    code, out = cli(["run", "e.toml", "--dry-run", "--json"])
    assert code == 0, out
    est = json.loads(out)
    assert list(est["per_model"]) == ["local", "openai/gpt-4o-mini"]
    calls = [m["total"]["calls"] for m in est["per_model"].values()]
    assert est["total"]["calls"] == sum(calls) and all(c > 0 for c in calls)
    assert est["per_model"]["local"]["total"]["usd_high"] == 0 < est["per_model"]["openai/gpt-4o-mini"]["total"]["usd_high"]
    assert files(here) == {"e.toml"}  # nothing written
