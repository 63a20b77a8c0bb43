"""A tiny experiment against a real `mlflow server` on 127.0.0.1, checked through the REST
API only: parent and nested runs, per-split and per-iteration metrics, traces with the
verifier's verdicts as assessments, and artifacts (report, plots, per-item rows, program)."""
import json
import urllib.request
from collections import Counter

import pytest

from _mlflow_server import shared_tracked_run

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tracked(request, tmp_path_factory):
    return shared_tracked_run(request, tmp_path_factory)


def _runs(t):
    return t.post("/api/2.0/mlflow/runs/search", {"experiment_ids": [t.experiment_id], "max_results": 100})["runs"]


def _tags(run):
    return {x["key"]: x["value"] for x in run["data"].get("tags", [])}


def _metrics(run):
    return {x["key"]: x["value"] for x in run["data"].get("metrics", [])}


def test_parent_and_nested_runs_with_params_and_metrics(tracked):
    rep = tracked.out.report
    runs = _runs(tracked)
    parent = [r for r in runs if r["info"]["run_id"] == tracked.run_id]
    assert len(parent) == 1 and parent[0]["info"]["status"] == "FINISHED"
    params = {p["key"]: p["value"] for p in parent[0]["data"]["params"]}
    assert params["split_digest"] == rep["split_digest"]
    assert params["config.optimizer.name"] == "gepa" and params["models.task"] == "task-scripted"
    pm = _metrics(parent[0])
    for split in ("train", "val", "test"):
        for phase in ("before", "after"):
            assert pm[f"{phase}_{split}_pass_rate"] == pytest.approx(rep["splits"][split][phase]["pass_rate"])
    children = [r for r in runs if _tags(r).get("mlflow.parentRunId") == tracked.run_id]
    names = Counter(r["info"]["run_name"] for r in children)
    expected = {f"eval/{p}/{s}" for p in ("before", "after") for s in ("train", "val", "test")} | {"optimize/gepa"}
    assert set(names) == expected and all(v == 1 for v in names.values())
    assert all(r["info"]["status"] == "FINISHED" for r in children)
    assert len(runs) == 1 + len(children)  # no orphan runs from optimizer threads
    ev = next(r for r in children if r["info"]["run_name"] == "eval/after/test")
    assert _metrics(ev)["pass_rate"] == pytest.approx(rep["splits"]["test"]["after"]["pass_rate"])


def test_per_iteration_metrics_of_the_optimizer(tracked):
    opt = next(r for r in _runs(tracked) if r["info"]["run_name"] == "optimize/gepa")
    hist = tracked.get(f"/api/2.0/mlflow/metrics/get-history?run_id={opt['info']['run_id']}&metric_key=val_score")
    points = hist["metrics"]
    want = [h["val_score"] for h in tracked.out.report["history"] if "val_score" in h]
    assert len(points) == len(want) >= 2
    assert sorted(p["value"] for p in points) == sorted(want)
    assert len({p["step"] for p in points}) == len(points)  # steps are metric calls, one per point


def test_traces_carry_verifier_verdicts_as_assessments(tracked):
    rep = tracked.out.report
    traces = [t for t in tracked.search_traces() if "verifirst.split" in t.get("tags", {})]
    n_evals = sum(rep["splits"][s][p]["n"] for s in rep["splits"] for p in ("before", "after"))
    assert len(traces) == n_evals
    passed = Counter()
    for t in traces:
        a = {x["assessment_name"]: x for x in t.get("assessments", [])}
        assert {"verifier_score", "verifier_pass"} <= set(a), t["trace_id"]
        score = a["verifier_score"]
        assert score["source"] == {"source_type": "CODE", "source_id": "verifirst.verifier"}
        assert score["metadata"]["item_id"] == t["tags"]["verifirst.item_id"]
        ok = a["verifier_pass"]["feedback"]["value"]
        assert (score["feedback"]["value"] == 1.0) == ok
        want = "matches the reference exactly" if ok else "Expected exactly"
        assert score["rationale"].startswith(want)  # the verifier's feedback travels with the trace
        passed[t["tags"]["verifirst.split"]] += ok
    for s, body in rep["splits"].items():
        assert passed[s] == body["before"]["pass"] + body["after"]["pass"]


def test_artifacts_report_plots_per_item_and_program(tracked):
    rid = tracked.run_id

    def ls(path="", run=rid):
        return {f["path"] for f in tracked.get(f"/api/2.0/mlflow/artifacts/list?run_id={run}&path={path}")
                .get("files", [])}

    assert {"report", "program", "split_manifest.json", "usage.json", "config.json"} <= ls()
    assert {"report/report.json", "report/report.md", "report/report.html", "report/plots"} <= ls("report")
    pngs = ls("report/plots")
    assert {f"report/plots/{n}.png" for n in ("pass_rate", "stage_funnel", "optimization_curve", "lm_usage")} <= pngs
    with urllib.request.urlopen(f"{tracked.url}/get-artifact?path=report/report.html&run_uuid={rid}") as r:
        html = r.read().decode()
    assert html.count("data:image/png;base64,") >= 4
    with urllib.request.urlopen(f"{tracked.url}/get-artifact?path=report/report.json&run_uuid={rid}") as r:
        assert json.load(r)["split_digest"] == tracked.out.report["split_digest"]
    ev = next(r for r in _runs(tracked) if r["info"]["run_name"] == "eval/before/test")
    assert "per_item/before_test.jsonl" in ls("per_item", ev["info"]["run_id"])
