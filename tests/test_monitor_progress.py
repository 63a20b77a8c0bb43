"""`verifirst monitor` written to a file or a pipe (cron) says how far it is, as `run` and `calibrate` do
(verifirst.report.progress.PhaseLines): a line when the judge's and the teacher's passes start, one per
tenth of the records, one when each ends with its counts; `-q` silences them, `--json` prints only JSON."""
from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from test_monitor import _cli, _records, _write, scripted  # noqa: F401  (scripted: a fixture)

LINE = re.compile(r"^\[\s*\d+s\] (judge|teacher) records: ")


def _progress(output: str) -> list[str]:
    return [re.sub(r"^\[\s*\d+s\] ", "", ln) for ln in output.splitlines() if LINE.match(ln)]


def test_monitor_prints_a_line_per_tenth_of_the_records_for_each_pass(tmp_path, scripted, monkeypatch):  # noqa: F811
    from verifirst.report import progress

    monkeypatch.setattr(progress, "_QUIET", [False])  # an earlier `-q` in this process
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)
    path = _write(tmp_path / "o.jsonl", _records(weeks=2))  # 40 records: a line every 4
    r = _cli(tmp_path, "--outcomes", str(path))
    assert r.exit_code == 0, r.output
    lines = _progress(r.output)
    judge = [ln for ln in lines if ln.startswith("judge")]
    teacher = [ln for ln in lines if ln.startswith("teacher")]
    assert judge[0] == "judge records: 0/40 items" and teacher[0] == "teacher records: 0/40 items", lines
    assert [ln.split(":")[1].split("/")[0].strip() for ln in judge[1:-1]] == [str(4 * k) for k in range(1, 10)]
    # the judge said PASS on the 20 clean diffs and FAIL on the 20 eval( ones; every record got a verdict
    assert re.fullmatch(r"judge records: done, 40 items, 20 pass \(\d+ s\)", judge[-1]), judge[-1]
    assert re.fullmatch(r"teacher records: done, 40 items, 0 pass \(\d+ s\)", teacher[-1]), teacher[-1]
    assert lines.index(judge[-1]) < lines.index(teacher[0]), "the teacher's pass follows the judge's"
    assert "DRIFT" not in r.output and "ok" in r.output.lower()  # the table follows, as before


def test_quiet_and_json_monitor_print_no_progress_lines(tmp_path, scripted, monkeypatch):  # noqa: F811
    from verifirst.cli import app
    from verifirst.report import progress

    monkeypatch.setattr(progress, "_QUIET", [False])  # `-q` below sets it for the process: put back after
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)

    path = _write(tmp_path / "o.jsonl", _records(weeks=2))
    r = _cli(tmp_path, "--outcomes", str(path), "--json")
    assert r.exit_code == 0 and not _progress(r.output)
    json.loads(r.output)  # JSON only
    prompt = tmp_path / "judge.md"
    r = CliRunner().invoke(app, ["-q", "monitor", "--prompt", str(prompt), "--windows", "7d", "--baseline-pi", "0.9",
                                 "--workdir", str(tmp_path / "wd"), "--no-tracking", "--outcomes", str(path)])
    assert r.exit_code == 0, r.output
    assert not _progress(r.output) and "monitor:" in r.output


def test_recorded_monitor_teacher_pass_prints_its_lines_too(tmp_path, monkeypatch):
    """--recorded makes no judge call; with --teacher-abstention its teacher pass says how far it is the same way."""
    from test_monitor_recorded import Store, _lm, _recorded, _records, _template
    from verifirst.report import progress

    monkeypatch.setattr(progress, "_QUIET", [False])
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI"):  # as test_monitor_recorded puts them back
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)
    (tmp_path / "template").mkdir()
    store = Store(tmp_path, monkeypatch, _template(tmp_path / "template" / "mlflow.db", serve=True))
    store.outcomes(_records())
    lines: list[str] = []
    rec = _recorded(tmp_path, store, teacher=_lm("teacher"), progress=lines.append)
    assert rec.report["model_calls"] == {"judge": 0, "teacher": 80}
    said = _progress("\n".join(lines))
    assert said[0] == "teacher records: 0/80 items" and not [ln for ln in said if ln.startswith("judge")], said
    assert len(said) == 11 and said[-1].startswith("teacher records: done, 80 items"), said
