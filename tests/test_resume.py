"""kill -9 in the middle of a run, then the same command with the same run directory.

tests/_resume_worker.py runs an experiment with slow, uncached, deterministic scripted LMs and
logs every LM and verifier call. We SIGKILL it once the run directory shows progress, run it
again to the end, and compare with an uninterrupted run: the report must be the same, and the
calls made by the two halves together may exceed the uninterrupted run's by one iteration at most.
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

WORKER = Path(__file__).resolve().parent / "_resume_worker.py"
REPO = WORKER.parents[1]


def _start(mode: str, base: Path, tag: str, run_tag: str | None = None) -> tuple[subprocess.Popen, Path, Path]:
    """A worker logging to <tag>.log, in run dir and workdir named by run_tag (default: tag)."""
    run_dir, workdir = base / f"run-{run_tag or tag}", base / f"wd-{run_tag or tag}"
    logfile = base / f"{tag}.log"
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", RESUME_LATENCY_S="0.03")
    proc = subprocess.Popen([sys.executable, str(WORKER), mode, str(run_dir), str(workdir), str(logfile)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, run_dir, logfile


def _finish(proc: subprocess.Popen, timeout: float = 120) -> None:
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]


def _calls(logfile: Path) -> Counter:
    return Counter(logfile.read_text().splitlines()) if logfile.exists() else Counter()


def _kill_when(proc: subprocess.Popen, ready, timeout: float = 90) -> None:
    t0 = time.time()
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"worker ended before it could be killed: {proc.stderr.read()[-2000:]}")
        if time.time() - t0 > timeout:
            proc.kill()
            pytest.fail("no progress seen in the run directory")
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def _result(run_dir: Path) -> dict:
    return json.loads((run_dir / "worker_result.json").read_text())


def _interrupted_and_reference(mode: str, base: Path, ready) -> tuple[dict, dict, Counter, Counter, Counter, Path]:
    """Start the reference run and the run to kill side by side (2 cores); kill, then resume."""
    ref, ref_dir, ref_log = _start(mode, base, "ref")
    victim, run_dir, log1 = _start(mode, base, "killed")
    _kill_when(victim, lambda: ready(run_dir, _calls(log1)))
    killed_calls = _calls(log1)
    assert not (run_dir / "worker_result.json").exists()
    resumed, _, log2 = _start(mode, base, "resumed", run_tag="killed")
    _finish(resumed)
    _finish(ref)
    return _result(ref_dir), _result(run_dir), killed_calls, _calls(log2), _calls(ref_log), run_dir


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_plain_evaluation_resumes_from_its_checkpoint(tmp_path):
    ckpt = "eval/before_train.jsonl"
    ref, res, killed, resumed, full, run_dir = _interrupted_and_reference(
        "eval", tmp_path, lambda rd, calls: _lines(rd / ckpt) >= 5)
    assert res == ref
    n = sum(v["n"] for v in ref["splits"].values())
    assert full["metric"] == n
    # every item verified once, plus at most the one in flight when the kill came
    assert killed["metric"] >= 5 and killed["metric"] + resumed["metric"] <= n + 1
    assert killed["lm task"] + resumed["lm task"] <= full["lm task"] + 1


# One GEPA iteration at most: parent and child on a minibatch (3 + 3), a full validation pass (4)
# for an accepted child, and one reflection call.
GEPA_ITERATION_TASK_CALLS = 3 + 3 + 4


def test_gepa_resumes_from_its_state_and_chooses_the_same_instruction(tmp_path):
    ref, res, killed, resumed, full, run_dir = _interrupted_and_reference(
        "gepa", tmp_path, lambda rd, calls: (rd / "gepa" / "gepa_state.bin").exists() and calls["lm reflection"] >= 2)
    print("killed", dict(killed), "resumed", dict(resumed), "uninterrupted", dict(full))
    assert res["instructions"] == ref["instructions"] and res["splits"] == ref["splits"]
    assert res["history"] == ref["history"]  # iterations before the kill are reported too
    assert killed["lm reflection"] + resumed["lm reflection"] <= full["lm reflection"] + 1
    assert killed["lm task"] + resumed["lm task"] <= full["lm task"] + GEPA_ITERATION_TASK_CALLS


def test_simba_keeps_the_scored_baseline_and_redoes_its_compile(tmp_path):
    """dspy.SIMBA keeps no checkpoint, so a kill inside compile loses the compile (the limit
    stated in optimizers/simba.py); the before-evaluations in the run dir are not redone."""
    n_before = 16

    def in_compile(rd, calls):
        return _lines(rd / "eval" / "before_test.jsonl") == 4 and calls["lm task"] >= n_before + 20

    ref, res, killed, resumed, full, run_dir = _interrupted_and_reference("simba", tmp_path, in_compile)
    print("killed", dict(killed), "resumed", dict(resumed), "uninterrupted", dict(full))
    assert res == ref
    assert ref["instructions"]["generate"].endswith("Step."), "SIMBA should have appended a rule"
    # exactly the before-evaluations were kept: the resumed run made every other call again
    assert resumed["lm task"] == full["lm task"] - n_before


# One SIMBA step at most: bsize x num_candidates sampled trajectories, then each of the
# num_candidates new programs on the batch.
SIMBA_STEP_TASK_CALLS = 4 * 2 + 2 * 4


def test_simba_with_the_disk_cache_redoes_at_most_one_step_of_lm_work(tmp_path):
    """What a real run does: the recompile after a kill replays SIMBA's seeded sampling, and every
    LM call made before the kill is served by the workdir's DSPy disk cache."""
    n_before = 16

    def after_a_step(rd, calls):
        return calls["lm reflection"] >= 1 and calls["lm task"] >= n_before + SIMBA_STEP_TASK_CALLS + 4

    ref, res, killed, resumed, full, run_dir = _interrupted_and_reference("simba-cached", tmp_path, after_a_step)
    print("killed", dict(killed), "resumed", dict(resumed), "uninterrupted", dict(full))
    assert res == ref
    assert ref["instructions"]["generate"].endswith("Step.")
    assert resumed["lm task"] < full["lm task"] - n_before, "the cache should have served the first step"
    assert killed["lm task"] + resumed["lm task"] <= full["lm task"] + SIMBA_STEP_TASK_CALLS
    assert killed["lm reflection"] + resumed["lm reflection"] <= full["lm reflection"] + 1


