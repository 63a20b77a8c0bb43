"""Recalibration against what is deployed (`--baseline`): a judge × window table.

A scripted workflow evolves at a known date: before 2024-01-08 only diffs calling `eval(` fail;
from then on diffs calling `os.system(` fail too. The deployed judge (the baseline prompt file)
encodes the old rule. The time split trains on the oldest two weeks (one week either side of the
change), validates on the third and tests on the newest; windows of 7 days. The calibrated judge
learns both rules, so the table shows the baseline ahead on the old window and the calibrated
judge ahead on the current (test) window and the other windows after the change — the AutoRefine
paper's recalibration table. A bad --baseline is refused, naming it, before any LM call.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifirst.core.errors import InputError
from verifirst.lm.testing import scripted_lm

from test_behaviour_unchanged import _judge_answer

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
CHANGE = T0 + timedelta(days=7)  # the agent evolves: os.system( starts to fail from here on
OLD, NEW = "eval(", "os.system("
OLD_JUDGE = f"Review the change. FAIL if the diff contains `{OLD}`. Otherwise PASS."
SPLITS = {"ratios": (0.5, 0.25, 0.25), "by": "time", "time_field": "created_at", "windows": "7d"}


# One scripted LM in every calibration role, acting on what its prompt says (examples/api_calibrate.py's,
# whose hazards include eval( and os.system(): the judge applies the `FAIL if the diff contains X` rules in
# its instructions, the teacher names the hazard in a failed diff, the proposer turns disagreements into
# rules, the applier appends them.
answer = _judge_answer


def write_workflow(path: Path, days: int = 28) -> list[dict]:
    """Three changes a day (one clean, one calling eval(, one calling os.system(), labelled by the
    rule in force on their day."""
    bodies = {"clean": "+    return sorted(xs)", "old": f"+    return {OLD}s)", "new": f"+    {NEW}cmd)"}
    recs = []
    for d in range(days):
        for k, kind in enumerate(("clean", "old", "new")):
            t = T0 + timedelta(days=d, hours=3 * k + 1)
            fails = kind == "old" or (kind == "new" and t >= CHANGE)
            recs.append({"id": f"d{d:02d}-{kind}", "label": "FAIL" if fails else "PASS",
                         "title": f"change {d}-{k}", "diff": bodies[kind], "created_at": t.isoformat()})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return recs


def lm_counting():
    calls = []

    def fn(messages):
        calls.append(messages)
        return answer(messages)

    return scripted_lm(fn, role="judge", name="evolving-judge"), calls


def test_baseline_table_shows_the_old_judge_ahead_on_old_windows_and_the_calibrated_ahead_now(tmp_path):
    import verifirst as vf
    from verifirst.judge.printing import print_calibration

    src = tmp_path / "outcomes.jsonl"
    recs = write_workflow(src)
    (tmp_path / "deployed.md").write_text(OLD_JUDGE + "\n")
    lm, calls = lm_counting()
    res = vf.calibrate(src, models={"judge": lm}, max_iters=3, splits=SPLITS, workdir=tmp_path / "wd",
                       run_dir=tmp_path / "run", baseline=tmp_path / "deployed.md")
    rep, m = res.report, res.manifest
    times = {r["id"]: datetime.fromisoformat(r["created_at"]) for r in recs}
    assert min(times[i] for i in m.train) < CHANGE <= max(times[i] for i in m.train), \
        "the split trains across the change: the old workflow and a week of the new one"
    assert all(times[i] >= CHANGE for i in m.val + m.test)
    assert f"FAIL if the diff contains `{NEW}`" in rep["judge"]["calibrated_prompt"]

    b = rep["baseline"]
    assert b["source"] == str(tmp_path / "deployed.md") and b["judges"] == ["baseline", "uncalibrated", "calibrated"]
    cols = b["columns"]
    # the current test window first, then the older windows newest first (train/val items of each)
    assert [c["current"] for c in cols] == [True, False, False, False]
    assert cols[0]["window"] == "test" and cols[0]["n_items"] == len(m.test) == 21
    assert [(c["n_train"], c["n_val"]) for c in cols[1:]] == [(0, 21), (21, 0), (21, 0)]
    assert cols[-1]["start"] == "2024-01-01T01:00:00Z" and cols[-1]["end"] == "2024-01-08T01:00:00Z"
    old, current = cols[-1], cols[0]
    assert old["ahead"] == "baseline" and current["ahead"] == "calibrated"
    assert [c["ahead"] for c in cols] == ["calibrated", "calibrated", "calibrated", "baseline"]
    # the numbers: the baseline is the old rule exactly; the calibrated judge fails os.system( everywhere
    assert old["judges"]["baseline"]["pi"] == pytest.approx(1.0)
    assert current["judges"]["calibrated"]["pi"] == pytest.approx(1.0)
    assert old["judges"]["calibrated"]["pi"] < 0.5 and current["judges"]["baseline"]["pi"] < 0.5
    for c in cols:
        assert c["n_scored"] == 21 and set(c["judges"]) == {"baseline", "uncalibrated", "calibrated"}
        assert c["judges"]["uncalibrated"]["pi"] < 0, "the default prompt passes everything"
        for j in c["judges"].values():
            lo, hi = j["pi_ci95"]
            assert lo <= j["pi"] + 1e-9 and j["pi"] <= hi + 1e-9 and j["n"] == 21
        v = c["calibrated_vs_baseline"]
        assert v["calibrated_right_baseline_wrong"] == (7 if c["current"] or c is not old else 0)
        assert v["baseline_right_calibrated_wrong"] == (7 if c is old else 0)
        assert v["mcnemar_p"] == pytest.approx(2 * 0.5 ** 7)
        assert (v["pi_delta"] > 0) == (c is not old) and v["pi_ci95"][0] <= v["pi_delta"] <= v["pi_ci95"][1]
    assert b["decides"].startswith("nothing")
    # held out: the baseline's test scoring is in the ledger; nothing was selected on it
    ledger = [json.loads(line) for line in (tmp_path / "wd" / "test_ledger.jsonl").read_text().splitlines()]
    assert any(e["what"] == "baseline" for e in ledger)
    assert rep["judge"]["validation"]["pi"] == pytest.approx(1.0)
    # the table in report.json, report.md and the printed summary
    saved = json.loads((tmp_path / "run" / "report.json").read_text())
    assert saved["baseline"]["columns"][0]["calibrated_vs_baseline"]["pi_delta"] > 0
    md = (tmp_path / "run" / "report.md").read_text()
    assert "Recalibration against the deployed judge" in md and "| baseline (deployed) | " in md
    assert "current: test 2024-01-22T01:00:00Z/2024-01-28T07:00:00Z" in md
    assert "older: 2024-01-01T01:00:00Z/2024-01-08T01:00:00Z (train 21)" in md
    assert "ahead by π (calibrated vs baseline): current (test): calibrated;" in md
    printed = []
    from rich.console import Console
    import verifirst.judge.printing as cal

    con = Console(width=400, record=True)
    cal._print_baseline(rep["baseline"], con)
    text = con.export_text()
    assert "baseline (deployed)" in text and "Δπ calibrated − baseline" in text and "McNemar exact p" in text
    print_calibration(rep, echo=printed.append)  # the whole summary renders with the table in it
    assert calls


def test_without_a_time_split_the_table_has_one_column_the_test_split(tmp_path):
    import verifirst as vf

    src = tmp_path / "outcomes.jsonl"
    write_workflow(src, days=12)
    (tmp_path / "deployed.md").write_text(OLD_JUDGE + "\n")
    lm, calls = lm_counting()
    res = vf.calibrate(src, models={"judge": lm}, max_iters=2, workdir=tmp_path / "wd", run_dir=tmp_path / "run",
                       baseline=str(tmp_path / "deployed.md"))
    cols = res.report["baseline"]["columns"]
    assert len(cols) == 1 and cols[0]["current"] and cols[0]["n_items"] == len(res.manifest.test)
    u = res.report["usage_this_run"]  # the baseline's own judge calls are the run's too
    assert u["lm_calls"] + u["cache_hits"] == len(calls)
    assert json.loads((tmp_path / "run" / "report.json").read_text())["usage_this_run"] == u
    assert "random split: one column" in (tmp_path / "run" / "report.md").read_text()


def test_a_registered_champion_is_a_baseline(tmp_path):
    import verifirst as vf

    src = tmp_path / "outcomes.jsonl"
    write_workflow(src, days=12)
    wd = tmp_path / "wd"
    from verifirst.judge.prompts import _registry_client

    client = _registry_client(wd, None)
    pv = client.register_prompt("change-judge", OLD_JUDGE)
    client.set_prompt_alias("change-judge", "champion", pv.version)
    lm, _ = lm_counting()
    res = vf.calibrate(src, models={"judge": lm}, max_iters=1, workdir=wd, run_dir=tmp_path / "run",
                       splits=SPLITS, baseline="prompts:/change-judge@champion")
    b = res.report["baseline"]
    assert (b["name"], b["version"], b["alias"]) == ("change-judge", 1, "champion")
    assert b["columns"][-1]["judges"]["baseline"]["pi"] == pytest.approx(1.0)


def test_a_bad_baseline_is_refused_naming_it_before_any_lm_call(tmp_path):
    import verifirst as vf
    from verifirst.cli import app

    src = tmp_path / "outcomes.jsonl"
    write_workflow(src, days=6)
    lm, calls = lm_counting()
    missing = tmp_path / "no-such-judge.md"
    with pytest.raises(InputError, match=r"\[--baseline\].*no-such-judge\.md.*not found"):
        vf.calibrate(src, models={"judge": lm}, workdir=tmp_path / "wd", baseline=missing)
    (tmp_path / "templ.md").write_text("FAIL if {{ patch }} is unsafe")
    with pytest.raises(InputError, match=r"\[--baseline\].*templ\.md"):
        vf.calibrate(src, models={"judge": lm}, workdir=tmp_path / "wd", baseline=tmp_path / "templ.md")
    assert calls == [], "refused before any LM call"
    assert not (tmp_path / "wd" / "runs").exists()
    for value, says in ((str(missing), "no-such-judge.md"), ("prompts:/nobody@champion", "'nobody'")):
        res = CliRunner().invoke(app, ["calibrate", "--outcomes", str(src), "--workdir", str(tmp_path / "wd2"),
                                       "--baseline", value, "--offline"])
        out = res.output + (res.stderr if res.stderr_bytes is not None else "")
        assert res.exit_code == 2, out
        assert "[--baseline]" in out and says in out and "Traceback" not in out, out
        assert not (tmp_path / "wd2" / "runs").exists()
