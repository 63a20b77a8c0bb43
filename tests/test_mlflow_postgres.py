"""A team's MLflow: a real PostgreSQL (Debian package, 127.0.0.1, throwaway data directory) under
`mlflow server`, started by verifirst.ops.team_server with the commands docs/integrations.md shows. An experiment, a
second experiment in another process at the same time, and a calibration run against it; all of
it is read back through the MLflow client (runs, nested runs, metrics, traces with assessments,
registered prompt versions) and found in PostgreSQL's own tables."""
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import mlflow
import pytest

from verifirst.ops import team_server
pytestmark = pytest.mark.integration

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
OTHER = "team-b"  # the experiment run by a second process, concurrently
LIMIT, METRIC_CALLS = 16, 20  # small: the point is the store; enough for GEPA to change the seed (a kept seed registers nothing)


def run_small(root: Path, url: str, name: str):
    """The shared tiny scripted experiment, smaller, tracked at `url` (waits for the server first).
    Returns (run output, (start, end) of the run)."""
    from _mlflow_server import make_models, tiny_config
    from verifirst import api, experiment
    from verifirst.ops.team_server import wait_healthy

    exp = tiny_config(root / "wd", url, limit=LIMIT, name=name)
    exp.optimizer["max_metric_calls"] = METRIC_CALLS
    wait_healthy(url)
    t0 = time.time()
    out = api.run(exp, run_dir=root / "run", progress=False, models=make_models(), echo=lambda m: None,
                         tracking_uri=url)
    return out, (t0, time.time())


_CONCURRENT = f"""
import json, sys, time
sys.path.insert(0, {str(TESTS)!r})
from pathlib import Path
from test_mlflow_postgres import run_small
out, span = run_small(Path(sys.argv[1]), sys.argv[2], {OTHER!r})
print(json.dumps({{"run_id": out.run_id, "span": span}}))
"""


