"""Monitoring a deployed judge (issue 23): per-window π with its interval, FAIL recall/precision, the
share the judge could not judge, the informed teacher's abstention rate; drift raises exit 1 with
the fitting recommendation, bad input exits 2 naming the file or field. Scripted LMs only: one LM
acts on what its prompt says (the judge applies the `FAIL if the diff contains ...` rules of its
instructions; the teacher keeps a FAIL it can see a hazard for and abstains otherwise)."""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifirst.cli import app
from verifirst.lm.testing import json_answer, scripted_lm

runner = CliRunner()
T0 = datetime(2024, 3, 4, tzinfo=timezone.utc)  # a Monday: week k is days 7k..7k+6
CHANGE = T0 + timedelta(days=21)  # the agent evolves: from week 3 on, os.system( fails too
HAZARDS = ["eval(", "os.system("]
FIELD_RE = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## \w+ ## \]\]|\n\nRespond with|\Z)", re.S)
FAIL_RULE = re.compile(r"FAIL if the diff contains `([^`]+)`")
PROMPT = "Judge the diff. FAIL if the diff contains `eval(`. Otherwise PASS."


def _answer(messages):
    system, user = messages[0]["content"], messages[-1]["content"]
    f = {m.group(1): m.group(2).strip() for m in FIELD_RE.finditer(user)}
    if "`decision`" in system:  # the informed teacher
        found = [h for h in HAZARDS if h in f.get("diff", "")]
        if f.get("outcome_label") == "FAIL" and not found:
            return json_answer(justification="nothing in the view explains the failure", decision="SKIP")
        return json_answer(justification=f"the diff shows `{found[0]}`" if found else "no hazard", decision="KEEP")
    instructions = system.split("your objective is:", 1)[-1]
    hit = [t for t in FAIL_RULE.findall(instructions) if t in f.get("diff", "")]
    return json_answer(reasoning=f"matches `{hit[0]}`" if hit else "no rule applies",
                       verdict="FAIL" if hit else "PASS")


def _lm(role="judge"):
    return scripted_lm(_answer, role=role, name=f"monitor-{role}")


def _records(weeks=4, hidden_week=None):
    """20 records a week, one every 8 hours: 10 clean (PASS), 10 hazardous. Before CHANGE only
    `eval(` fails; from CHANGE on the agent's new `os.system(` calls fail too (the rule changed).
    In `hidden_week`, 8 of the 10 clean diffs FAIL for a reason no view shows (flaky infrastructure)."""
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
            out.append({"id": f"w{w}-{k}", "label": label, "diff": diff, "created_at": t.isoformat()})
    return out


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def scripted(monkeypatch):
    """The CLI's model strings resolve to the scripted LM."""
    import verifirst.judge.monitoring as mon

    monkeypatch.setattr(mon, "make_lm", lambda spec, role="task", **kw: _lm(role))


def _cli(tmp_path, *args):
    prompt = tmp_path / "judge.md"
    prompt.write_text(PROMPT)
    return runner.invoke(app, ["monitor", "--prompt", str(prompt), "--windows", "7d", "--time-field", "created_at",
                               "--baseline-pi", "0.9", "--workdir", str(tmp_path / "wd"), "--no-tracking", *args])