def test_autorefine_resumes_from_its_loop_checkpoint(tmp_path):
    state = "autorefine_state.json"

    def mid_loop(rd, calls):
        try:
            return len(json.loads((rd / state).read_text())["iterations"]) >= 2
        except (OSError, ValueError, KeyError):
            return False

    ref, res, killed, resumed, full, run_dir = _interrupted_and_reference("autorefine", tmp_path, mid_loop)
    print("killed", dict(killed), "resumed", dict(resumed), "uninterrupted", dict(full))
    assert res == ref and ref["iterations"] >= 3
    assert killed["lm teacher"] + resumed["lm teacher"] == full["lm teacher"]  # teacher pass kept
    # at most one iteration redone: one judge pass over train + val, one proposal, one rewrite
    n_judged = full["lm judge"] // ref["iterations"] + 1
    assert killed["lm judge"] + resumed["lm judge"] <= full["lm judge"] + n_judged
    assert killed["lm proposer"] + resumed["lm proposer"] <= full["lm proposer"] + 2


def test_checkpoint_line_cut_by_a_kill_is_redone_and_does_not_swallow_the_next(tmp_path):
    import dspy

    from verifirst.loop.evaluation import Scorer, evaluate
    from verifirst.lm import FastJSONAdapter
    from verifirst.programs.bash import BashGenerator
    from verifirst.core.task import Item
    from verifirst.lm.testing import json_answer, scripted_lm
    from verifirst.verifiers.exact import ExactMatch

    items = [Item(id=f"k{i}", inputs={"task": f"t{i}"}, gold={"command": "printf hi"}) for i in range(4)]
    ckpt = tmp_path / "c.jsonl"
    lm = scripted_lm(lambda m: json_answer(command="printf hi"))
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        evaluate(BashGenerator(), items[:2], Scorer(ExactMatch(), "command"), split="val", checkpoint=ckpt,
                 progress=False)
        text = ckpt.read_text()
        ckpt.write_text(text[: len(text) - 25])  # the second row cut mid-line, as by SIGKILL
        r = evaluate(BashGenerator(), items, Scorer(ExactMatch(), "command"), split="val", checkpoint=ckpt,
                     progress=False)
        assert [row.status for row in r.rows] == ["PASS"] * 4
        assert lm.engine.calls == 2 + 3  # first run 2; resume: the cut row and two new ones
        again = evaluate(BashGenerator(), items, Scorer(ExactMatch(), "command"), split="val", checkpoint=ckpt,
                         progress=False)
    assert lm.engine.calls == 5 and again.n_pass == 4, "every row written after the cut must load"


def test_run_dir_of_another_config_is_refused(tmp_path):
    from verifirst import api, config, experiment
    from verifirst.report import html as html_report
    from verifirst.core.errors import VerifirstError
    from verifirst.lm import Models
    from verifirst.lm.testing import json_answer, scripted_lm

    def exp(limit: int):
        return config.from_dict({
            "experiment": {"name": "digest", "workdir": str(tmp_path / "wd")},
            "suite": {"name": "bash-builtin", "limit": limit}, "program": {"name": "bash-generator"},
            "verifier": {"name": "exact"}, "optimizer": {"name": "none"}, "tracking": {"enabled": False}})

    models = Models(task=scripted_lm(lambda m: json_answer(command="ls")))
    html_report_write = html_report.write_html
    try:
        html_report.write_html = lambda *a, **k: None
        api.run(exp(8), run_dir=tmp_path / "run", progress=False, models=models, echo=lambda m: None)
        with pytest.raises(VerifirstError, match="run_state.json"):
            api.run(exp(12), run_dir=tmp_path / "run", progress=False, models=models, echo=lambda m: None)
    finally:
        html_report.write_html = html_report_write
