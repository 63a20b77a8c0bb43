"""Monitoring from recorded verdicts (issue 34): the deployed judge's own assessments on MLflow traces,
joined to outcomes logged later (on the traces, or in an outcome file by trace id or a record key),
give the windows, π and drift verdict that re-running the judge gives, with 0 model calls; a state
file makes a later run read only the new traces; bad input is an InputError naming what (exit 2).

The scripted deployed judge FAILs a diff that contains `eval(`: it logged that verdict on each trace
in production, and the scripted LM that re-runs the judge applies the same rule from the prompt.
From week 3 the agent's `os.system(` calls fail too, so π drops in the last window."""
from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timedelta, timezone

import pytest

import verifirst.tracking  # noqa: F401  (reads MLFLOW_TRACKING_URI once: before a test here sets it)
from verifirst.core.errors import InputError
from verifirst.judge.recorded_verdicts import load_state, monitor_recorded
from verifirst.lm.testing import json_answer, scripted_lm

T0 = datetime(2024, 3, 4, tzinfo=timezone.utc)
CHANGE = T0 + timedelta(days=21)
PROMPT = "Judge the diff. FAIL if the diff contains `eval(`. Otherwise PASS."
FIELD_RE = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## \w+ ## \]\]|\n\nRespond with|\Z)", re.S)
HAZARDS = ["eval(", "os.system("]
N_BOOT = 300


def _answer(messages):
    system, user = messages[0]["content"], messages[-1]["content"]
    f = {m.group(1): m.group(2).strip() for m in FIELD_RE.finditer(user)}
    if "`decision`" in system:  # the informed teacher: abstains on a FAIL it cannot see a cause for
        found = [h for h in HAZARDS if h in f.get("diff", "")]
        if f.get("outcome_label") == "FAIL" and not found:
            return json_answer(justification="nothing in the view explains the failure", decision="SKIP")
        return json_answer(justification="visible" if found else "no hazard", decision="KEEP")
    hit = "eval(" in f.get("diff", "") and "`eval(`" in system
    return json_answer(reasoning="rule" if hit else "no rule applies", verdict="FAIL" if hit else "PASS")


def _lm(role="judge"):
    return scripted_lm(_answer, role=role, name=f"recorded-{role}")


def _records(weeks=4, hidden_week=None):
    """20 records a week, one every 8 hours: 10 clean, 10 hazardous (see the module docstring)."""
    out = []
    for w in range(weeks):
        for k in range(20):
            t = T0 + timedelta(days=7 * w, hours=8 * k)
            if k % 2 == 0:
                diff, label = f"+ x = {k}\n", "PASS"
                if w == hidden_week and k < 16:
                    label = "FAIL"
            elif t < CHANGE or k % 4 == 1:
                diff, label = f"+ y = eval(s{k})\n", "FAIL"
            else:
                diff, label = f"+ os.system(cmd{k})\n", "FAIL"
            out.append({"id": f"w{w}-{k}", "label": label, "diff": diff, "t": t})
    return out


class Store:
    """A sqlite MLflow store in tmp_path where the deployed judge logs its verdicts on traces: a copy
    of a module-built one (creating an MLflow store's tables costs seconds; copying it, none)."""

    def __init__(self, tmp_path, monkeypatch, template, experiment="prod-app"):
        import mlflow

        db = tmp_path / "mlflow.db"
        shutil.copyfile(template["db"], db)
        self.uri = f"sqlite:///{db.resolve()}"
        self.client = mlflow.MlflowClient(tracking_uri=self.uri)
        self.exp = self.client.get_experiment_by_name(experiment).experiment_id
        monkeypatch.setenv("MLFLOW_TRACKING_URI", self.uri)  # set_tracking_uri rewrites it: put back after
        mlflow.set_tracking_uri(self.uri)
        self.ids: dict[str, str] = dict(template["ids"])

    def serve(self, records, judge="judge", error_on=()):
        """Each record as a trace at its time, with the judge's verdict logged on it (or its error)."""
        self.ids.update(_serve(self.client, self.exp, records, judge, error_on))

    def outcomes(self, records, name="outcome"):
        """The outcomes, arriving later: a feedback on each record's trace."""
        import mlflow
        from mlflow.entities import AssessmentSource

        src = AssessmentSource(source_type="CODE", source_id="ci")
        for r in records:
            mlflow.log_feedback(trace_id=self.ids[r["id"]], name=name, value=r["label"], source=src)


