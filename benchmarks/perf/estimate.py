"""Dry-run estimate against the calls of the same scripted run. Goal: per role within 10% for a GEPA
run and an AutoRefine calibration that run their full course; for runs that stop early (a task solved
at the first reflection, a judge at its target agreement) the "up to" counts must hold as bounds.

Each scenario is estimated with `dry_run=True` (no model called, nothing written), then run with
scripted LMs (verifirst.lm.testing, no cache: every call is sent), and the LM calls the usage ledger
counted per role are compared with the estimate's per role. Tokens are compared too: the scripted
engine reports characters / 4 as the spend meter counts them.

Scenarios:
- gepa: a QA task the task LM answers right for one item in four whatever the instruction (no
  candidate is ever accepted, no minibatch is perfect: GEPA spends its budget on reflections);
  24 items, max_metric_calls 60.
- autorefine: a judge that answers PASS whatever its prompt, a teacher that keeps every label, a
  proposer with a new pair of rules each round (the loop runs all max_iters); 12 outcome records of
  examples/outcomes.jsonl, max_iters 4; judge, teacher and proposer on separate scripted LMs.
- gepa-solved (bound): examples/api_gepa.py's scripted slug task, solved by the first reflection.
- autorefine-stops (bound): examples/api_calibrate.py's scripted calibration, which reaches its
  target agreement after one edit round.

    python benchmarks/perf/estimate.py [--json] [--out benchmarks/perf/results/estimate.json]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TOLERANCE = 0.10
PRICES = {"local/est-task": {"input": 0.15, "output": 0.60}, "local/est-refl": {"input": 2.5, "output": 10.0},
          "local/est-judge": {"input": 0.15, "output": 0.60}, "local/est-teacher": {"input": 2.5, "output": 10.0}}


def _examples_module(name: str) -> Any:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return __import__(name)


# -- scenarios: each returns (estimate kwargs, run kwargs, runner) -------------------------------------

def _qa():
    import dspy

    class QA(dspy.Signature):
        """Answer the question."""

        question: str = dspy.InputField()
        answer: str = dspy.OutputField()

    def metric(example, pred, trace=None, pred_name=None, pred_trace=None):
        ok = (pred.answer or "").strip() == example.answer
        return dspy.Prediction(score=float(ok), feedback="correct" if ok else f"the answer is {example.answer}")

    return QA, metric


def gepa_scenario(items: int = 24, budget: int = 60) -> dict:
    """GEPA that spends its whole budget: the task LM is right on one item in four, whatever it is told."""
    import dspy

    from verifirst.lm.testing import json_answer, scripted_lm

    QA, metric = _qa()
    data = [{"id": f"q{k}", "question": f"what is the answer to question #{k}?", "answer": "42"}
            for k in range(items)]

    def task(messages):
        k = int(re.search(r"#(\d+)", messages[-1]["content"]).group(1))
        return json_answer(answer="42" if k % 4 == 0 else "41")

    def reflect(messages):  # a new instruction each time (no two candidates alike)
        return json_answer(new_instruction=f"Answer the question with a number. ({len(messages[-1]['content'])})")

    def models():
        return {"task": scripted_lm(task, name="est-task"),
                "reflection": scripted_lm(reflect, role="reflection", name="est-refl")}

    def call(run_dir: Path, workdir: Path, dry_run: bool):
        import verifirst as vf

        return vf.optimize(dspy.Predict(QA), data, metric, "gepa", models=models(), splits=(0.5, 0.25, 0.25),
                           budget=vf.Budget(max_metric_calls=budget, prices=PRICES), run_dir=run_dir,
                           workdir=workdir, name="est-gepa", dry_run=dry_run)

    return {"name": "gepa", "kind": "full", "what": f"GEPA, {items} items, max_metric_calls {budget}, scripted",
            "call": call}


def gepa_solved_scenario() -> dict:
    """examples/api_gepa.py's scripted run: the first reflection solves the task (reflection far below its bound)."""
    import dspy

    ex = _examples_module("api_gepa")

    def call(run_dir: Path, workdir: Path, dry_run: bool):
        import verifirst as vf

        return vf.optimize(dspy.Predict(ex.Slugify), ex.DATA, ex.metric, "gepa", models=ex.scripted_models(),
                           splits=(0.6, 0.2, 0.2), budget=vf.Budget(max_metric_calls=30), run_dir=run_dir,
                           workdir=workdir, name="est-gepa-solved", dry_run=dry_run)

    return {"name": "gepa-solved", "kind": "bound", "what": "examples/api_gepa.py scripted, max_metric_calls 30",
            "call": call}


