"""memory_mb holds for the whole run where no memory cgroup can be made (unprivileged, nothing
delegated): RLIMIT_AS is the kernel's per process, so the harness sums the private memory of the
run's processes and kills the run once it is past the limit."""
from __future__ import annotations

import pytest

from verifirst.verifiers.bash import _cgroup
from verifirst.verifiers.bash.sandbox import Sandbox

HOLD = ("for i in 1 2 3; do python3 -c 'import time; x = b\"\\1\" * (60 << 20); time.sleep(3)' & done; "
        "wait; echo survived")


@pytest.fixture(params=["default", "bwrap"])
def no_cgroups(request, monkeypatch):
    if request.param == "bwrap":
        monkeypatch.setenv("VERIFIRST_SANDBOX_LAUNCHER", "bwrap")
    monkeypatch.setattr(_cgroup, "available", lambda: False)
    return request.param


def test_three_processes_of_60_mb_under_96_end_the_run_as_a_memory_limit(no_cgroups):
    r = Sandbox(timeout_s=10, memory_mb=96).run(HOLD)
    assert "survived" not in r.stdout and (r.signal, r.timed_out) == (9, False), r
    assert r.limits_hit == ["memory"]


def test_one_process_of_60_mb_under_96_runs_to_its_end(no_cgroups):
    r = Sandbox(timeout_s=10, memory_mb=96).run(HOLD.replace("1 2 3", "1"))
    assert (r.stdout, r.exit_code, r.limits_hit) == ("survived\n", 0, [])