def _serve(client, exp, records, judge="judge", error_on=()) -> dict:
    import mlflow
    from mlflow.entities import AssessmentError, AssessmentSource

    src = AssessmentSource(source_type="LLM_JUDGE", source_id="deployed-judge")
    ids = {}
    for r in records:
        ns = int(r["t"].timestamp() * 1e9)
        span = client.start_trace("review", inputs={"diff": r["diff"]}, experiment_id=exp,
                                  tags={"verifirst.item_id": r["id"], "request_key": f"req-{r['id']}"},
                                  start_time_ns=ns)
        client.end_trace(span.trace_id, outputs="ok", end_time_ns=ns + 1_000_000)
        ids[r["id"]] = span.trace_id
        if judge is None:
            continue
        if r["id"] in error_on:
            mlflow.log_feedback(trace_id=span.trace_id, name=judge, source=src,
                                error=AssessmentError(error_code="RATE_LIMIT", error_message="429 from provider"))
        else:
            mlflow.log_feedback(trace_id=span.trace_id, name=judge, source=src,
                                value="FAIL" if "eval(" in r["diff"] else "PASS", rationale="recorded")
    return ids


def _template(path, serve: bool) -> dict:
    import mlflow

    uri = f"sqlite:///{path.resolve()}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("prod-app", artifact_location=(path.parent / "art").resolve().as_uri())
    prev = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        ids = _serve(client, exp, _records()) if serve else {}
    finally:
        mlflow.set_tracking_uri(prev)
    return {"db": path, "ids": ids}


@pytest.fixture(autouse=True)
def _mlflow_uris_put_back(monkeypatch):
    """mlflow.set_tracking_uri / set_registry_uri set process globals (and MLFLOW_TRACKING_URI): each test
    here leaves them as it found them (a later test resolving a prompt read this store's registry)."""
    from mlflow.tracking._model_registry import utils as registry
    from mlflow.tracking._tracking_service import utils as tracking

    monkeypatch.setattr(tracking, "_tracking_uri", tracking._tracking_uri)
    monkeypatch.setattr(registry, "_registry_uri", registry._registry_uri)
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI"):
        monkeypatch.setenv(name, "unset")  # recorded as it was, put back after the test
        monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def empty(tmp_path_factory):
    """A store with the experiment and no trace yet."""
    return _template(tmp_path_factory.mktemp("empty") / "mlflow.db", serve=False)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A store with 4 weeks of traces, the judge's verdict on each, no outcome yet."""
    return _template(tmp_path_factory.mktemp("served") / "mlflow.db", serve=True)


def _rerun(tmp_path, store, **kw):
    """The existing monitor path: the scripted judge re-run on the labelled traces."""
    import verifirst as vf

    prompt = tmp_path / "judge.md"
    prompt.write_text(PROMPT)
    return vf.monitor(str(prompt), from_mlflow="prod-app", label="outcome", windows="7d", baseline_pi=0.9,
                      models={"judge": _lm(), "teacher": _lm("teacher")}, workdir=tmp_path / "wd-rerun",
                      tracking=vf.MLflow(uri=store.uri), n_boot=N_BOOT, **kw)


def _recorded(tmp_path, store, state="state.json", **kw):
    kw = {"baseline_pi": 0.9, "windows": "7d", "label": "outcome", **kw}
    return monitor_recorded("prod-app", judge="judge", tracking_uri=store.uri,
                            workdir=tmp_path / "wd", state=tmp_path / state, n_boot=N_BOOT, **kw)


PI_KEYS = ("window", "n", "judged", "judge_errors", "pi", "pi_ci95", "accuracy", "fail_recall", "fail_precision",
           "pass_recall", "label_counts", "status", "recommendation")


def _pi_part(rows):
    return [{k: r[k] for k in PI_KEYS} | {"pi_drift": r["drift"]["pi"]} for r in rows]


