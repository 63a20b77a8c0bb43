"""SIGINT, SIGTERM and kill -9 in the middle of `verifirst run` against a fake OpenAI-compatible
endpoint that counts the requests it receives; then the same command resumes the run directory.

Every LM request is journaled before it goes out (RUN_DIR/calls.jsonl), so the resumed run's
usage counts every request of every invocation; SIGINT/SIGTERM stop after the requests in flight
with exit code 130/143 and one line; every MLflow run ends (KILLED), and a resume closes the runs a
kill -9 left RUNNING; --max-lm-calls holds across the kill and the resume.

The suite runs one trial at a random point with a random signal, capped or not (the seed is printed
in a failure, VERIFIRST_SIGNALS_SEED replays it); the 20-per-signal study is
benchmarks/studies/signals_study.py (results in benchmarks/perf/results/signals.json).
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _signals_trial import run_trial  # noqa: E402

# one seed per suite run: xdist's workers share the run's id, so each collects the same sample
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
SEED = int(os.environ.get("VERIFIRST_SIGNALS_SEED") or
           (int(_RUN, 16) % 1_000_000 if _RUN else random.randrange(1_000_000)))
_rng = random.Random(SEED)
# A random sample per suite run: one CLI trial (a run and its resume; the CLI runs dominate the
# suite's time) with a random signal, capped or not. The in-process tests below cover SIGTERM and a
# killed predecessor's MLflow runs every time; the study runs 20 trials of each signal.
SAMPLE = [(_rng.choice(["SIGINT", "SIGTERM", "SIGKILL"]), _rng.choice([None, 8]))]


@pytest.mark.parametrize("sig,cap", SAMPLE)
def test_a_signalled_run_resumes_with_every_request_counted(tmp_path, sig, cap):
    out = run_trial(tmp_path, sig, SEED, cap=cap)
    print(json.dumps(out, indent=1))
    assert out["ok"], f"{out.get('why')} (seed {SEED}; rerun with VERIFIRST_SIGNALS_SEED={SEED})"
    assert out["invocations"] == 2 or out["first_rc"] == 0


# -- in-process: the journal, the meter across invocations, the MLflow runs ---------------------

def _scripted_run(tmp_path, budget=None, tracking=False, lm_fn=None):
    import verifirst as vf
    from verifirst.lm import FastJSONAdapter
    from verifirst.lm.testing import json_answer, scripted_lm
    from verifirst.programs.bash import BashGenerator

    data = [{"task": f"say {i}", "command": "printf hi"} for i in range(8)]
    lm = scripted_lm(lm_fn or (lambda m: json_answer(command="printf hi")))

    def metric(example, pred, trace=None):
        return float(pred.command == example.command)

    return vf.optimize(BashGenerator(), data, metric, None, models={"task": lm}, run_dir=tmp_path / "run",
                       budget=budget, tracking=vf.MLflow(offline=True) if tracking else None,
                       workdir=tmp_path / "wd", inputs=["task"], adapter=FastJSONAdapter())


def test_the_call_journal_counts_every_request_of_every_invocation(tmp_path):
    from verifirst.lm.call_journal import CALLS_FILE, read_journal

    first = _scripted_run(tmp_path)
    journal = read_journal(first.run_dir / CALLS_FILE)
    assert journal.run.requests == first.report["usage_this_run"]["lm_calls"] > 0
    # a kill -9 in flight: an admitted request with no settlement line, and a line cut in half
    with open(first.run_dir / CALLS_FILE, "a") as fh:
        fh.write('{"k":"a","i":"dead","n":1,"r":"task","m":"x","t":50,"u":0}\n{"k":"s","i":"dead","n":1,"r":"ta')
    again = _scripted_run(tmp_path)
    usage = again.report["usage_run_dir"]
    assert usage["requests"] == journal.run.requests and usage["in_flight_at_kill"] == 1
    assert usage["invocations"] == 3


def test_a_call_cap_holds_across_invocations(tmp_path):
    import verifirst as vf
    from verifirst.lm.spend import BudgetExceeded

    sent = []

    def counted(messages):
        from verifirst.lm.testing import json_answer

        sent.append(1)
        return json_answer(command=f"echo {len(sent)}")  # never cached twice: each asks anew

    with pytest.raises(BudgetExceeded):
        _scripted_run(tmp_path, budget=vf.Budget(max_lm_calls=5), lm_fn=counted)
    n_first = len(sent)
    with pytest.raises(BudgetExceeded):  # the same cap: the first invocation's requests count
        _scripted_run(tmp_path, budget=vf.Budget(max_lm_calls=5), lm_fn=counted)
    assert n_first <= 5 and len(sent) == n_first, "a resumed run sent requests past the run's cap"


def test_sigterm_in_process_ends_every_mlflow_run_killed_and_raises_run_interrupted(tmp_path):
    import mlflow

    from verifirst.core.interrupts import RunInterrupted

    calls = []

    def slow(messages):
        from verifirst.lm.testing import json_answer

        calls.append(1)
        if len(calls) == 3:  # the signal comes while a request is in flight
            threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGTERM)).start()
            time.sleep(0.2)
        return json_answer(command="printf hi")

    before = signal.getsignal(signal.SIGTERM)  # an earlier test's library (ray.init) may have set its own
    with pytest.raises(RunInterrupted) as info:
        _scripted_run(tmp_path, tracking=True, lm_fn=slow)
    assert info.value.exit_code == 143 and "interrupted by SIGTERM" in str(info.value)
    assert len(calls) == 3, "no request may start after the signal; the one in flight finishes"
    state = json.loads((tmp_path / "run" / "run_state.json").read_text())
    assert state["status"] == "interrupted" and state["usage_run_dir"]["requests"] == 3
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'wd' / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert runs and {r.info.status for r in runs} == {"KILLED"}
    assert signal.getsignal(signal.SIGTERM) is before  # the run's handlers are gone, what was there is back


def test_a_resume_ends_the_mlflow_runs_a_killed_predecessor_left_running(tmp_path):
    """kill -9 leaves the parent and nested runs RUNNING; a child process plays the killed run."""
    code = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from test_signals import _scripted_run
from pathlib import Path
import verifirst.loop.driver as d
real = d.optimize
def dying(*a, **k):
    cb = k["callback"]
    from verifirst.core.callbacks import EvaluationStart
    cb.on_evaluation_start(EvaluationStart("before", "train"))
    os._exit(9)  # as kill -9: nothing ends
d.optimize = dying
_scripted_run(Path({str(tmp_path)!r}), tracking=True)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr[-2000:]
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'wd' / 'mlflow.db'}")
    ids = [e.experiment_id for e in client.search_experiments()]
    assert {r.info.status for r in client.search_runs(ids)} == {"RUNNING"}
    _scripted_run(tmp_path, tracking=True)
    statuses = sorted((r.data.tags.get("mlflow.runName"), r.info.status) for r in client.search_runs(ids))
    assert "RUNNING" not in {s for _, s in statuses}, statuses
    assert sum(s == "KILLED" for _, s in statuses) == 2  # the dead parent and its nested run


def test_a_run_refused_after_taking_its_fresh_directory_leaves_no_directory(tmp_path):
    """The call journal is opened with the run directory: a run refused before any call (an observer
    failing at the start) removes the empty journal with the directory it created."""
    import verifirst as vf
    from verifirst.core.callbacks import RunCallback
    from verifirst.lm import FastJSONAdapter
    from verifirst.lm.testing import json_answer, scripted_lm
    from verifirst.programs.bash import BashGenerator

    class Refuses(RunCallback):
        def on_run_start(self, event):
            raise RuntimeError("refused at the start")

    with pytest.raises(RuntimeError, match="refused at the start"):
        vf.optimize(BashGenerator(), [{"task": f"t{i}", "command": "ls"} for i in range(6)],
                    lambda ex, pred, trace=None: 1.0, None, models={"task": scripted_lm(lambda m: json_answer(
                        command="ls"))}, workdir=tmp_path / "wd", inputs=["task"], callbacks=[Refuses()],
                    adapter=FastJSONAdapter())
    runs = tmp_path / "wd" / "runs"
    assert not runs.exists() or not list(runs.iterdir())
