"""What `objective = "cheapest-not-worse"` saves and what it gives up, against `objective = "quality"`.

Scripted LMs priced like two real models: "cheap" at gpt-4o-mini's list price (0.15 / 0.60 USD per 1M
input / output tokens), "dear" at gpt-4o's (2.50 / 10.00). The task: answer with a shell command;
half the items are "hard", and the cheap model answers them wrong unless its prompt says to use
printf; the dear model needs no telling. GEPA's scripted reflection proposes the rule.

- quality: `vf.optimize` on the dear model, the deployment a user runs now: its test pass rate and
  its USD per item on test, measured from each item's own calls.
- cheapest-not-worse (margin 0.05) over both models: the chosen configuration against the reference
  (the deployed one: the dear model with the prompt as given) on test: Δ pass rate with its 95% interval and McNemar's p, USD per item
  of each, and the saving.
- unfixable: the same rule when the reflection's instruction does not help the cheap model: the dear
  model must be kept (what the rule gives up then: nothing).
- estimate: the dry run's task calls per model against the calls the scripted engines counted in
  the cheapest-not-worse run (goal: within 10%).

Every LM call reaches its scripted engine (no cache). Prints or writes JSON:

    python benchmarks/perf/cost_objective.py [--json] [--out benchmarks/perf/results/cost_objective.json]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PRICES = {"local/cheap": {"input": 0.15, "output": 0.60}, "local/dear": {"input": 2.50, "output": 10.00}}
PRICED_LIKE = {"local/cheap": "gpt-4o-mini", "local/dear": "gpt-4o"}
RULE = "Always answer with printf."
MARGIN = 0.05
ITEMS = 48
GEPA_CALLS = 60
TOLERANCE = 0.10


def _world(rule: str):
    import dspy

    from verifirst.lm.testing import json_answer, scripted_lm
    from verifirst.verifiers.base import Verdict

    class Command(dspy.Signature):
        """Write a shell command that does the task."""

        task: str = dspy.InputField()
        command: str = dspy.OutputField()

    class Exact:
        name = "exact"

        def verify(self, item, candidate):
            ok = (candidate or "").strip() == item.gold["command"]
            return Verdict(float(ok), ok, "PASS" if ok else "OUTPUT",
                           feedback="" if ok else f"expected `{item.gold['command']}`; use printf")

    def cheap_fn(messages):
        told = "printf" in messages[0]["content"]
        return json_answer(command="printf hi" if told or "hard" not in messages[-1]["content"] else "echo hi")

    data = [{"id": f"i{k}", "task": f"{'hard' if k % 2 else 'easy'} greeting #{k}", "command": "printf hi"}
            for k in range(ITEMS)]
    cheap = scripted_lm(cheap_fn, name="cheap")
    dear = scripted_lm(lambda m: json_answer(command="printf hi"), name="dear")
    refl = scripted_lm(lambda m: json_answer(new_instruction=rule), role="reflection", name="refl")
    return dspy.Predict(Command), data, Exact(), cheap, dear, refl


def _budget():
    import verifirst as vf

    return vf.Budget(max_metric_calls=GEPA_CALLS, prices=PRICES)


def quality_run(root: Path) -> dict:
    """objective = "quality" on the dear model: test pass rate and USD per item from its own calls."""
    import verifirst as vf
    from verifirst.lm.call_costs import ItemCosts
    from verifirst.lm.spend import Prices
    from verifirst.loop.objective import CostCallback

    program, data, metric, _, dear, refl = _world(RULE)
    costs = ItemCosts(Prices(PRICES))
    cb = CostCallback(costs, "quality")
    t0 = time.perf_counter()
    res = vf.optimize(program, data, metric, "gepa", models={"task": dear, "reflection": refl}, budget=_budget(),
                      run_dir=root / "quality", workdir=root / "wd-quality", callbacks=[cb], objective="quality")
    after = res.after["test"]
    test = costs.summary(cb.keys("after", after))
    return {"model": "local/dear", "test_pass_rate": after.pass_rate, "test_n": after.n,
            "test_usd_per_item": test["usd_per_item"], "test_tokens_per_item": test["tokens_per_item"],
            "wall_s": round(time.perf_counter() - t0, 2)}


def objective_run(root: Path, name: str, rule: str) -> dict:
    """cheapest-not-worse over both models: the choice, its test confirmation, the estimate per model."""
    import verifirst as vf

    program, data, metric, cheap, dear, refl = _world(rule)
    kw = dict(models={"task": cheap, "reflection": refl}, budget=_budget(),
              objective={"kind": "cheapest-not-worse", "margin": MARGIN, "models": [cheap, dear],
                         "reference": {"model": dear, "prompt": None}})
    est = vf.optimize(program, data, metric, "gepa", dry_run=True, run_dir=root / f"{name}-dry", **kw)
    t0 = time.perf_counter()
    res = vf.optimize(program, data, metric, "gepa", run_dir=root / name, workdir=root / f"wd-{name}", **kw)
    sec = res.report["objective"]
    t = sec["test"]
    n_test = len(res.manifest.test)
    scored = {c["model"] for c in sec["candidates"] if "test" in c["splits"]}
    made = {"local/cheap": cheap.engine.calls - n_test * ("local/cheap" in scored),
            "local/dear": dear.engine.calls - n_test * ("local/dear" in scored)}
    estimate = {m: e.by_role()["task"]["calls"] for m, e in est.per_model.items()}
    ref_usd, chosen_usd = t["costs"]["reference"]["usd_per_item"], t["costs"]["chosen"]["usd_per_item"]
    return {"chosen": sec["chosen"], "reference": sec["reference"], "verdict": sec["verdict"],
            "test_n": n_test, "test_pass_rate_chosen": t["chosen"]["pass_rate"],
            "test_pass_rate_reference": t["reference"]["pass_rate"],
            "test_delta_pass_rate": t["delta_quality"]["delta"], "test_delta_ci95": t["delta_quality"]["ci95"],
            "test_mcnemar_p": t["delta_quality"]["mcnemar_p"],
            "test_usd_per_item_chosen": chosen_usd, "test_usd_per_item_reference": ref_usd,
            "cost_ratio": chosen_usd / ref_usd if ref_usd else None,
            "test_latency_p50_s_chosen": t["costs"]["chosen"]["latency_p50_s"],
            "candidates": [{"label": c["label"], "val_pass_rate": c["splits"]["val"]["pass_rate"],
                            "val_usd_per_item": c["splits"]["val"]["usd_per_item"], "non_inferior": c["non_inferior"],
                            "front": c["front"]} for c in sec["candidates"]],
            "estimate_task_calls": estimate, "actual_task_calls": made,
            "estimate_rel_error": {m: abs(estimate[m] - made[m]) / made[m] for m in made if made[m]},
            "wall_s": round(time.perf_counter() - t0, 2)}


def measure(root: Path) -> dict:
    quality = quality_run(root)
    fixable = objective_run(root, "cheapest", RULE)
    unfixable = objective_run(root, "unfixable", "Answer briefly.")
    worst = max([*fixable["estimate_rel_error"].values(), *unfixable["estimate_rel_error"].values()])
    goals = {"cheap_chosen_when_non_inferior": fixable["chosen"] == "local/cheap · optimized",
             "test_confirms": fixable["test_delta_ci95"][0] > -MARGIN,
             "dear_kept_when_not": unfixable["chosen"].startswith("local/dear"),
             "estimate_within_tolerance": worst <= TOLERANCE}
    return {"priced_like": PRICED_LIKE, "prices_usd_per_1m": PRICES, "items": ITEMS, "gepa_max_metric_calls": GEPA_CALLS,
            "margin": MARGIN, "quality": quality, "cheapest_not_worse": fixable, "unfixable": unfixable,
            "saving_vs_quality_per_item": quality["test_usd_per_item"] - fixable["test_usd_per_item_chosen"],
            "pass_rate_given_up_vs_quality": quality["test_pass_rate"] - fixable["test_pass_rate_chosen"],
            "worst_estimate_rel_error": worst, "tolerance": TOLERANCE, "goals": goals,
            "goals_met": all(goals.values())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print JSON only")
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    a = ap.parse_args(argv)
    from verifirst.benchmarks.perf.record import emit, machine

    started = machine()
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory(prefix="verifirst-cost-") as d:
        out = measure(Path(d))
    emit(out, started, a.out, a.json)
    return 0 if out["goals_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