@pytest.fixture
def counted(monkeypatch):
    """Every model the run could reach is one scripted LM whose calls are counted."""
    import dspy

    import verifirst.lm as lm_mod

    lm = _lm()
    monkeypatch.setattr(lm_mod, "make_lm", lambda spec, role="task", **kw: lm)
    with dspy.context(lm=lm):
        yield lm


def test_recorded_verdicts_give_the_rerun_windows_pi_and_drift_with_no_model_call(tmp_path, monkeypatch, served, counted):
    store = Store(tmp_path, monkeypatch, served)
    rows = _records()
    store.outcomes(rows)

    rec = _recorded(tmp_path, store)
    assert counted.engine.calls == 0 and rec.report["model_calls"] == {"judge": 0, "teacher": 0}
    rerun = _rerun(tmp_path, store)
    assert rerun.exit_code == rec.exit_code == 1
    assert _pi_part(rec.windows) == _pi_part(rerun.windows)
    assert [w["drift"]["pi"] for w in rec.windows] == [False, False, False, True]
    for k in ("drift", "drifting_windows", "first_drift_window", "recommendation", "n_records"):
        assert rec.report[k] == rerun.report[k], k
    assert rec.report["recommendation"] == "recalibrate"
    assert rec.windows[3]["teacher"]["reviewed"] == 0 and rec.report["recorded"]["teacher"] == "off"
    assert rec.report["recorded"]["traces_read"] == 80 and rec.report["recorded"]["joined_now"] == 80
    assert (rec.run_dir / "report.json").exists() and "recalibrate" in (rec.run_dir / "report.md").read_text()


def test_a_second_run_reads_only_new_traces_and_the_windows_accumulate(tmp_path, monkeypatch, empty, counted):
    store = Store(tmp_path, monkeypatch, empty)
    rows = _records()
    early, late = rows[:40], rows[40:]
    store.serve(early)
    store.outcomes(early[:20])  # week 1's outcomes are in; week 2's arrive later

    first = _recorded(tmp_path, store)
    r = first.report["recorded"]
    assert (r["traces_read"], r["joined_now"], r["waiting"]) == (40, 20, 20)
    assert [w["n"] for w in first.windows] == [20]
    state = json.loads((tmp_path / "state.json").read_text())
    assert len(state["records"]) == 20 and len(state["pending"]) == 20

    store.outcomes(early[21:])
    store.client.delete_traces(store.exp, trace_ids=[store.ids["w1-0"]])  # a waiting trace deleted meanwhile
    store.serve(late)
    store.outcomes(late)
    second = _recorded(tmp_path, store)
    r = second.report["recorded"]
    assert r["traces_read"] == 40, "only the traces logged since the first run are read"
    assert (r["waiting_rechecked"], r["joined_now"], r["waiting"]) == (20, 59, 0)
    fresh = _recorded(tmp_path, store, state="fresh.json")  # one run over everything, no state
    assert fresh.report["recorded"]["traces_read"] == 79
    assert _pi_part(second.windows) == _pi_part(fresh.windows)
    assert second.exit_code == fresh.exit_code == 1 and second.report["first_drift_window"] == 3

    third = _recorded(tmp_path, store)  # the next cron run: nothing new
    assert third.report["recorded"]["traces_read"] == 0 and third.report["recorded"]["joined_now"] == 0
    assert _pi_part(third.windows) == _pi_part(fresh.windows)
    assert counted.engine.calls == 0


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_outcome_file_joins_by_trace_id_or_by_a_record_key(tmp_path, monkeypatch, served, counted, fmt):
    store = Store(tmp_path, monkeypatch, served)
    rows = _records()
    store.outcomes(rows)  # the assessment join, for comparison
    by_assessment = _recorded(tmp_path, store, state="a.json")

    def write(path, recs, key):
        vals = [(store.ids[r["id"]] if key == "trace_id" else f"req-{r['id']}", r["label"]) for r in recs]
        if fmt == "csv":
            path.write_text(f"{key},label\n" + "".join(f"{k},{v}\n" for k, v in vals))
        else:
            path.write_text("".join(json.dumps({key: k, "label": v}) + "\n" for k, v in vals))
        return path

    f = write(tmp_path / f"o.{fmt}", rows, "trace_id")
    by_id = monitor_recorded("prod-app", judge="judge", label="label", outcomes=f, windows="7d", baseline_pi=0.9,
                             tracking_uri=store.uri, workdir=tmp_path / "wd", state=tmp_path / "b.json",
                             n_boot=N_BOOT)
    assert _pi_part(by_id.windows) == _pi_part(by_assessment.windows)

    keyed = tmp_path / f"k.{fmt}"
    write(keyed, rows[:40], "request_key")  # half the outcomes so far
    kw = dict(judge="judge", label="label", outcomes=keyed, key="request_key", windows="7d", baseline_pi=0.9,
              tracking_uri=store.uri, workdir=tmp_path / "wd", state=tmp_path / "c.json", n_boot=N_BOOT)
    part = monitor_recorded("prod-app", **kw)
    assert part.report["recorded"]["joined_now"] == 40 and part.report["recorded"]["waiting"] == 40
    write(keyed, rows, "request_key")  # the rest arrive
    full = monitor_recorded("prod-app", **kw)
    r = full.report["recorded"]
    assert (r["traces_read"], r["waiting_rechecked"], r["joined_now"]) == (0, 0, 40), "the file join re-reads no trace"
    assert _pi_part(full.windows) == _pi_part(by_assessment.windows)
    assert counted.engine.calls == 0


