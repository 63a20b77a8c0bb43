"""Fail-fast in the judge verbs (issue 38), as `verifirst run` has it: an endpoint that always fails
stops `judge`, `monitor` (judge and teacher) and the baseline's scoring after the first calls, with one
clear message, instead of one request per record. Records not asked say why (verdict null, never a
verdict); an endpoint that answers some calls is asked for every record."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from verifirst.cli import app
from verifirst.lm.testing import scripted_lm
from test_judge_failures import DOWN, PROMPT, _answer, _records, _write

runner = CliRunner()
N = 40


def _counting(monkeypatch, fn):
    import verifirst.judge.apply as apply
    import verifirst.judge.monitoring as mon

    calls = []

    def counted(messages):
        calls.append(messages)
        return fn(messages)

    def make(spec, role="task", **kw):
        return scripted_lm(counted, role=role, name=f"failfast-{role}")

    monkeypatch.setattr(apply, "make_lm", make)
    monkeypatch.setattr(mon, "make_lm", make)
    return calls


def _down(messages):
    raise ConnectionError(DOWN)


def test_judge_against_a_dead_endpoint_stops_after_the_first_calls(tmp_path, monkeypatch):
    calls = _counting(monkeypatch, _down)
    (tmp_path / "judge.md").write_text(PROMPT)
    r = runner.invoke(app, ["judge", "--prompt", str(tmp_path / "judge.md"), "--input",
                            str(_write(tmp_path / "o.jsonl", _records(N))), "--workdir", str(tmp_path / "wd")])
    assert r.exit_code == 1, r.output
    assert 0 < len(calls) <= 5 * 3, f"{len(calls)} requests for {N} records against a dead endpoint"
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == N and all(row["verdict"] is None for row in rows)
    assert sum("not sent: the first 5 calls all failed" in row["error"] for row in rows) == N - 5
    assert DOWN in r.output and "judged 0 of 40" in r.output


def test_monitor_against_a_dead_endpoint_stops_the_judge_and_the_teacher_early(tmp_path, monkeypatch):
    calls = _counting(monkeypatch, _down)
    (tmp_path / "judge.md").write_text(PROMPT)
    r = runner.invoke(app, ["monitor", "--prompt", str(tmp_path / "judge.md"), "--windows", "1",
                            "--baseline-pi", "0.5", "--workdir", str(tmp_path / "wd"), "--no-tracking", "--json",
                            "--outcomes", str(_write(tmp_path / "o.jsonl", _records(N)))])
    assert r.exit_code == 1, r.output
    assert 0 < len(calls) <= 2 * 5 * 3, f"{len(calls)} requests for {N} records (judge and teacher)"
    rep = json.loads(r.stdout)
    assert rep["lm_failure"] and rep["windows"][0]["judged"] == 0 and DOWN in rep["lm_failure"]["first_error"]


def test_an_endpoint_that_answers_some_calls_is_asked_for_every_record(tmp_path, monkeypatch):
    def flaky(messages):
        if "eval(s1)" in messages[-1]["content"] or "x = 0" in messages[-1]["content"]:
            raise ConnectionError(DOWN)
        return _answer(messages)

    _counting(monkeypatch, flaky)
    (tmp_path / "judge.md").write_text(PROMPT)
    r = runner.invoke(app, ["judge", "--prompt", str(tmp_path / "judge.md"), "--input",
                            str(_write(tmp_path / "o.jsonl", _records(12))), "--workdir", str(tmp_path / "wd")])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert sum(row["verdict"] is not None for row in rows) == 10
    assert not any("not sent" in (row["error"] or "") for row in rows)


def test_the_baseline_prompt_is_scored_with_fail_fast(tmp_path):
    """calibrate --baseline: the deployed prompt's scoring (its own judge calls) stops at a dead endpoint."""
    from verifirst.core.task import Item
    from verifirst.judge.prompts import score_prompt

    calls = []

    def down(messages):
        calls.append(1)
        raise ConnectionError(DOWN)

    items = [Item(f"i{k}", {"diff": f"+ x = {k}"}, {"label": "PASS"}) for k in range(N)]
    out = score_prompt("passfail", ["diff"], PROMPT, None, items, scripted_lm(down, role="judge", name="down"), 1)
    assert set(out.values()) == {None} and len(out) == N
    assert 0 < len(calls) <= 5 * 3