class Team:
    """What the module's tests read back: the server, and what each run reported."""

    def __init__(self, pg, server, a, a_span, b, b_span, cal):
        self.pg, self.server, self.a, self.a_span, self.b, self.b_span, self.cal = pg, server, a, a_span, b, b_span, cal
        self.client = mlflow.MlflowClient(tracking_uri=server.url, registry_uri=server.url)

    def runs(self, experiment: str):
        exp = self.client.get_experiment_by_name(experiment)
        return exp, list(self.client.search_runs([exp.experiment_id], max_results=200))


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    for name in ("initdb", "pg_ctl", "createdb"):
        try:
            team_server.pg_bin(name)
        except FileNotFoundError as e:
            pytest.skip(str(e))
    from test_calibrate import write_outcomes
    from test_autorefine import RuleFollowingLM
    from verifirst.judge.calibrate import calibrate_outcomes

    root = tmp_path_factory.mktemp("team")
    pg = team_server.start_postgres()  # throwaway data directory, owned by `nobody` when we are root
    server = proc = None
    previous_uri = mlflow.get_tracking_uri()
    try:
        server = team_server.start_mlflow(pg.url("mlflow"), root / "artifacts", log=root / "server.log",
                                          wait=False)
        # the other process imports while the server migrates its schema; both runs wait for /health
        with open(root / "b.out", "w") as out_fh, open(root / "b.err", "w") as err_fh:  # files: no pipe to fill
            proc = subprocess.Popen([sys.executable, "-c", _CONCURRENT, str(root / "b"), server.url],
                                    stdout=out_fh, stderr=err_fh, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
        server.wait_healthy()
        a, a_span = run_small(root / "a", server.url, "team-a")
        proc.wait(timeout=300)
        assert proc.returncode == 0, (root / "b.err").read_text()[-3000:]
        b_out = json.loads((root / "b.out").read_text().strip().splitlines()[-1])
        b = json.loads((root / "b" / "run" / "report.json").read_text())
        lm = RuleFollowingLM()
        src = root / "outcomes.jsonl"
        write_outcomes(src, n_groups=10)  # enough validation items for the first champion's evidence
        cal = calibrate_outcomes(src, workdir=root / "cal", models={"judge": lm, "teacher": lm, "reflection": lm},
                                 max_iters=2, tracking_uri=server.url, experiment="team-calibrate",
                                 echo=lambda m: None)
        yield Team(pg, server, a, a_span, b, tuple(b_out["span"]), cal)
    finally:
        mlflow.set_tracking_uri(previous_uri)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if server is not None:
            server.stop()
        pg.stop()
    assert server.proc.poll() is not None and not pg.pgdata.exists()  # nothing left running or on disk


def _children(runs, parent_id):
    return [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent_id]


def test_runs_nested_runs_and_metrics_read_back(team):
    rep = team.a.report
    exp, runs = team.runs("team-a")
    parent = team.client.get_run(team.a.run_id)
    assert parent.info.status == "FINISHED" and parent.info.experiment_id == exp.experiment_id
    assert parent.data.params["split_digest"] == rep["split_digest"]
    for split in ("train", "val", "test"):
        for phase in ("before", "after"):
            assert parent.data.metrics[f"{phase}_{split}_pass_rate"] == pytest.approx(
                rep["splits"][split][phase]["pass_rate"])
    children = _children(runs, team.a.run_id)
    names = Counter(r.info.run_name for r in children)
    assert set(names) == {f"eval/{p}/{s}" for p in ("before", "after") for s in ("train", "val", "test")} | {
        "optimize/gepa"} and set(names.values()) == {1}
    assert len(runs) == 1 + len(children) and all(r.info.status == "FINISHED" for r in runs)
    opt = next(r for r in children if r.info.run_name == "optimize/gepa")
    hist = team.client.get_metric_history(opt.info.run_id, "val_score")
    want = [h["val_score"] for h in rep["history"] if "val_score" in h]
    assert len(hist) == len(want) >= 1 and sorted(m.value for m in hist) == sorted(want)
    arts = {f.path for f in team.client.list_artifacts(team.a.run_id)}
    assert {"report", "split_manifest.json", "usage.json"} <= arts  # uploaded through the server


def test_traces_carry_the_verdicts_as_assessments(team):
    rep = team.a.report
    exp, _ = team.runs("team-a")
    traces = [t for t in team.client.search_traces(locations=[exp.experiment_id], max_results=500)
              if "verifirst.split" in t.info.tags]
    assert len(traces) == sum(rep["splits"][s][p]["n"] for s in rep["splits"] for p in ("before", "after"))
    assert rep["tracking_failures"]["count"] == 0, rep["tracking_failures"]
    seen = Counter()
    for t in traces:
        got = Counter(a.name for a in t.info.assessments)
        assert got["verifier_score"] == got["verifier_pass"] == 1, (t.info.trace_id, t.info.tags, got)
        ok = next(a for a in t.info.assessments if a.name == "verifier_pass").value
        score = next(a for a in t.info.assessments if a.name == "verifier_score")
        assert score.source.source_id == "verifirst.verifier" and (score.value == 1.0) == ok
        seen[(t.info.tags["verifirst.split"], t.info.tags["verifirst.item_id"], ok)] += 1
    want = Counter()  # every evaluated item's verdict, from the run's own per-item rows
    for rows in (Path(team.a.run_dir) / "eval").glob("*.jsonl"):
        for line in rows.read_text().splitlines():
            row = json.loads(line)
            want[(row["split"], row["id"], row["status"] == "PASS")] += 1
    assert seen == want


def test_registered_prompt_versions_and_calibration(team):
    uri = team.a.report["prompt_uri"]
    name, version = uri.removeprefix("prompts:/").split("/")
    pv = team.client.get_prompt_version(name, version)
    assert pv.tags["split_digest"] == team.a.report["split_digest"] and pv.tags["run_id"] == team.a.run_id
    for k, text in team.a.report["instructions"].items():
        assert text in pv.template
    cal = team.cal
    run = team.client.get_run(cal["run_id"])
    assert run.info.status == "FINISHED" and "test_calibrated_pi" in run.data.metrics
    assert _children(team.runs("team-calibrate")[1], cal["run_id"])  # its evaluations are nested runs
    champ = team.client.get_prompt_version_by_alias("verifirst-passfail-judge", "champion")
    assert cal["prompt_uri"] == f"prompts:/verifirst-passfail-judge/{champ.version}"
    assert champ.tags["split_digest"] == cal["split_digest"]


def test_two_experiments_ran_concurrently_without_collision(team):
    (a0, a1), (b0, b1) = team.a_span, team.b_span
    assert a0 < b1 and b0 < a1, "the two experiments overlapped in time"
    for name, run_id, rep in (("team-a", team.a.run_id, team.a.report), (OTHER, team.b["run_id"], team.b)):
        exp, runs = team.runs(name)
        parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        assert [r.info.run_id for r in parents] == [run_id]
        assert len(_children(runs, run_id)) == 7 and len(runs) == 8  # 6 evaluations + the optimizer
        assert all(r.info.status == "FINISHED" for r in runs)
        m = team.client.get_run(run_id).data.metrics
        assert m["after_test_pass_rate"] == pytest.approx(rep["splits"]["test"]["after"]["pass_rate"])
        assert team.client.get_prompt_version(*rep["prompt_uri"].removeprefix("prompts:/").split("/"))
    assert team.a.report["prompt_uri"] != team.b["prompt_uri"]


def test_the_store_is_postgresql(team):
    import psycopg2

    with psycopg2.connect(host="127.0.0.1", port=team.pg.port, user=team_server.PG_USER, dbname="mlflow") as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT e.name, count(*) FROM runs r JOIN experiments e USING (experiment_id) "
                        "WHERE r.lifecycle_stage = 'active' GROUP BY e.name")
            counts = dict(cur.fetchall())
    assert counts["team-a"] == counts[OTHER] == 8 and counts["team-calibrate"] >= 1


def test_docs_use_the_tested_commands():
    readme = (REPO / "docs" / "integrations.md").read_text()
    section = readme.split("### A team's MLflow on PostgreSQL", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    for line in team_server.recipe():
        assert line in section, line


def test_an_untraced_run_attaches_no_verdict_to_an_earlier_runs_trace(team, tmp_path):
    """A calibration (traces off) after an experiment in the same process once put all its verdicts
    on the experiment's last trace: the thread's last active trace was another run's."""
    from types import SimpleNamespace

    from verifirst.tracking import Tracker

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(team.server.url)
    try:
        mlflow.trace(lambda: 1, name="earlier-run-call")()
        assert mlflow.get_last_active_trace_id(thread_local=True)
        hook = Tracker(tmp_path / "wd", uri=team.server.url, autolog=False).feedback_hook(None, "test")
        hook(SimpleNamespace(id="item-1"), SimpleNamespace(passed=True, score=1.0))
        assert hook.pending == []
    finally:
        mlflow.set_tracking_uri(previous)