def test_the_teacher_is_optional_its_calls_estimated_first_and_made_once(tmp_path, monkeypatch, served):
    store = Store(tmp_path, monkeypatch, served)
    rows = _records(hidden_week=2)  # the served diffs; in week 3 most clean ones FAIL for a hidden cause
    store.outcomes(rows)
    teacher = _lm("teacher")

    est = _recorded(tmp_path, store, teacher=teacher, dry_run=True)
    assert est["teacher_calls"] == 80 and est["judge_calls"] == 0 and est["traces_read"] == 80
    assert teacher.engine.calls == 0 and not (tmp_path / "state.json").exists() and not (tmp_path / "wd").exists()

    rec = _recorded(tmp_path, store, teacher=teacher)
    assert teacher.engine.calls == 80 and rec.report["model_calls"] == {"judge": 0, "teacher": 80}
    rerun = _rerun(tmp_path, store)
    assert [w["teacher"] for w in rec.windows] == [w["teacher"] for w in rerun.windows]
    assert rec.report["recommendation"] == rerun.report["recommendation"] == "give the judge better inputs"

    again = _recorded(tmp_path, store, teacher=teacher, dry_run=True)
    assert again["teacher_calls"] == 0, "decisions are kept in the state"
    _recorded(tmp_path, store, teacher=teacher)
    assert teacher.engine.calls == 80


def test_a_verdict_logged_as_an_error_is_counted_apart_never_pass_or_fail(tmp_path, monkeypatch, empty, counted):
    store = Store(tmp_path, monkeypatch, empty)
    rows = _records(weeks=1)
    store.serve(rows, error_on={"w0-0", "w0-1"})
    store.outcomes(rows)
    rec = _recorded(tmp_path, store, windows=1)
    w = rec.windows[0]
    assert (w["n"], w["judged"], w["judge_errors"]) == (20, 18, 2) and w["pi"] == 1.0
    assert rec.report["judge_errors"] == 2 and rec.exit_code == 0


def test_max_wait_stops_waiting_for_outcomes_that_never_come(tmp_path, monkeypatch, empty, counted):
    store = Store(tmp_path, monkeypatch, empty)
    rows = _records(weeks=1)  # one every 8 hours, the newest at 152 h
    store.serve(rows)
    store.outcomes(rows[:5])
    rec = _recorded(tmp_path, store, windows=1, max_wait="2d")
    r = rec.report["recorded"]
    assert (r["joined_now"], r["expired"], r["waiting"]) == (5, 8, 7), "older than 104 h: k < 13 of the 15 waiting"
    assert rec.exit_code == 0 and rec.windows[0]["n"] == 5
    with pytest.raises(InputError, match="is a count, not a duration"):
        _recorded(tmp_path, store, max_wait="3", state="other.json")


