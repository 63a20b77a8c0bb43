"""Progress without a terminal: a run whose stdout is a pipe or a file (cron, CI, nohup) says, one
line per phase and per tenth of a split, how far it is (counts, elapsed time); quiet under
VERIFIRST_QUIET=1 (what `-q` sets); nothing of the kind on a terminal, where the progress bar draws."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from verifirst.core.callbacks import (EvaluationEnd, EvaluationStart, Iteration, OptimizerEnd, OptimizerStart, RowScored,
                                      RunEnd)
from verifirst.report.console import Console
from verifirst.report.progress import PhaseLines, set_quiet, wanted

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import sys
    import dspy
    import verifirst as vf
    from verifirst.lm.testing import json_answer, scripted_lm

    data = [{"id": f"q{k}", "question": f"what is {k} + {k}?", "answer": str(2 * k)} for k in range(40)]

    def answer(messages):
        k = int(messages[-1]["content"].split("what is ")[1].split(" ")[0])
        return json_answer(answer=str(2 * k) if k % 4 else "0")

    def exact(example, pred, trace=None):
        return float(pred.answer == example.answer)

    vf.evaluate(dspy.Predict("question -> answer"), data, exact, models={"task": scripted_lm(answer)},
                workdir=sys.argv[1], tracking=None, echo=print, ratios=(0.5, 0.25, 0.25))
""")


def run_piped(tmp_path: Path, **env) -> subprocess.CompletedProcess:
    """The script above in a child process whose stdout and stderr are pipes."""
    return subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "w")], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "VERIFIRST_QUIET": "", **env})


def test_a_piped_run_prints_a_line_per_phase_and_per_tenth_of_a_split(tmp_path):
    out = run_piped(tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [ln for ln in out.stdout.splitlines() if re.match(r"\[\s*\d+s\] ", ln)]
    said = [re.sub(r"^\[\s*\d+s\] ", "", ln) for ln in lines]
    for split, n in (("train", 20), ("val", 10), ("test", 10)):
        assert f"before {split}: 0/{n} items" in said
        counts = [s for s in said if re.match(rf"before {split}: \d+/{n} items \(", s)]
        assert len(counts) >= 9 and all(re.search(r"\(\d+ pass", s) for s in counts)  # a tenth each, the last is "done"
        done = [s for s in said if s.startswith(f"before {split}: done, {n} items, ")]
        assert len(done) == 1 and re.search(r"\d+ pass \(\d+ s\)$", done[0])
    assert said[-1] == "run finished"
    assert any(s.startswith("report written: ") for s in said)
    assert "Traceback" not in out.stderr


def test_quiet_prints_no_progress_lines(tmp_path):
    out = run_piped(tmp_path, VERIFIRST_QUIET="1")
    assert out.returncode == 0, out.stderr[-2000:]
    assert not [ln for ln in out.stdout.splitlines() if re.match(r"\[\s*\d+s\] ", ln)]
    assert out.stdout.startswith("suite ")  # what the run is about to do is still said


class Tty:
    def isatty(self):
        return True


class Pipe:
    def isatty(self):
        return False


def test_lines_only_where_no_terminal_and_not_quiet(monkeypatch):
    monkeypatch.delenv("VERIFIRST_QUIET", raising=False)
    assert wanted(Pipe()) and not wanted(Tty())
    set_quiet(True)
    try:
        assert not wanted(Pipe())
    finally:
        set_quiet(False)
    monkeypatch.setenv("VERIFIRST_QUIET", "1")
    assert not wanted(Pipe())
    assert Console(print, lines=False).lines is None


class Row:
    def __init__(self, status):
        self.status = status


class Result:
    def __init__(self, rows):
        self.rows = rows


def test_every_n_items_and_a_heartbeat_on_a_slow_split():
    said, now = [], [0.0]
    p = PhaseLines(said.append, every=3, heartbeat_s=60, clock=lambda: now[0])
    p._sizes = {"val": 7}
    p.on_evaluation_start(EvaluationStart("before", "val"))
    statuses = ["PASS", "FAIL", "ERROR", "PASS", "INCONCLUSIVE", "FAIL", "PASS"]
    for k, s in enumerate(statuses):
        now[0] += 100 if k == 3 else 1  # the fourth item took 100 s: a heartbeat line at it
        p.on_row(RowScored("before", "val", None, Row(s)))
    now[0] += 1
    p.on_evaluation_end(EvaluationEnd("before", "val", Result([Row(s) for s in statuses]), Path(".")))
    p.on_optimizer_start(OptimizerStart("GEPA"))
    p.on_iteration(Iteration({"val_score": 0.5, "metric_calls": 12, "note": "x"}, 1))
    PhaseLines(said.append, iterations=False).on_iteration(Iteration({}, 2))  # calibration prints its own
    p.on_optimizer_end(OptimizerEnd([], {}, failed=True))
    p.on_run_end(RunEnd("KILLED", Path("."), stopped_by="stopped by budget: max_lm_calls 10"))
    assert [re.sub(r"^\[\s*\d+s\] ", "", s) for s in said] == [
        "before val: 0/7 items",
        "before val: 3/7 items (1 pass, 1 no verdict)",
        "before val: 4/7 items (2 pass, 1 no verdict)",  # the heartbeat
        "before val: 6/7 items (2 pass, 2 no verdict)",
        "before val: done, 7 items, 3 pass, 2 no verdict (107 s)",
        "optimize GEPA: started",
        "optimize GEPA: iteration 1 (val_score 0.5, metric_calls 12)",
        "optimize GEPA: failed (0 s)",
        "run killed: stopped by budget: max_lm_calls 10",
    ]
    assert said[4].startswith("[   107s]")


def test_dash_q_turns_the_progress_lines_off(monkeypatch, tmp_path):
    """`verifirst -q VERB` is what a cron line writes: the flag reaches the progress observer."""
    from typer.testing import CliRunner

    from verifirst.cli import app
    from verifirst.report import progress

    monkeypatch.setattr(progress, "_QUIET", [False])
    CliRunner().invoke(app, ["-q", "report", "latest", "--workdir", str(tmp_path / "none")])
    assert progress._QUIET[0] is True
    monkeypatch.setattr(progress, "_QUIET", [False])
    CliRunner().invoke(app, ["report", "latest", "--workdir", str(tmp_path / "none")])
    assert progress._QUIET[0] is False
