"""The calibrate -> judge -> monitor journey when the model fails or the input is wrong: a failing
model never looks like a result (no "ok", no exit 0 when nothing was judged, the first LM error
shown), and bad input is refused with exit 2 naming the file, line or flag, before anything is
written. Scripted LMs only: a `down` LM raises on every call, as an unreachable endpoint does."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifirst.cli import app
from verifirst.lm.testing import json_answer, scripted_lm

runner = CliRunner()
T0 = datetime(2024, 3, 4, tzinfo=timezone.utc)
PROMPT = "Judge the diff. FAIL if the diff contains `eval(`. Otherwise PASS."
DOWN = "Connection refused: the provider is down"


def _answer(messages):
    """The judge fails `eval(` diffs; the teacher keeps every label."""
    system, user = messages[0]["content"], messages[-1]["content"]
    if "`decision`" in system:
        return json_answer(justification="the view explains it", decision="KEEP")
    return json_answer(reasoning="read the diff", verdict="FAIL" if "eval(" in user else "PASS")


def _down(messages):
    raise ConnectionError(DOWN)


def _records(n: int = 10, days: int = 1) -> list[dict]:
    """n records over `days` days, half of them `eval(` diffs that FAIL."""
    step = timedelta(days=days) / n
    return [{"id": f"r{k}", "label": "FAIL" if k % 2 else "PASS", "diff": f"+ y = eval(s{k})" if k % 2 else
             f"+ x = {k}", "created_at": (T0 + k * step).isoformat()} for k in range(n)]


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def prompt(tmp_path) -> Path:
    path = tmp_path / "judge.md"
    path.write_text(PROMPT)
    return path


def _scripted(monkeypatch, fn) -> None:
    """The CLI's model strings resolve to a scripted LM answering with fn."""
    import verifirst.judge.apply as cal
    import verifirst.judge.monitoring as mon

    def make(spec, role="task", **kw):
        return scripted_lm(fn, role=role, name=f"{fn.__name__}-{role}")

    monkeypatch.setattr(mon, "make_lm", make)
    monkeypatch.setattr(cal, "make_lm", make)


def _monitor(tmp_path, prompt, *args):
    return runner.invoke(app, ["monitor", "--prompt", str(prompt), "--windows", "1", "--baseline-pi", "0.5",
                               "--workdir", str(tmp_path / "wd"), *args])


# -- 1. monitor: an LM failure is not "ok" ------------------------------------------------------
def test_monitor_whose_model_never_answered_is_an_lm_failure_not_ok(tmp_path, prompt, monkeypatch):
    _scripted(monkeypatch, _down)
    outcomes = _write(tmp_path / "o.jsonl", _records())
    r = _monitor(tmp_path, prompt, "--outcomes", str(outcomes), "--no-tracking", "--json")
    assert r.exit_code == 1, r.output
    rep = json.loads(r.stdout)
    assert rep["drift"] is False and rep["exit_code"] == 1
    assert rep["lm_failure"]["windows"] == [0] and DOWN in rep["lm_failure"]["first_error"]
    assert rep["windows"][0]["status"].startswith("LM errors") and rep["windows"][0]["judged"] == 0
    assert DOWN in r.stderr and "error:" in r.stderr
    saved = json.loads(Path(rep["run_dir"], "report.json").read_text())
    assert saved["lm_failure"] and saved["exit_code"] == 1

    r = _monitor(tmp_path, prompt, "--outcomes", str(outcomes), "--no-tracking")  # the table, for a person
    assert r.exit_code == 1 and "LM FAILURE" in r.stdout and "ok (exit" not in r.stdout and DOWN in r.output


def test_monitor_lm_failure_ends_the_mlflow_run_failed(tmp_path, prompt):
    import verifirst as vf
    from mlflow import MlflowClient

    down = scripted_lm(_down, role="judge", name="down")
    res = vf.monitor(str(prompt), _write(tmp_path / "o.jsonl", _records()), windows=1, models={"judge": down},
                     baseline_pi=0.5, workdir=tmp_path / "wd", n_boot=100,
                     tracking=vf.MLflow(offline=True, experiment="monitor-failure"))
    assert res.exit_code == 1 and res.lm_failure and not res.drift
    run = MlflowClient(tracking_uri=res.report["tracking_uri"]).get_run(res.report["run_id"])
    assert run.info.status == "FAILED" and run.data.tags["lm_failure"] == "true"


