"""Every call of a cost objective is journaled before it is sent: the candidate models' runs and the
choice's own scoring (RUN_DIR/calls.jsonl), so the report's usage equals what the endpoints received,
across a resume too."""
from __future__ import annotations

import json

import verifirst as vf
from verifirst.lm.call_journal import CALLS_FILE, read_journal
from verifirst.programs.bash import BashGenerator

from test_objective import PRICES, _Metric, data, world


def _objective_run(tmp_path, cheap, dear, refl):
    goal = {"kind": "cheapest-not-worse", "margin": 0.05, "models": [cheap, dear],
            "reference": {"model": dear, "prompt": None}}
    return vf.optimize(BashGenerator(), data(), _Metric(), "gepa", models={"task": cheap, "reflection": refl},
                       budget=vf.Budget(max_metric_calls=30, prices=PRICES), run_dir=tmp_path / "run",
                       workdir=tmp_path / "wd", objective=goal)


def _received(*lms) -> int:
    return sum(lm.engine.calls for lm in lms)


def test_the_choice_is_journaled_and_usage_counts_what_the_endpoints_received(tmp_path):
    cheap, dear, refl = world()
    res = _objective_run(tmp_path, cheap, dear, refl)
    choice = read_journal(tmp_path / "run" / CALLS_FILE)
    assert choice.run.requests > 0  # the candidates scored on validation and test, each request journaled
    assert res.report["objective"]["usage_choice"]["requests"] == choice.run.requests
    assert res.report["usage_run_dir"]["requests"] == _received(cheap, dear, refl)
    first = _received(cheap, dear, refl)

    # The run directory resumed (the choice's rows asked again where they were not kept): every
    # request of both invocations is in the usage, and nothing else.
    for kept in (tmp_path / "run" / "eval" / "objective").glob("*.jsonl"):
        kept.unlink()
    res2 = _objective_run(tmp_path, cheap, dear, refl)
    assert _received(cheap, dear, refl) > first
    assert res2.report["usage_run_dir"]["requests"] == _received(cheap, dear, refl)
    assert json.loads((tmp_path / "run" / "report.json").read_text())["usage_run_dir"]["invocations"] >= 2
