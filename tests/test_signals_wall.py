"""The run's wall cap (max_wall_s) holds while a metric or verifier runs, not only before LM calls:
a metric still running at the cap is stopped, the run ends naming the cap, and the item it was
scoring gets no verdict (no row: never a FAIL), so a resume scores it again."""
from __future__ import annotations

import json
import threading

import pytest


def _run(tmp_path, metric, budget):
    import verifirst as vf
    from verifirst.lm import FastJSONAdapter
    from verifirst.lm.testing import json_answer, scripted_lm
    from verifirst.programs.bash import BashGenerator

    data = [{"task": f"say {i}", "command": "printf hi"} for i in range(8)]
    lm = scripted_lm(lambda m: json_answer(command="printf hi"))
    return vf.optimize(BashGenerator(), data, metric, None, models={"task": lm}, run_dir=tmp_path / "run",
                       budget=budget, workdir=tmp_path / "wd", inputs=["task"], adapter=FastJSONAdapter())


def _rows(run_dir):
    out = []
    for f in sorted((run_dir / "eval").glob("*.jsonl")):
        out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return out


def test_a_metric_running_past_the_wall_cap_stops_the_run_and_its_item_has_no_verdict(tmp_path):
    import verifirst as vf
    from verifirst.lm.spend import BudgetExceeded

    release = threading.Event()
    calls = []

    def slow_metric(example, pred, trace=None):
        calls.append(example.task)
        if len(calls) >= 3:  # the third item's metric hangs (released when the test ends)
            release.wait(120)
        return float(pred.command == example.command)

    try:
        with pytest.raises(BudgetExceeded) as info:
            _run(tmp_path, slow_metric, vf.Budget(max_wall_s=3))
    finally:
        release.set()
    msg = str(info.value)
    assert "max_wall_s 3 for the run reached while the metric" in msg and "no verdict" in msg
    rows = _rows(tmp_path / "run")
    assert len(rows) == 2 and all(r["status"] == "PASS" for r in rows), "the stopped item must have no row"
    assert calls[2] not in {r["id"] for r in rows}
    state = json.loads((tmp_path / "run" / "run_state.json").read_text())
    assert state["status"] == "stopped" and "max_wall_s" in state["stopped_by"]


def test_a_verifier_under_the_wall_cap_keeps_its_verdicts(tmp_path):
    """A cap far away changes nothing: every item is scored, in the verifier's own thread context."""
    import verifirst as vf

    def metric(example, pred, trace=None):
        return float(pred.command == example.command)

    res = _run(tmp_path, metric, vf.Budget(max_wall_s=600))
    assert not res.report.get("stopped")
    assert all(r["status"] == "PASS" for r in _rows(tmp_path / "run"))


def test_a_metric_stopped_at_the_wall_cap_no_longer_runs(tmp_path):
    """Past the cap the metric is cancelled, not left running unwaited: a metric that writes to a file
    every 50 ms (and catches Exception) has stopped writing once the run has returned."""
    import time

    import verifirst as vf
    from verifirst.lm.spend import BudgetExceeded

    log = tmp_path / "metric.log"
    calls = []

    def writing_metric(example, pred, trace=None):
        calls.append(example.task)
        if len(calls) < 3:
            return float(pred.command == example.command)
        while True:  # the third item's metric never ends by itself
            try:
                with log.open("a") as f:
                    f.write("tick\n")
                time.sleep(0.05)
            except Exception:  # noqa: BLE001 - a metric that swallows its errors is still stopped
                pass

    with pytest.raises(BudgetExceeded):
        _run(tmp_path, writing_metric, vf.Budget(max_wall_s=2))
    assert not [t for t in threading.enumerate() if t.name == "verifirst-metric" and t.is_alive()]
    size = log.stat().st_size
    assert size > 0
    time.sleep(0.3)  # six of its periods: a metric still running would have written again
    assert log.stat().st_size == size
