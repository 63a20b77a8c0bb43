"""Sandbox.run_pair runs gold and candidate at once only where runs are isolated from each other
(a cgroup and a tmpfs of their own, and vf-sandbox, which caps per-uid counts per run); else the
gold runs to its end before the candidate starts, so a candidate cannot starve its gold (fill the
shared scratch, hog the CPU, hold the uid's inotify instances) or measure it (free space,
inodes). The red-team suite (tests/redteam/test_starve.py) holds the attacks; these pin the order."""
from __future__ import annotations

import os
import threading

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


# Items evaluated in parallel threads (FehVerifier under num_threads) each run their own pairs: where runs
# are not isolated, one item's candidate must not run while another item's gold does.
HOLD_INOTIFY = ("python3 -c 'import ctypes, time\nfds = [ctypes.CDLL(None).inotify_init() for _ in range(300)]\n"
                "print(\"HELD\", sum(fd >= 0 for fd in fds), flush=True)\ntime.sleep(4)'")
GOLD_INOTIFY = ("sleep 1.5; python3 -c 'import ctypes; print(\"INOTIFY\", \"ok\" if "
                "ctypes.CDLL(None).inotify_init() >= 0 else \"fail\")'")


def _in_flight(monkeypatch) -> tuple[list[int], threading.Event]:
    """The most runs being driven at once, over all threads (a list of one, updated); and an event
    set once HOLD_INOTIFY is driven."""
    most, now, lock, held = [0], set(), threading.Lock(), threading.Event()
    real = sandbox._drive

    def spy(jobs):
        with lock:
            now.update(map(id, jobs))
            most[0] = max(most[0], len(now))
        if any(j.command == HOLD_INOTIFY for j in jobs):
            held.set()
        try:
            return real(jobs)
        finally:
            with lock:
                now.difference_update(map(id, jobs))

    monkeypatch.setattr(sandbox, "_drive", spy)
    return most, held


@pytest.mark.parametrize("launcher", ["bwrap", "no-cgroups"])
def test_items_in_parallel_threads_take_turns_where_runs_are_not_isolated(monkeypatch, launcher):
    """Item B's candidate holds every inotify instance of the sandbox's uid; item A's gold, started
    in another thread while B's candidate runs, still gets one: it waits for B's run to end."""
    sb = _sandbox(monkeypatch, "bwrap" if launcher == "bwrap" else None)
    if launcher == "no-cgroups":
        monkeypatch.setattr(_cgroup, "available", lambda: False)
    sb.timeout_s = 10.0
    most, held = _in_flight(monkeypatch)
    item_b: list = []
    t = threading.Thread(target=lambda: item_b.extend(sb.run_pair("true", HOLD_INOTIFY)))
    t.start()
    try:
        assert held.wait(60), "item B's candidate never started"
        gold_a, cand_a = sb.run_pair(GOLD_INOTIFY, "true")
    finally:
        t.join()
    assert "HELD" in item_b[1].stdout, item_b[1].stderr
    assert gold_a.stdout.strip() == "INOTIFY ok", (gold_a.stdout, gold_a.stderr, item_b[1].stdout)
    assert most[0] == 1


def test_isolated_runs_of_parallel_threads_still_run_at_once(monkeypatch):
    sb = _sandbox(monkeypatch)
    probe = _Job(sb, "true", fixtures.resolve("empty"))
    isolated = not probe.queued
    _drive([probe])
    probe.finish()
    if not isolated:
        pytest.skip("runs are not isolated here (no cgroups or no tmpfs per run): they take turns")
    most, _ = _in_flight(monkeypatch)
    start = threading.Barrier(2)
    threads = [threading.Thread(target=lambda: (start.wait(), sb.run_pair("sleep 1", "sleep 1"))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 4