def test_bad_input_is_an_error_naming_what_and_writes_nothing(tmp_path, monkeypatch, empty, counted):
    store = Store(tmp_path, monkeypatch, empty)
    rows = _records(weeks=1)
    store.serve(rows, judge=None)  # the judge logged nothing (or under another name)
    store.outcomes(rows)

    with pytest.raises(InputError, match=r"no MLflow experiment 'nope'") as e:
        monitor_recorded("nope", baseline_pi=0.9, tracking_uri=store.uri, workdir=tmp_path / "wd",
                         state=tmp_path / "s.json")
    assert e.value.field == "--from-mlflow"
    with pytest.raises(InputError, match=r"none of the 20 traces .* carries the judge's assessment 'judge'") as e:
        _recorded(tmp_path, store)
    assert e.value.field == "--recorded" and "outcome" in str(e.value), "the names the traces do carry"
    assert not (tmp_path / "state.json").exists() and not (tmp_path / "wd" / "runs").exists()

    store.serve(_records(weeks=2)[20:])
    bad = tmp_path / "state.json"
    bad.write_text('{"kind": "verifirst.monitor-recorded",\n "version": 1,,}\n')
    with pytest.raises(InputError, match=r"state file is not JSON") as e:
        _recorded(tmp_path, store)
    assert e.value.path == str(bad) and e.value.line == 2
    assert bad.read_text().endswith(",,}\n"), "a refused run writes nothing"

    bad.unlink()
    _recorded(tmp_path, store)  # a good state for prod-app
    with pytest.raises(InputError, match=r"was written for join") as e:
        _recorded(tmp_path, store, outcomes=None, label="other")
    assert e.value.field == "join"
    with pytest.raises(InputError, match=r"no baseline π"):
        _recorded(tmp_path, store, baseline_pi=None, state="t.json")
    with pytest.raises(InputError, match=r"join key 'request_key' needs an outcome file"):
        _recorded(tmp_path, store, key="request_key", state="t.json")
    assert load_state(tmp_path / "none.json", {"experiment": "x"})["records"] == {}
    assert counted.engine.calls == 0


def test_cli_monitor_from_mlflow_recorded_exits_as_monitor_does(tmp_path, monkeypatch, served, counted):
    """`verifirst monitor --from-mlflow EXP --recorded judge`: the monitor's report and exit codes (1 drift,
    2 bad input naming what), 0 model calls; --dry-run estimates and writes nothing."""
    from typer.testing import CliRunner

    from verifirst.cli import app

    store = Store(tmp_path, monkeypatch, served)
    store.outcomes(_records())
    prompt = tmp_path / "judge.md"
    prompt.write_text(PROMPT)
    state = tmp_path / "cron.json"

    def cli(*args):
        return CliRunner().invoke(app, ["monitor", "--prompt", str(prompt), "--from-mlflow", "prod-app",
                                        "--recorded", "judge", "--label", "outcome", "--state", str(state),
                                        "--baseline-pi", "0.9", "--workdir", str(tmp_path / "wd"),
                                        "--tracking-uri", store.uri, "--no-tracking", *args])

    r = cli("--dry-run", "--teacher-abstention")
    assert r.exit_code == 0 and "80 new trace(s)" in r.output and "teacher calls 80" in r.output, r.output
    assert not state.exists()
    r = cli("--json")
    assert r.exit_code == 1, r.output
    rep = json.loads(r.output)
    assert rep["model_calls"] == {"judge": 0, "teacher": 0} and rep["first_drift_window"] == 3
    assert rep["recorded"]["traces_read"] == 80 and state.exists()
    r = cli("--json")
    assert r.exit_code == 1 and json.loads(r.output)["recorded"]["traces_read"] == 0
    state.write_text("{not json")
    r = cli()
    assert r.exit_code == 2 and "state file is not JSON" in r.output and str(state) in r.output, r.output
    r = CliRunner().invoke(app, ["monitor", "--prompt", str(prompt), "--from-mlflow", "nope", "--recorded", "judge",
                                 "--baseline-pi", "0.9", "--workdir", str(tmp_path / "wd"), "--tracking-uri",
                                 store.uri, "--no-tracking", "--state", str(tmp_path / "other.json")])
    assert r.exit_code == 2 and "no MLflow experiment 'nope'" in r.output, r.output
    assert counted.engine.calls == 0