def stubborn_answer(messages: list[dict]) -> str:
    """Every calibration role, scripted so the loop runs its full course: the judge answers PASS whatever
    its prompt says, the teacher keeps every label, the proposer answers each round with a new pair of
    rules, the applier appends them (as examples/api_calibrate.py's applier does)."""
    from verifirst.lm.testing import json_answer

    ex = _examples_module("api_calibrate")
    system, user = messages[0]["content"], messages[-1]["content"]
    if "`new_prompt`" in system:
        return ex.scripted_answer(messages)
    f = {m.group(1): m.group(2).strip() for m in ex.FIELD_RE.finditer(user)}
    if "`edits`" in system:
        n = f.get("judge_prompt", "").count("\n- ") + 1
        return json_answer(edits=[{"op": "add", "direction": "FAIL", "rule": f"FAIL on hazard {n}"},
                                  {"op": "add", "direction": "PASS", "rule": f"PASS without hazard {n}"}])
    if "`decision`" in system:
        return json_answer(justification="the view shows it", decision="KEEP")
    return json_answer(reasoning="looks fine", verdict="PASS")


def _calibration_models(fn: Callable) -> dict:
    from verifirst.lm.testing import scripted_lm

    return {"judge": scripted_lm(fn, role="judge", name="est-judge"),
            "teacher": scripted_lm(fn, role="teacher", name="est-teacher"),
            "reflection": scripted_lm(fn, role="reflection", name="est-refl")}


def autorefine_scenario(limit: int = 12, max_iters: int = 4) -> dict:
    """AutoRefine that runs all its iterations (a judge that does not learn)."""
    def call(run_dir: Path, workdir: Path, dry_run: bool):
        import verifirst as vf

        return vf.calibrate(EXAMPLES / "outcomes.jsonl", "passfail", models=_calibration_models(stubborn_answer),
                            max_iters=max_iters, limit=limit, run_dir=run_dir, workdir=workdir,
                            budget=vf.Budget(prices=PRICES), dry_run=dry_run)

    return {"name": "autorefine", "kind": "full",
            "what": f"AutoRefine calibration, {limit} outcome records, max_iters {max_iters}, scripted", "call": call}


def autorefine_stops_scenario(max_iters: int = 4) -> dict:
    """examples/api_calibrate.py's scripted calibration: it reaches its target agreement early."""
    ex = _examples_module("api_calibrate")

    def call(run_dir: Path, workdir: Path, dry_run: bool):
        import verifirst as vf

        return vf.calibrate(EXAMPLES / "outcomes.jsonl", "passfail", models=_calibration_models(ex.scripted_answer),
                            max_iters=max_iters, run_dir=run_dir, workdir=workdir, dry_run=dry_run)

    return {"name": "autorefine-stops", "kind": "bound",
            "what": f"examples/api_calibrate.py scripted, 36 records, max_iters {max_iters}", "call": call}


SCENARIOS = {"gepa": gepa_scenario, "autorefine": autorefine_scenario, "gepa-solved": gepa_solved_scenario,
             "autorefine-stops": autorefine_stops_scenario}


# -- measuring -------------------------------------------------------------------------------------------

