"""`verifirst doctor`: each isolation property is checked by an attack, and a property that does
not hold is reported as such (exit 1, with what to do), not assumed."""
from __future__ import annotations

import json

import pytest

from verifirst.verifiers.bash import _seccomp, doctor


def _sandbox_or_skip():
    from verifirst.verifiers.bash.sandbox import Sandbox

    try:
        Sandbox()
    except Exception as e:  # no user namespaces here
        pytest.skip(f"sandbox unavailable: {e}")


@pytest.mark.security
def test_every_property_holds_here_and_the_cli_says_so(capsys):
    _sandbox_or_skip()
    from verifirst.verifiers.bash import _cgroup

    assert doctor.cli_doctor(as_json=True) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    found = {f["name"]: f for f in out["findings"]}
    must = ["pid 1's memory unreadable", "ptrace of pid 1 denied", "kernel keyrings denied", "/dev/shm sized per run",
            "no process outlives its run", "a candidate cannot rewrite the task's check", "memory bounded per run"]
    if _cgroup.available():  # root here (CI): a scratch of its own
        must += ["a concurrent run cannot be starved", "cgroups per run"]
    for name in must:
        assert found[name]["holds"], found[name]


@pytest.mark.security
def test_without_cgroups_memory_is_still_bounded_per_run_and_doctor_names_what_is_missing(monkeypatch, capsys):
    _sandbox_or_skip()
    from verifirst.verifiers.bash import _cgroup

    monkeypatch.setattr(_cgroup, "available", lambda: False)
    assert doctor.cli_doctor(as_json=True) == 1
    found = {f["name"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert found["memory bounded per run"]["holds"] and not found["cgroups per run"]["holds"]


@pytest.mark.security
def test_without_the_seccomp_filter_the_attacks_it_stops_succeed_and_exit_is_1(monkeypatch, capsys):
    """The attacks detect what they test: with no filter, ptrace of pid 1 is still denied (pid 1 is not
    dumpable) but adding a kernel key works, and doctor says so with the fix."""
    _sandbox_or_skip()
    monkeypatch.setattr(_seccomp, "program", lambda: None)
    monkeypatch.setattr(_seccomp, "unavailable_reason", lambda: "libseccomp (libseccomp.so.2) is not installed")
    assert doctor.cli_doctor() == 1
    text = capsys.readouterr().out
    assert "NO  seccomp" in text and "NO  kernel keyrings denied: KEY" in text
    assert "fix: install libseccomp2" in text
