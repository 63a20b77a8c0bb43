"""A run's cgroups are used again only when the run left nothing in them: judged from the memory
cgroup alone (every process of a run joins it first), a group still holding a process is never
handed to the next run."""
from __future__ import annotations

import os
import subprocess

import pytest

from verifirst.verifiers.bash import _cgroup

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not _cgroup.available(), reason="run cgroups: root, a hierarchy")


def test_a_cgroup_still_holding_a_process_is_not_used_again():
    cg = _cgroup.RunCgroup(256 << 20, 32)
    dirs = list(cg.dirs)
    p = subprocess.Popen(["sleep", "30"])
    try:
        (dirs[0] / ("cgroup.procs" if (dirs[0] / "memory.current").exists() else "tasks")).write_text(str(p.pid))
        cg.close()
        assert all(dirs != kept for kept, _, _ in _cgroup._FREE) and dirs[0].exists()  # busy: not removable
    finally:
        p.kill()
        p.wait()
    for d in dirs:
        _cgroup._rmdir(d)
    again = _cgroup.RunCgroup(256 << 20, 32)
    kept = list(again.dirs)
    again.close()  # empty: kept for the next run
    assert any(kept == k for k, _, _ in _cgroup._FREE)
