"""Sandbox.run_pair runs gold and candidate at once only where runs are isolated from each other
(a cgroup and a tmpfs of their own, and vf-sandbox, which caps per-uid counts per run); else the
gold runs to its end before the candidate starts, so a candidate cannot starve its gold (fill the
shared scratch, hog the CPU, hold the uid's inotify instances) or measure it (free space,
inodes). The red-team suite (tests/redteam/test_starve.py) holds the attacks; these pin the order."""
from __future__ import annotations

import os

import pytest

from verifirst.verifiers.bash import _cgroup, fixtures, sandbox
from verifirst.verifiers.bash.sandbox import Sandbox, SandboxUnavailable, _drive, _Job

pytestmark = pytest.mark.security


@pytest.fixture
def drives(monkeypatch):
    """The commands of each _drive call, in order: one call with both commands is a concurrent pair."""
    seen: list[list[str]] = []
    real = sandbox._drive

    def spy(jobs):
        seen.append([j.command for j in jobs])
        return real(jobs)

    monkeypatch.setattr(sandbox, "_drive", spy)
    return seen


def _sandbox(monkeypatch, launcher: str | None = None) -> Sandbox:
    if launcher:
        monkeypatch.setenv("VERIFIRST_SANDBOX_LAUNCHER", launcher)
    try:
        return Sandbox(timeout_s=5)
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox here: {exc}")


def test_without_cgroups_the_gold_ends_before_the_candidate_starts(monkeypatch, drives):
    sb = _sandbox(monkeypatch)
    monkeypatch.setattr(_cgroup, "available", lambda: False)
    drives.clear()
    g, c = sb.run_pair("echo gold", "echo cand")
    assert (g.stdout, c.stdout) == ("gold\n", "cand\n")
    assert drives == [["echo gold"], ["echo cand"]]


def test_under_bubblewrap_the_gold_ends_before_the_candidate_starts(monkeypatch, drives):
    sb = _sandbox(monkeypatch, "bwrap")
    assert sb._bwrap.kind == "bwrap"
    drives.clear()
    g, c = sb.run_pair("echo gold", "echo cand")
    assert (g.stdout, c.stdout) == ("gold\n", "cand\n")
    assert drives == [["echo gold"], ["echo cand"]]


def test_isolated_runs_and_unsafe_local_run_at_once(monkeypatch, drives):
    sb = _sandbox(monkeypatch)
    probe = _Job(sb, "true", fixtures.resolve("empty"))  # as root: a cgroup and a tmpfs of its own?
    isolated = probe.cgroup is not None and probe.private and sb._bwrap.kind == "vf-sandbox"
    _drive([probe])
    probe.finish()
    assert isolated or os.geteuid() != 0 or not _cgroup.available(), "root with cgroups: runs are isolated"
    drives.clear()
    sb.run_pair("echo gold", "echo cand")
    assert drives == ([["echo gold", "echo cand"]] if isolated else [["echo gold"], ["echo cand"]])
    drives.clear()
    g, c = Sandbox(timeout_s=5, unsafe_local=True).run_pair("echo gold", "echo cand")
    assert (g.stdout, c.stdout, drives) == ("gold\n", "cand\n", [["echo gold", "echo cand"]])
