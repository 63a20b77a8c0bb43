"""The embedded model's thread count: VERIFIRST_LOCAL_THREADS, else the CPUs this process may run
on (not the machine's: a process pinned to one core given two llama.cpp threads stalls at every
step); a bad value is refused naming the variable."""
from __future__ import annotations

import os

import pytest

from verifirst.core.errors import ConfigError
from verifirst.lm._local_engine import THREADS_ENV, LlamaCppEngine, default_threads


def test_the_variable_sets_the_threads(monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "3")
    assert default_threads() == 3 and LlamaCppEngine().n_threads == 3
    assert LlamaCppEngine(n_threads=5).n_threads == 5  # an explicit count wins


def test_without_it_the_cpus_this_process_may_use(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        assert default_threads() == 1
    finally:
        os.sched_setaffinity(0, before)
    assert default_threads() == len(before)


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_a_bad_value_is_refused_naming_the_variable(monkeypatch, bad):
    monkeypatch.setenv(THREADS_ENV, bad)
    with pytest.raises(ConfigError) as e:
        LlamaCppEngine()
    assert THREADS_ENV in str(e.value) and repr(bad) in str(e.value)