def test_drift_is_raised_at_the_rule_change_and_not_before(tmp_path, scripted):
    rows = _records()
    before = _write(tmp_path / "before.jsonl", [r for r in rows if r["created_at"] < CHANGE.isoformat()])
    everything = _write(tmp_path / "all.jsonl", rows)

    r = _cli(tmp_path, "--outcomes", str(before), "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert [w["n"] for w in rep["windows"]] == [20, 20, 20]
    assert all(w["pi"] == 1.0 and w["status"] == "ok" for w in rep["windows"])
    assert rep["drift"] is False and rep["recommendation"] is None

    r = _cli(tmp_path, "--outcomes", str(everything), "--json")
    assert r.exit_code == 1, r.output
    rep = json.loads(r.output)
    ws = rep["windows"]
    assert [w["drift"]["pi"] for w in ws] == [False, False, False, True], [w["status"] for w in ws]
    assert rep["first_drift_window"] == 3 and rep["drifting_windows"] == [3]
    last = ws[3]
    assert last["pi_ci95"][1] < 0.9 and last["fail_recall"] == 0.5 and last["fail_precision"] == 1.0
    assert last["teacher"]["abstention_rate"] == 0.0, "the new failures are visible in the diff"
    assert rep["recommendation"] == "recalibrate"
    assert Path(rep["run_dir"], "report.json").exists() and "recalibrate" in Path(rep["run_dir"], "report.md").read_text()
    page = Path(rep["run_dir"], "report.html").read_text()  # the plot a person looks at: π per window, abstention
    assert "data:image/png;base64," in page and "DRIFT" in page and "recalibrate" in page
    assert Path(rep["run_dir"], "plots", "monitor.png").stat().st_size > 1000

    r = _cli(tmp_path, "--outcomes", str(everything))  # the table, for a person
    assert r.exit_code == 1 and "DRIFT" in r.output and "recalibrate" in r.output, r.output


def test_hidden_causes_recommend_better_inputs_not_recalibration(tmp_path, scripted):
    path = _write(tmp_path / "o.jsonl", _records(weeks=3, hidden_week=2))
    r = _cli(tmp_path, "--outcomes", str(path), "--json")
    assert r.exit_code == 1, r.output
    rep = json.loads(r.output)
    ws = rep["windows"]
    assert [w["drift"]["abstention"] for w in ws] == [False, False, True]
    assert ws[2]["teacher"]["abstention_rate"] > 0.3 and ws[0]["teacher"]["abstention_rate"] == 0.0
    assert rep["recommendation"] == "give the judge better inputs"
    assert ws[2]["recommendation"] == "give the judge better inputs"


def test_judge_lm_errors_are_counted_apart_never_a_verdict(tmp_path):
    import verifirst as vf

    def flaky(messages):
        if "`decision`" not in messages[0]["content"] and "y = eval(s3)" in messages[-1]["content"]:
            raise RuntimeError("provider down")
        return _answer(messages)

    prompt = tmp_path / "judge.md"
    prompt.write_text(PROMPT)
    res = vf.monitor(str(prompt), _write(tmp_path / "o.jsonl", _records(weeks=1)), windows=1,
                     models={"judge": scripted_lm(flaky, role="judge", name="flaky")}, baseline_pi=0.9,
                     workdir=tmp_path / "wd", n_boot=200)
    w = res.windows[0]
    assert w["n"] == 20 and w["judged"] == 19 and w["judge_errors"] == 1 and w["unjudged_rate"] == 0.05
    assert w["pi"] == 1.0 and res.exit_code == 0 and res.recommendation is None


def test_the_champion_from_the_registry_is_judged_against_its_val_pi_and_metrics_go_to_mlflow_by_window(tmp_path):
    """prompts:/NAME@champion: the baseline is the version's val_pi tag (as calibration registers it);
    with tracking the windows' metrics are a time series (step = window index) and the verdict tags."""
    import verifirst as vf
    from mlflow import MlflowClient

    from verifirst.tracking import Tracker

    tr = Tracker(tmp_path / "wd", offline=True, autolog=False)
    uri = tr.register_prompt("monitor-judge", PROMPT, tags={"val_pi": "0.950000", "judge": "passfail",
                                                            "threshold": "None"})
    tr.client.set_prompt_alias("monitor-judge", "champion", int(uri.rsplit("/", 1)[1]))
    res = vf.monitor("prompts:/monitor-judge@champion", _write(tmp_path / "o.jsonl", _records()), windows="7d",
                     models={"judge": _lm()}, workdir=tmp_path / "wd", n_boot=200,
                     tracking=vf.MLflow(offline=True, experiment="monitor-test"))
    assert res.exit_code == 1 and res.report["drift_rule"]["baseline_pi"] == 0.95
    assert "val_pi" in res.report["drift_rule"]["baseline_source"] and res.report["prompt"]["version"] == 1
    client = MlflowClient(tracking_uri=res.report["tracking_uri"])
    hist = client.get_metric_history(res.report["run_id"], "pi")
    assert [m.step for m in sorted(hist, key=lambda m: m.step)] == [0, 1, 2, 3]
    drift = {m.step: m.value for m in client.get_metric_history(res.report["run_id"], "drift")}
    assert drift == {0: 0.0, 1: 0.0, 2: 0.0, 3: 1.0}
    tags = client.get_run(res.report["run_id"]).data.tags
    assert tags["drift"] == "true" and tags["recommendation"] == "recalibrate"


def test_labelled_traces_are_monitored_by_their_request_time(tmp_path, monkeypatch):
    """--from-mlflow: a trace's time is its request time; its human label is the outcome."""
    import mlflow
    from mlflow.entities import AssessmentSource

    import verifirst as vf

    uri = f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("gated-app")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # set_tracking_uri rewrites it: put back after the test
    mlflow.set_tracking_uri(uri)
    human = AssessmentSource(source_type="HUMAN", source_id="reviewer@example.com")
    for r in _records(weeks=1)[:8]:
        span = client.start_trace("review", inputs={"diff": r["diff"]}, experiment_id=exp,
                                  tags={"verifirst.item_id": r["id"]})
        client.end_trace(span.trace_id, outputs="ok")
        mlflow.log_expectation(trace_id=span.trace_id, name="label", value=r["label"], source=human)
    prompt = tmp_path / "judge.md"
    prompt.write_text(PROMPT)
    res = vf.monitor(str(prompt), from_mlflow="gated-app", windows=1, models={"judge": _lm()}, baseline_pi=0.9,
                     workdir=tmp_path / "wd", tracking=vf.MLflow(uri=uri), n_boot=200)
    w = res.windows[0]
    assert res.report["source"] == "mlflow:gated-app" and w["n"] == 8 and w["judged"] == 8
    assert w["pi"] == 1.0 and res.exit_code == 0


def test_bad_input_exits_2_naming_the_file_or_field(tmp_path, scripted):
    rows = _records(weeks=1)
    del rows[3]["created_at"]
    path = _write(tmp_path / "notime.jsonl", rows)
    r = _cli(tmp_path, "--outcomes", str(path))
    assert r.exit_code == 2, r.output
    assert "w0-3" in r.output and "created_at" in r.output and "notime.jsonl" in r.output

    r = _cli(tmp_path, "--outcomes", str(_write(tmp_path / "ok.jsonl", _records(weeks=1))), "--time-field", "when")
    assert r.exit_code == 2 and "'when'" in r.output, r.output

    r = runner.invoke(app, ["monitor", "--prompt", str(tmp_path / "nope.md"), "--outcomes", str(path),
                            "--baseline-pi", "0.9", "--no-tracking", "--workdir", str(tmp_path / "wd")])
    assert r.exit_code == 2 and "nope.md" in r.output, r.output

    r = runner.invoke(app, ["monitor", "--prompt", "prompts:/no-such-judge@champion", "--outcomes", str(path),
                            "--no-tracking", "--workdir", str(tmp_path / "wd")])
    assert r.exit_code == 2 and "no-such-judge" in r.output, r.output

    prompt = tmp_path / "judge.md"
    r = runner.invoke(app, ["monitor", "--prompt", str(prompt), "--outcomes", str(tmp_path / "ok.jsonl"),
                            "--no-tracking", "--workdir", str(tmp_path / "wd")])
    assert r.exit_code == 2 and "--baseline-pi" in r.output, r.output

    r = _cli(tmp_path, "--outcomes", str(tmp_path / "ok.jsonl"), "--windows", "soon")
    assert r.exit_code == 2 and "--windows" in r.output, r.output


# -- ceilings and no evidence (issue 38) --------------------------------------------------------
@pytest.fixture
def counted(monkeypatch):
    """Like `scripted`, counting the model calls."""
    import verifirst.judge.monitoring as mon

    calls = []

    def make(spec, role="task", **kw):
        return scripted_lm(lambda m: calls.append(role) or _answer(m), role=role, name=f"counted-{role}")

    monkeypatch.setattr(mon, "make_lm", make)
    return calls


def test_no_window_with_enough_records_is_no_evidence_not_ok(tmp_path, counted):
    path = _write(tmp_path / "o.jsonl", _records(weeks=1))
    for args in (["--min-n", "1000000"], ["--windows", "1d"]):  # 20 records: too few for the rule, or 3 a day
        r = _cli(tmp_path, "--outcomes", str(path), *args)
        assert r.exit_code == 3, r.output
        assert "NO EVIDENCE" in r.output and "no window drifted" not in r.output and "ok (exit" not in r.output
    r = _cli(tmp_path, "--outcomes", str(path), "--json", "--min-n", "1000000")
    assert r.exit_code == 3 and "error: no evidence" in r.stderr
    rep = json.loads(r.stdout)
    assert rep["no_evidence"] is True and rep["exit_code"] == 3 and rep["undecided_windows"] == 1


def test_some_windows_deciding_is_ok_and_says_how_many_could_not(tmp_path, counted):
    rows = _records(weeks=2)[:23]  # week 0 has 20 records, week 1 three
    r = _cli(tmp_path, "--outcomes", str(_write(tmp_path / "o.jsonl", rows)), "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["no_evidence"] is False and "1 of 2 window(s) had too few records" in rep["reason"]


@pytest.mark.parametrize("windows,needle", [
    ("1000001", "more than 1000 windows"),  # a count: refused before the records are read
    ("1s", "more than 1000"),  # a duration over four weeks of records: 2.4M windows
    ("1M", "ambiguous"),  # a month or a minute: never guessed
])
def test_windows_past_the_ceiling_are_refused_naming_the_flag_before_any_call(tmp_path, counted, windows, needle):
    r = _cli(tmp_path, "--outcomes", str(_write(tmp_path / "o.jsonl", _records())), "--windows", windows)
    assert r.exit_code == 2, r.output
    assert "--windows" in r.output and needle in r.output and counted == []
    assert not (tmp_path / "wd" / "runs").exists()


def test_windows_units_other_than_m_read_in_either_case():
    from verifirst.loop.timesplit import parse_windows

    assert parse_windows("7D") == parse_windows("7d") == ("duration", 7 * 86400)
    assert parse_windows("30m") == ("duration", 1800)


def test_limit_judges_only_the_newest_records(tmp_path, counted):
    path = _write(tmp_path / "o.jsonl", _records(weeks=3))  # 60 records over three weeks
    r = _cli(tmp_path, "--outcomes", str(path), "--json", "--limit", "20")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["n_records"] == 20 and rep["limit"] == {"limit": 20, "records": 60, "left_out": 40}
    assert [w["n"] for w in rep["windows"]] == [20]  # the last week's, one window
    assert rep["windows"][0]["start"].startswith((T0 + timedelta(days=14)).date().isoformat())
    assert 20 <= len(counted) <= 40  # a judge call (and at most a teacher call) per kept record, not 120


@pytest.mark.parametrize("bad", ["0", "-1"])
def test_a_limit_below_one_is_refused(tmp_path, counted, bad):
    r = _cli(tmp_path, "--outcomes", str(_write(tmp_path / "o.jsonl", _records(weeks=1))), "--limit", bad)
    assert r.exit_code == 2 and "--limit" in r.output and counted == [], r.output


def test_judge_limit_judges_the_first_records(tmp_path, monkeypatch):
    import verifirst.judge.apply as cal

    calls = []
    monkeypatch.setattr(cal, "make_lm", lambda spec, role="task", **kw: scripted_lm(
        lambda m: calls.append(1) or _answer(m), role=role, name="judge-limit"))
    prompt = tmp_path / "judge.md"
    prompt.write_text(PROMPT)
    path = _write(tmp_path / "o.jsonl", _records(weeks=1))
    r = runner.invoke(app, ["judge", "--prompt", str(prompt), "--input", str(path), "--workdir",
                            str(tmp_path / "wd"), "--limit", "3"])
    assert r.exit_code == 0, r.output
    ids = [json.loads(line)["id"] for line in r.stdout.splitlines() if line.startswith("{")]
    assert ids == ["w0-0", "w0-1", "w0-2"] and len(calls) == 3
    r = runner.invoke(app, ["judge", "--prompt", str(prompt), "--input", str(path), "--workdir",
                            str(tmp_path / "wd"), "--limit", "0"])
    assert r.exit_code == 2 and "--limit" in r.output and len(calls) == 3


def test_a_record_far_from_the_others_is_named_when_most_windows_are_empty(tmp_path, counted):
    rows = _records(weeks=1) + [{"id": "epoch0", "label": "PASS", "diff": "+ x = 1\n", "created_at": 0}]
    r = _cli(tmp_path, "--outcomes", str(_write(tmp_path / "o.jsonl", rows)), "--json", "--windows", "30d")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    out = rep["time_outliers"]
    assert out["records"] == ["epoch0"] and out["empty_windows"] == len(rep["windows"]) - 2
    assert "'epoch0' lie far from the others (1970-01-01T00:00:00Z)" in rep["reason"]
    r = _cli(tmp_path, "--outcomes", str(tmp_path / "o.jsonl"), "--json")  # 7d: 2800 windows, past the ceiling
    assert r.exit_code == 2 and "1970-01-01T00:00:00Z to 2024" in r.output and "far-off times" in r.output