def _usage_by_role() -> dict[str, dict]:
    from verifirst.lm import USAGE

    out: dict[str, dict] = {}
    for (role, _split), c in list(USAGE.counts.items()):
        r = out.setdefault(role, {"lm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        r["lm_calls"] += c.lm_calls
        r["prompt_tokens"] += c.prompt_tokens
        r["completion_tokens"] += c.completion_tokens
    return out


def _delta(after: dict, before: dict) -> dict:
    return {role: {k: v - (before.get(role) or {}).get(k, 0) for k, v in vals.items()}
            for role, vals in after.items() if any(v - (before.get(role) or {}).get(k, 0) for k, v in vals.items())}


def compare(scenario: dict, workdir: Path) -> dict:
    """Estimate the scenario with dry_run, run it, and compare calls (and tokens) per role.

    Args:
        scenario: one of SCENARIOS' values (called).
        workdir: where the run goes (the dry run writes nothing there).

    Returns:
        {name, kind, what, per_role: {role: {estimate, bound, actual, rel_error, tokens...}}, goal_met,
         dry_run_wrote_nothing, dry_run_lm_calls, estimate_s, run_s}.
    """
    call = scenario["call"]
    run_dir = workdir / scenario["name"] / "run"
    wd = workdir / scenario["name"] / "wd"
    u0 = _usage_by_role()
    t0 = time.perf_counter()
    est = call(run_dir, wd, True)
    est_s = time.perf_counter() - t0
    dry_calls = sum(v["lm_calls"] for v in _delta(_usage_by_role(), u0).values())
    wrote_nothing = not (workdir / scenario["name"]).exists()
    u1 = _usage_by_role()
    t1 = time.perf_counter()
    res = call(run_dir, wd, False)
    run_s = time.perf_counter() - t1
    actual = _delta(_usage_by_role(), u1)
    roles = est.by_role()
    per_role = {}
    for role in sorted(set(roles) | set(actual)):
        e = roles.get(role) or {"calls": 0, "bound": "exact", "tokens_low": 0, "tokens_high": 0}
        a = actual.get(role) or {"lm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        tokens = a["prompt_tokens"] + a["completion_tokens"]
        rel = (e["calls"] - a["lm_calls"]) / a["lm_calls"] if a["lm_calls"] else None
        per_role[role] = {"estimate": e["calls"], "bound": e["bound"], "actual": a["lm_calls"],
                          "rel_error": None if rel is None else round(rel, 4),
                          "estimate_tokens": [e["tokens_low"], e["tokens_high"]], "actual_tokens": tokens,
                          "tokens_in_range": e["tokens_low"] * (1 - TOLERANCE) <= tokens <= e["tokens_high"],
                          "estimate_usd": [e.get("usd_low"), e.get("usd_high")]}
    if scenario["kind"] == "full":
        goal = all(r["rel_error"] is not None and abs(r["rel_error"]) <= TOLERANCE for r in per_role.values())
    else:  # an "up to" count must not be below what the run made
        goal = all(r["estimate"] >= r["actual"] for r in per_role.values() if r["bound"] == "up to")
    report = getattr(res, "report", {}) or {}
    return {"name": scenario["name"], "kind": scenario["kind"], "what": scenario["what"], "per_role": per_role,
            "estimate_total": est.total, "goal": ("per role within 10%" if scenario["kind"] == "full"
                                                   else "every 'up to' count >= the actual calls"),
            "goal_met": goal, "dry_run_lm_calls": dry_calls, "dry_run_wrote_nothing": wrote_nothing,
            "stop_reason": ((report.get("judge") or {}).get("loop") or {}).get("stop_reason"),
            "estimate_s": round(est_s, 3), "run_s": round(run_s, 3)}


def measure(workdir: Path, names: list[str]) -> dict:
    rows = [compare(SCENARIOS[n](), workdir) for n in names]
    full = [r for r in rows if r["kind"] == "full"]
    worst = max((abs(v["rel_error"]) for r in full for v in r["per_role"].values() if v["rel_error"] is not None),
                default=None)
    return {"benchmark": "estimate", "tolerance": TOLERANCE, "scenarios": rows,
            "worst_rel_error_full_runs": None if worst is None else round(worst, 4),
            "dry_runs_called_no_model": all(r["dry_run_lm_calls"] == 0 for r in rows),
            "dry_runs_wrote_nothing": all(r["dry_run_wrote_nothing"] for r in rows),
            "goals_met": all(r["goal_met"] and r["dry_run_lm_calls"] == 0 and r["dry_run_wrote_nothing"]
                             for r in rows)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="only these (repeatable)")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the runs here (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print JSON only")
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    a = ap.parse_args(argv)
    from verifirst.benchmarks.perf.record import emit, machine

    names = a.scenario or list(SCENARIOS)
    started = machine()
    with contextlib.redirect_stdout(sys.stderr):  # progress of the runs' inner evaluations: stdout is the JSON
        if a.workdir is not None:
            out = measure(a.workdir, names)
        else:
            with tempfile.TemporaryDirectory(prefix="verifirst-estimate-") as d:
                out = measure(Path(d), names)
    emit(out, started, a.out, a.json)
    return 0 if out["goals_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
