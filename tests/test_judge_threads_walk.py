"""The parameter walk (issue 34): the value of `verifirst calibrate --threads N` travels as `threads`
(and as `num_threads` in a Budget and AutoRefine's pools) from the flag to the thread pools that use it;
the modules it passes through are listed, so a new hop fails here (the issue's target: at most 8).
The walk is observed, not read from the source: the run is traced and every function that receives
the value under either name is recorded by module."""
from __future__ import annotations

import sys
import threading

import pytest
from typer.testing import CliRunner

from test_autorefine import RuleFollowingLM
from test_calibrate import write_outcomes

SENTINEL = 7  # a thread count no default has
# The modules the value passes through, measured (12): the judge domain's 6 (the flag, calibrate_run, the
# settings its steps read, and the three pools: the AutoRefine loop, the teacher, the report's re-scoring)
# and the kernel's 6 (vf.optimize, its request's budget, the Budget, the driver, the run state, the
# evaluation's pool). The target is 8; the kernel's part is another helper's (see the xfail below).
JUDGE_WALK = ["verifirst.judge.cli", "verifirst.judge.calibrate", "verifirst.judge.steps",
              "verifirst.judge.autorefine", "verifirst.judge.teacher", "verifirst.judge.judge_report"]
KERNEL_WALK = ["verifirst.api", "verifirst.requests", "verifirst.core.engine", "verifirst.loop.driver",
               "verifirst.loop.run_state", "verifirst.loop.evaluation"]


def _walk(tmp_path, monkeypatch) -> dict[str, set]:
    """{module: {function(name)}} of every verifirst function that received the --threads value."""
    import verifirst.judge.calibrate as cal
    from verifirst.cli import app

    lm = RuleFollowingLM()
    monkeypatch.setattr(cal, "make_lm", lambda *a, **k: lm)
    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    seen: dict[str, set] = {}

    def tracer(frame, event, arg):
        if event == "call":
            mod = frame.f_globals.get("__name__", "")
            if mod.startswith("verifirst"):
                for name in ("threads", "num_threads"):
                    value = frame.f_locals.get(name)
                    if value == SENTINEL and type(value) is int:
                        seen.setdefault(mod, set()).add(f"{frame.f_code.co_name}({name})")
        return None

    sys.settrace(tracer)
    threading.settrace(tracer)
    try:
        r = CliRunner().invoke(app, ["calibrate", "--outcomes", str(src), "--threads", str(SENTINEL), "--workdir",
                                     str(tmp_path / "wd"), "--max-iters", "1", "--offline", "--json"])
    finally:
        sys.settrace(None)
        threading.settrace(None)
    assert r.exit_code == 0, r.output
    return seen


def test_calibrate_threads_reaches_its_pools_through_the_listed_modules(tmp_path, monkeypatch):
    seen = _walk(tmp_path, monkeypatch)
    assert sorted(seen) == sorted(JUDGE_WALK + KERNEL_WALK), sorted(seen.items())


@pytest.mark.xfail(strict=True, reason="12 modules today: the kernel's 6 (api -> requests -> Budget -> driver -> "
                                       "run_state -> evaluation) alone leave the judge 2; the issue's target is 8")
def test_calibrate_threads_walk_is_at_most_8_modules():
    assert len(JUDGE_WALK) + len(KERNEL_WALK) <= 8
