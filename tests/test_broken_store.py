"""Broken storage under a run: a full disk (a small tmpfs, mounted here as root) and a workdir
deleted mid-run stop `verifirst run` with one line and exit code 74, no traceback storm (MLflow's
span and tag logging included); a resume after space is freed loses nothing written before. A
corrupt LM cache is moved aside and rebuilt with a one-line warning; a corrupt MLflow store is
refused before any work, named, with what to do."""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fake_endpoint import FakeEndpoint  # noqa: E402
from _signals_trial import _cli, experiment  # noqa: E402

EXIT_STORAGE = 74


def _run_until(base: Path, requests: int, fault) -> tuple[int, str, FakeEndpoint, Path]:
    """`verifirst run` against a counting endpoint; `fault()` once it has seen `requests` requests."""
    fake = FakeEndpoint("hang", hang_s=0.05, lifetime_s=600).start()
    exp, run_dir = base / "exp.toml", base / "wd" / "runs" / "r"
    exp.parent.mkdir(parents=True, exist_ok=True)
    exp.write_text(experiment(base / "wd", fake.base_url))
    proc = _cli(exp, run_dir, None)
    t0 = time.time()
    while fake.requests < requests and proc.poll() is None and time.time() - t0 < 240:
        time.sleep(0.005)
    fault()
    _, err = proc.communicate(timeout=240)
    return proc.returncode, err, fake, run_dir


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err[-4000:]
    return lines[0]


@pytest.fixture
def small_tmpfs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[:200]}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_stops_the_run_with_one_line_and_a_resume_loses_nothing(small_tmpfs):
    filler = small_tmpfs / "filler"

    def fill() -> None:
        with open(filler, "wb") as fh:
            try:
                while True:
                    fh.write(b"\0" * (1 << 16))
                    fh.flush()
            except OSError:
                pass

    rc, err, fake, run_dir = _run_until(small_tmpfs, 3, fill)
    try:
        line = _one_line(err)
        assert rc == EXIT_STORAGE and line.startswith("error: storage failed") and str(run_dir) in line
        kept = {p.name: p.read_bytes() for p in (run_dir / "eval").glob("*.jsonl")}
        filler.unlink()  # space again: the same command resumes
        resumed = _cli(small_tmpfs / "exp.toml", run_dir, None)
        _, err2 = resumed.communicate(timeout=240)
        assert resumed.returncode == 0, err2[-3000:]
        for name, before in kept.items():  # every row written before the disk filled is still there
            whole = before[: before.rfind(b"\n") + 1]  # a line the full disk cut is redone
            assert (run_dir / "eval" / name).read_bytes().startswith(whole)
        state = json.loads((run_dir / "run_state.json").read_text())
        time.sleep(0.05)
        assert state["usage_run_dir"]["requests"] <= fake.requests <= (
            state["usage_run_dir"]["requests"] + state["usage_run_dir"]["in_flight_at_kill"])
    finally:
        fake.stop()


def _rm_rf(path: Path) -> None:
    """What `rm -rf` does to a tree a run is writing into: a file gone meanwhile (sqlite's journal)
    is no error, and it goes on until the tree is gone."""
    for _ in range(50):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
    raise AssertionError(f"{path} was still there after 50 removals")


def test_a_workdir_deleted_mid_run_stops_it_with_one_line(tmp_path):
    rc, err, fake, run_dir = _run_until(tmp_path, 3, lambda: _rm_rf(tmp_path / "wd"))
    fake.stop()
    line = _one_line(err)
    assert rc == EXIT_STORAGE and "was deleted while the run was going" in line and str(run_dir) in line


def test_a_corrupt_lm_cache_is_moved_aside_and_rebuilt_with_one_warning(tmp_path, caplog):
    import dspy

    from verifirst.lm import configure_cache

    cache = tmp_path / "cache"
    configure_cache(cache)
    dspy.cache.put({"q": 1}, "kept")
    shard = sorted(cache.glob("*/cache.db"))[0]
    shard.write_bytes(b"this is not a sqlite database, it is garbage" * 20)
    with caplog.at_level(logging.WARNING, logger="verifirst.lm.cache"):
        configure_cache(cache)  # the run's first step: no 'file is not a database' from here on
    warnings = [r for r in caplog.records if r.name == "verifirst.lm.cache"]
    assert len(warnings) == 1 and "moved aside" in warnings[0].getMessage()
    assert len(warnings[0].getMessage().splitlines()) == 1
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("cache.corrupt-")]
    assert len(aside) == 1 and (aside[0] / shard.relative_to(cache)).exists(), "the corrupt cache is kept aside"
    dspy.cache.put({"q": 2}, "fresh")
    assert dspy.cache.get({"q": 2}) == "fresh"


def test_a_corrupt_mlflow_store_is_named_with_what_to_do_before_any_work(tmp_path):
    import verifirst as vf
    from verifirst.core.interrupts import StorageError
    from verifirst.lm import FastJSONAdapter
    from verifirst.lm.testing import json_answer, scripted_lm
    from verifirst.programs.bash import BashGenerator

    store = tmp_path / "wd" / "mlflow.db"
    store.parent.mkdir()
    store.write_bytes(b"garbage, not sqlite" * 100)
    calls = []
    lm = scripted_lm(lambda m: calls.append(1) or json_answer(command="printf hi"))
    with pytest.raises(StorageError) as info:
        vf.optimize(BashGenerator(), [{"task": f"t{i}", "command": "printf hi"} for i in range(6)],
                    lambda ex, pred, trace=None: 1.0, None, models={"task": lm}, run_dir=tmp_path / "run",
                    tracking=vf.MLflow(offline=True), workdir=tmp_path / "wd", inputs=["task"],
                    adapter=FastJSONAdapter())
    msg = str(info.value)
    assert info.value.exit_code == EXIT_STORAGE
    assert str(store) in msg and "not a readable database" in msg and f"mv {store}" in msg
    assert not calls and not (tmp_path / "run").exists(), "nothing may run or be written"
    assert store.read_bytes() == b"garbage, not sqlite" * 100