def test_monitor_teacher_failure_alone_leaves_abstention_undecided_and_fails(tmp_path, prompt):
    import verifirst as vf

    res = vf.monitor(str(prompt), _write(tmp_path / "o.jsonl", _records()), windows=1, baseline_pi=0.5,
                     models={"judge": scripted_lm(_answer, role="judge", name="ok"),
                             "teacher": scripted_lm(_down, role="teacher", name="down")},
                     workdir=tmp_path / "wd", n_boot=100)
    assert res.exit_code == 1 and res.lm_failure["roles"] == ["teacher"]
    assert res.windows[0]["judged"] == 10 and res.windows[0]["pi"] == 1.0


def test_monitor_small_window_without_errors_keeps_too_few_and_is_no_evidence(tmp_path, prompt):
    import verifirst as vf

    res = vf.monitor(str(prompt), _write(tmp_path / "o.jsonl", _records(3)), windows=1, baseline_pi=0.5,
                     models={"judge": scripted_lm(_answer, role="judge", name="ok")},
                     workdir=tmp_path / "wd", n_boot=100)
    assert res.exit_code == 3 and res.lm_failure is None  # no window could decide: not "ok" (issue 38)
    assert res.windows[0]["status"].startswith("too few judged records")


# -- 2. judge: nothing judged is no result ------------------------------------------------------
def _judge(tmp_path, prompt, records, *args):
    return runner.invoke(app, ["judge", "--prompt", str(prompt), "--input", str(records),
                               "--workdir", str(tmp_path / "wd"), *args])


def test_judge_with_every_record_an_lm_error_exits_1_naming_the_first_error(tmp_path, prompt, monkeypatch):
    _scripted(monkeypatch, _down)
    r = _judge(tmp_path, prompt, _write(tmp_path / "two.jsonl", _records(2)))
    assert r.exit_code == 1, r.output
    assert "error:" in r.output and DOWN in r.output and "judged 0 of 2" in r.output
    assert r.output.count('"verdict": null') == 2  # the rows, each with its error, before the failure


def test_judge_prints_the_verdict_null_rows_before_failing(tmp_path, prompt, monkeypatch, capsys):
    from verifirst.judge.apply import NothingJudged, cli_judge

    _scripted(monkeypatch, _down)
    with pytest.raises(NothingJudged) as e:
        cli_judge(str(prompt), _write(tmp_path / "two.jsonl", _records(2)), workdir=tmp_path / "wd")
    assert e.value.exit_code == 1 and DOWN in str(e.value)
    out = capsys.readouterr()
    rows = [json.loads(line) for line in out.out.splitlines()]
    assert [r["verdict"] for r in rows] == [None, None] and all(DOWN in r["error"] for r in rows)
    assert "judged 0 of 2 records" in out.err and DOWN in out.err


def test_judge_with_some_lm_errors_exits_0_and_its_summary_names_the_first(tmp_path, prompt, monkeypatch, capsys):
    from verifirst.judge.apply import cli_judge

    def flaky(messages):
        if "eval(s1)" in messages[-1]["content"]:
            raise ConnectionError(DOWN)
        return _answer(messages)

    _scripted(monkeypatch, flaky)
    assert cli_judge(str(prompt), _write(tmp_path / "four.jsonl", _records(4)), workdir=tmp_path / "wd") == 0
    out = capsys.readouterr()
    verdicts = [json.loads(line)["verdict"] for line in out.out.splitlines()]
    assert verdicts == ["PASS", None, "PASS", "FAIL"]
    assert "judged 3 of 4 records (1 LM errors); first LM error: " in out.err and DOWN in out.err


