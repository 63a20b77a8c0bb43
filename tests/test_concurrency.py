"""Two processes at once: run directories are locked, the MLflow store's first use is serialised.

The subprocess tests run the real CLI (`verifirst run`) through a small driver that swaps in slow
scripted LMs, started side by side on a fresh workdir: two first runs with default run dirs both
finish into one consistent store; two runs on one run dir: one runs, the other is refused naming
the holder's pid; a `kill -9`ed holder leaves no stale lock, and the next run resumes the dir.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import experiment_toml
from verifirst import api
from verifirst.core.errors import VerifirstError
from verifirst.loop.ledger import LEDGER_FILE, TestLedger
from verifirst.loop.rundir import LOCK_FILE, RunDirBusy, lock_run_dir

REPO = Path(__file__).resolve().parents[1]

DRIVER = '''
import os, sys
from verifirst import lm as _lm
from verifirst.lm import Models
from verifirst.lm.testing import json_answer, scripted_lm

LATENCY = float(os.environ.get("CONC_LATENCY_S", "0.2"))

def task(messages):
    return json_answer(command="echo hi")

_lm.make_models = lambda *a, **k: Models(task=scripted_lm(task, name="conc-task", latency_s=LATENCY))
from verifirst.cli import main
main(sys.argv[1:])
'''

EXPERIMENT = experiment_toml("wd", name="conc", models={"task": "local"}, tracking={"traces": False})


def _start(base: Path, *args: str, latency: float = 0.2) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING")}
    env.update(PYTHONPATH=str(REPO), CONC_LATENCY_S=str(latency), LITELLM_LOCAL_MODEL_COST_MAP="True")
    return subprocess.Popen([sys.executable, "driver.py", "run", "exp.toml", *args], cwd=base, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _setup(base: Path) -> None:
    (base / "driver.py").write_text(DRIVER)
    (base / "exp.toml").write_text(EXPERIMENT)


def _wait(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _parent_runs(base: Path) -> list:
    from mlflow import MlflowClient

    uri = f"sqlite:///{base / 'wd' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("conc")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags]


def _checkpoint_lines(run_dir: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in (run_dir / "eval").glob("*.jsonl")) \
        if (run_dir / "eval").exists() else 0


def test_two_first_runs_on_a_fresh_workdir_both_finish_into_one_store(tmp_path):
    """Default run dirs picked in the same second, and one fresh sqlite store migrated by one of them."""
    _setup(tmp_path)
    procs = [_start(tmp_path, latency=0.05) for _ in range(2)]
    results = [_wait(p) for p in procs]
    for rc, out, err in results:
        assert rc == 0, out[-2000:] + err[-3000:]
        assert "Traceback" not in err and "duplicate column" not in err
    dirs = sorted((tmp_path / "wd" / "runs").iterdir())
    assert len(dirs) == 2 and all((d / "report.json").exists() for d in dirs)
    runs = _parent_runs(tmp_path)
    assert sorted(r.data.tags["verifirst.run_dir"] for r in runs) == sorted(str(d.relative_to(tmp_path))
                                                                              for d in dirs)
    assert {r.info.status for r in runs} == {"FINISHED"}


def test_one_run_dir_one_runs_one_refused_then_a_kill_9_leaves_it_resumable(tmp_path):
    _setup(tmp_path)
    run_dir = tmp_path / "rd"
    procs = [_start(tmp_path, "--run-dir", "rd", latency=0.3) for _ in range(2)]
    t0 = time.time()
    while all(p.poll() is None for p in procs):
        assert time.time() - t0 < 90, "neither run ended: the second one was not refused"
        time.sleep(0.05)
    refused = next(p for p in procs if p.poll() is not None)
    holder = next(p for p in procs if p is not refused)
    rc, out, err = _wait(refused)
    assert rc == 2, out[-2000:] + err[-3000:]
    assert f"is in use by process {holder.pid}" in err and "Traceback" not in err
    assert holder.poll() is None, "the holder should still be running"

    t0 = time.time()
    while _checkpoint_lines(run_dir) < 3:
        assert holder.poll() is None and time.time() - t0 < 60, "the holder made no progress"
        time.sleep(0.05)
    holder.send_signal(signal.SIGKILL)
    holder.communicate()
    assert json.loads((run_dir / LOCK_FILE).read_text())["pid"] == holder.pid  # what it wrote stays ...
    lock_run_dir(run_dir).release()  # ... but its lock died with it

    rc, out, err = _wait(_start(tmp_path, "--run-dir", "rd", latency=0.02))
    assert rc == 0, out[-2000:] + err[-3000:]
    assert "(resuming)" in out and (run_dir / "report.json").exists()
    runs = _parent_runs(tmp_path)
    assert len(runs) == 2, "the killed run and the resumed one; the refused run started none"
    # kill -9 cannot end its own run; the resumed run ends the one the killed process left RUNNING as KILLED
    assert sorted(r.info.status for r in runs) == ["FINISHED", "KILLED"]
    entries = TestLedger(tmp_path / "wd" / LEDGER_FILE).entries()
    keys = Counter((e["digest"], e["program"], e["run_dir"], e["what"]) for e in entries)
    assert entries and max(keys.values()) == 1, "the test-reuse ledger counts each evaluation once"
    assert {e["run_dir"] for e in entries} == {str(run_dir)}


def test_a_held_run_dir_refuses_a_second_lock_naming_the_pid(tmp_path):
    held = lock_run_dir(tmp_path / "rd")
    with pytest.raises(RunDirBusy, match=f"in use by process {os.getpid()} on .* since "):
        lock_run_dir(tmp_path / "rd")
    held.release()
    held.release()  # idempotent
    lock_run_dir(tmp_path / "rd").release()


def test_a_refused_run_leaves_no_empty_run_dir_it_created(tmp_path):
    lock_run_dir(tmp_path / "runs" / "new").release()
    assert not (tmp_path / "runs" / "new").exists()
    (tmp_path / "mine").mkdir()
    lock_run_dir(tmp_path / "mine").release()  # the user's own empty directory stays
    assert (tmp_path / "mine").is_dir()
    with lock_run_dir(tmp_path / "used") as hold:
        (hold.path / "run_state.json").write_text("{}")
    assert (tmp_path / "used" / "run_state.json").exists()  # a started run stays, to be resumed


def test_a_run_refused_by_a_late_check_creates_no_run_dir(tmp_path, monkeypatch):
    """The run dir is made (and locked) only after every check: a program that cannot be built
    refuses the run with neither the given run dir nor a default one on disk."""
    from verifirst import config, experiment
    from verifirst.core.errors import ConfigError
    from verifirst.lm import Models
    from verifirst.lm.testing import json_answer, scripted_lm

    def refuse(*a, **k):
        raise ConfigError("program cannot be built", field="program.options")

    monkeypatch.setattr(experiment, "build_program", refuse)
    cfg = {"experiment": {"name": "late", "workdir": str(tmp_path / "wd")},
           "suite": {"name": "bash-builtin", "limit": 8}, "program": {"name": "bash-generator"},
           "verifier": {"name": "exact"}, "splits": {"ratios": [0.5, 0.25, 0.25]}, "optimizer": {"name": "none"},
           "models": {"task": "local"}, "tracking": {"enabled": False}}
    models = Models(task=scripted_lm(lambda m: json_answer(command="echo hi")))
    for run_dir in (tmp_path / "rd", None):
        with pytest.raises(ConfigError, match="cannot be built"):
            api.run(config.from_dict(cfg), run_dir=run_dir, progress=False, models=models, echo=lambda m: None)
    assert not (tmp_path / "rd").exists() and not (tmp_path / "wd" / "runs").exists()


def test_a_default_run_dir_taken_meanwhile_gets_the_next_name(tmp_path):
    (tmp_path / "exp-1").mkdir()
    with lock_run_dir(tmp_path / "exp-1", fresh=True) as hold:
        assert hold.path == tmp_path / "exp-1-2" and hold.created


def test_a_run_dir_that_is_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(VerifirstError, match="exists and is not a directory"):
        lock_run_dir(tmp_path / "f")


def test_vf_optimize_on_a_held_run_dir_is_refused_and_writes_nothing(tmp_path):
    import dspy

    import verifirst as vf
    from verifirst.lm.testing import json_answer, scripted_lm

    class QA(dspy.Signature):
        """Answer the question."""

        question: str = dspy.InputField()
        answer: str = dspy.OutputField()

    def metric(example, pred, trace=None):
        return float(pred.answer == example.answer)

    data = [{"id": f"q{k}", "question": f"q{k}?", "answer": "42"} for k in range(8)]
    lm = scripted_lm(lambda m: json_answer(answer="42"))
    with lock_run_dir(tmp_path / "rd"):
        with pytest.raises(RunDirBusy, match=f"process {os.getpid()}"):
            vf.evaluate(dspy.Predict(QA), data, metric, models={"task": lm}, run_dir=tmp_path / "rd",
                        workdir=tmp_path / "wd")
        assert sorted(p.name for p in (tmp_path / "rd").iterdir()) == [LOCK_FILE]
    res = vf.evaluate(dspy.Predict(QA), data, metric, models={"task": lm}, run_dir=tmp_path / "rd",
                      workdir=tmp_path / "wd")
    test = res.report["splits"]["test"]["after"]
    assert test["pass"] == test["n"] == res.report["sizes"]["test"] > 0


def test_verifirst_calibrate_on_a_held_run_dir_exits_2_before_any_lm_call(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_autorefine import RuleFollowingLM
    from test_calibrate import write_outcomes
    from typer.testing import CliRunner

    from verifirst.judge import calibrate as calibrate_module
    from verifirst.cli import app

    write_outcomes(tmp_path / "outcomes.jsonl")
    lm = RuleFollowingLM()
    monkeypatch.setattr(calibrate_module, "make_lm", lambda *a, **k: lm)
    with lock_run_dir(tmp_path / "rd"):
        r = CliRunner().invoke(app, ["calibrate", "--outcomes", str(tmp_path / "outcomes.jsonl"), "--workdir",
                                     str(tmp_path / "wd"), "--run-dir", str(tmp_path / "rd"), "--max-iters", "1"])
        assert r.exit_code == 2, r.output
        assert f"is in use by process {os.getpid()}" in r.output and "Traceback" not in r.output
        assert sorted(p.name for p in (tmp_path / "rd").iterdir()) == [LOCK_FILE]
    assert lm.calls == [] and not (tmp_path / "wd" / "mlflow.db").exists()


def test_the_ledger_counts_a_run_dir_once_however_it_is_spelled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    led = TestLedger(tmp_path / LEDGER_FILE)
    assert led.record("d", "p", "runs/x", "before") is True
    assert led.record("d", "p", tmp_path / "runs" / "x", "before") is False
    assert led.record("d", "p", "./runs/x/", "before") is False
    assert led.reuse("d", ["p"])["evaluations"] == 1
    assert led.programs_of(tmp_path / "runs" / "x") == led.programs_of("runs/x") == {"p"}