# -- 3. a workdir that is a file ----------------------------------------------------------------
def test_judge_and_monitor_refuse_a_workdir_that_is_a_file_with_exit_2(tmp_path, prompt, monkeypatch):
    _scripted(monkeypatch, _answer)
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    records = _write(tmp_path / "o.jsonl", _records())
    r = runner.invoke(app, ["judge", "--prompt", str(prompt), "--input", str(records), "--workdir", str(afile)])
    assert r.exit_code == 2 and "is not a directory" in r.output and "afile" in r.output, r.output
    assert isinstance(r.exception, SystemExit), r.exception  # an exit, not a traceback
    r = runner.invoke(app, ["monitor", "--prompt", str(prompt), "--outcomes", str(records), "--windows", "1",
                            "--baseline-pi", "0.5", "--no-tracking", "--workdir", str(afile)])
    assert r.exit_code == 2 and "is not a directory" in r.output and "afile" in r.output, r.output
    assert afile.read_text() == "not a directory"


# -- 4. records without a label are judged; calibrate and monitor still need labels -------------
def test_judge_reads_records_without_a_label_monitor_still_needs_one(tmp_path, prompt, monkeypatch):
    _scripted(monkeypatch, _answer)
    rows = [{k: v for k, v in r.items() if k != "label"} for r in _records(2)]
    jsonl = _write(tmp_path / "new.jsonl", rows)
    csv_file = tmp_path / "new.csv"
    csv_file.write_text("id,diff\nr0,+ x = 0\nr1,+ y = eval(s1)\n")
    for path in (jsonl, csv_file):
        r = _judge(tmp_path, prompt, path)
        assert r.exit_code == 0, r.output
        got = [json.loads(line) for line in r.stdout.splitlines()]
        assert [(g["verdict"], g["label"]) for g in got] == [("PASS", None), ("FAIL", None)]

    rows = _records()  # monitor (as calibrate) scores against labels: one without is refused
    del rows[2]["label"]
    r = _monitor(tmp_path, prompt, "--outcomes", str(_write(tmp_path / "o.jsonl", rows)), "--no-tracking")
    assert r.exit_code == 2 and "o.jsonl:3" in r.output and "'label'" in r.output, r.output


# -- 5. CSV rows are never padded, a quote never swallows the file ------------------------------
@pytest.mark.parametrize("body, line, words", [
    ("a,PASS,t,d,p\nb,FAIL,t2\n", 3, "row has 3 cells, header has 5"),
    ('a,PASS,t,d,p\nb,FAIL,"t2,d2,p2\nc,PASS,t3,d3,p3\n', 3, "quoted cell is never closed"),
])
def test_csv_with_a_short_row_or_an_unclosed_quote_exits_2_naming_file_and_line(tmp_path, prompt, monkeypatch,
                                                                               body, line, words):
    _scripted(monkeypatch, _answer)
    path = tmp_path / "bad.csv"
    path.write_text("id,label,title,diff,test_plan\n" + body)
    r = _judge(tmp_path, prompt, path)
    assert r.exit_code == 2 and f"bad.csv:{line}" in r.output and words in r.output, r.output
    assert r.stdout.strip() == "", "no verdict row for a refused file"


# -- 6. judge runs a prompt as the kind it was registered with ----------------------------------
RUBRIC = "Judge the diff.\n- [w=1] safe: the diff evaluates no string (no `eval(`)"


def _rubric_or_passfail(messages):
    """A rubric judge scores `safe` 0 on eval( diffs (FAIL); a pass/fail judge says PASS to everything."""
    system, user = messages[0]["content"], messages[-1]["content"]
    if "check_scores" in system:
        return json_answer(reasoning="scored", check_scores={"safe": 0.0 if "eval(" in user else 1.0})
    return json_answer(reasoning="looks fine", verdict="PASS")


@pytest.fixture
def rubric_champion(tmp_path) -> str:
    from verifirst.tracking import Tracker

    tr = Tracker(tmp_path / "wd", offline=True, autolog=False)
    uri = tr.register_prompt("rubric-judge", RUBRIC, tags={"judge": "rubric", "threshold": "0.5", "val_pi": "0.5"})
    tr.client.set_prompt_alias("rubric-judge", "champion", int(uri.rsplit("/", 1)[1]))
    return "prompts:/rubric-judge@champion"


def test_judge_runs_a_registered_rubric_prompt_as_rubric_and_refuses_a_conflicting_kind(tmp_path, rubric_champion,
                                                                                        monkeypatch):
    from verifirst.judge.apply import apply_judge
    from verifirst.core.errors import InputError

    _scripted(monkeypatch, _rubric_or_passfail)
    records = _write(tmp_path / "two.jsonl", _records(2))
    rows = apply_judge(rubric_champion, records, workdir=tmp_path / "wd")
    assert [r["verdict"] for r in rows] == ["PASS", "FAIL"], "scored by its rubric, at its threshold"
    with pytest.raises(InputError, match=r"calibrated as a rubric judge.*--kind rubric") as e:
        apply_judge(rubric_champion, records, "passfail", workdir=tmp_path / "wd")
    assert e.value.field == "--kind"

    r = _judge(tmp_path, rubric_champion, records)  # the CLI: no --kind is the prompt's own kind
    assert r.exit_code == 0, r.output
    assert [json.loads(line)["verdict"] for line in r.stdout.splitlines() if line.startswith("{")] == ["PASS", "FAIL"]
    r = _judge(tmp_path, rubric_champion, records, "--kind", "passfail")
    assert r.exit_code == 2 and "--kind" in r.output

    import verifirst as vf  # monitor follows the same rule

    with pytest.raises(InputError, match="calibrated as a rubric judge"):
        vf.monitor(rubric_champion, records, windows=1, kind="passfail", workdir=tmp_path / "wd",
                   models={"judge": scripted_lm(_rubric_or_passfail, role="judge")})


# -- 7. refused input writes no MLflow store ----------------------------------------------------
def test_a_prompt_or_experiment_asked_of_a_store_that_does_not_exist_is_refused_without_creating_it(
        tmp_path, prompt, monkeypatch):
    _scripted(monkeypatch, _answer)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    records = _write(tmp_path / "o.jsonl", _records())
    new = tmp_path / "NEW"
    r = runner.invoke(app, ["judge", "--prompt", "prompts:/nosuch@champion", "--input", str(records),
                            "--workdir", str(new)])
    assert r.exit_code == 2 and "nosuch" in r.output and "--prompt" in r.output, r.output
    r = runner.invoke(app, ["calibrate", "--from-mlflow", "x", "--dry-run", "--workdir", str(new)])
    assert r.exit_code == 2 and "'x'" in r.output and "--from-mlflow" in r.output, r.output
    r = runner.invoke(app, ["monitor", "--prompt", str(prompt), "--from-mlflow", "x", "--baseline-pi", "0.5",
                            "--no-tracking", "--workdir", str(new)])
    assert r.exit_code == 2 and "'x'" in r.output, r.output
    assert not new.exists(), sorted(p.name for p in new.rglob("*"))


# -- 8. flags that would be silently ignored are refused ----------------------------------------
def test_flags_that_would_be_ignored_are_refused_with_exit_2_before_anything_is_written(tmp_path, prompt,
                                                                                      monkeypatch):
    _scripted(monkeypatch, _answer)
    records = _write(tmp_path / "o.jsonl", _records())
    wd = tmp_path / "wd"
    both = ["--outcomes", str(records), "--from-mlflow", "prod-app", "--workdir", str(wd)]
    r = runner.invoke(app, ["calibrate", *both, "--dry-run"])
    assert r.exit_code == 2 and "--outcomes" in r.output and "--from-mlflow" in r.output, r.output
    r = runner.invoke(app, ["monitor", "--prompt", str(prompt), "--baseline-pi", "0.5", *both])
    assert r.exit_code == 2 and "--outcomes" in r.output and "--from-mlflow" in r.output, r.output
    r = runner.invoke(app, ["calibrate", "--outcomes", str(records), "--snippets", "3", "--dry-run",
                            "--workdir", str(wd)])
    assert r.exit_code == 2 and "--snippets" in r.output and "ICE-Score" in r.output, r.output
    r = runner.invoke(app, ["judge", "--prompt", str(prompt), "--input", str(records), "--threshold", "0.7",
                            "--workdir", str(wd)])
    assert r.exit_code == 2 and "--threshold" in r.output and "rubric" in r.output, r.output
    assert r.stdout.strip() == "" and not wd.exists()
