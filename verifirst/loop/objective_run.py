"""A run whose objective chooses among configurations (`verifirst.loop.objective`): one optimizer run
per candidate model on train and validation, the user's own (model, prompt) pairs scored as given,
the rule applied on validation, then the test split scored once for the chosen candidate and the
reference.

The caller (`vf.optimize`) hands in how to run the loop on one model (`optimize_on`) and how to run
a program on one model (`scope_for`): the loop names no API.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from verifirst.lm.call_costs import ItemCosts
from verifirst.loop.ledger import program_hash
from verifirst.loop.objective import (AXIS, Candidate, CandidateScorer, CostCallback, Objective, candidate_row,
                                      confirm_on_test, model_name, select, with_prompt)
from verifirst.loop.splits import SPLITS

OPTIMIZE_SPLITS = ("train", "val")  # what a candidate model's optimizer run scores: test waits for the choice


def slug(text: str) -> str:
    """A file-name-safe form of a model string or label."""
    return "".join(ch if ch.isalnum() or ch in "._" else "-" for ch in text).strip("-") or "model"


def _from_run(costs: ItemCosts, cb: CostCallback, label: str, model: str, program: Any, source: str,
              evals: dict, phase: str, scorer: CandidateScorer) -> Candidate:
    """A candidate from an optimizer run's evaluations; a split whose items' calls were not seen (a
    resumed run read them from its checkpoint) is scored again, its calls priced as if sent."""
    c = Candidate(label, model, program, source, evals=dict(evals))
    for split, res in evals.items():
        keys = cb.keys(phase, res)
        if all(k in costs.items for k in keys):
            c.costs[split] = costs.summary(keys)
        else:
            scorer.score(c, split)
    return c


def gather(obj: Objective, *, program: Any, task_model: str, optimize_on: Callable[[str, Path, list], Any],
           scorer: CandidateScorer, costs: ItemCosts, run_dir: Path) -> tuple[list[Candidate], Candidate | None, dict]:
    """Every candidate, scored on train and validation with its costs.

    Args:
        obj: the objective.
        program: the program as given.
        task_model: the run's task model (the only model when the objective names none).
        optimize_on: (model, run directory, callbacks) -> the optimizer run's Result on that model.
        scorer: scores the user's pairs.
        costs: the per-item call collector.
        run_dir: the run directory (candidates/MODEL/ holds each model's run).

    Returns:
        (candidates, the given reference among them or None, the optimizer runs by model).
    """
    cands: list[Candidate] = []
    runs: dict[str, Any] = {}
    start = program_hash(program)
    for spec in obj.models or (task_model,):
        model = model_name(spec)
        cb = CostCallback(costs, model)
        with costs.watching():  # the optimizer's calls are seen: an evaluation's cache hit is priced as sent
            res = optimize_on(spec, Path(run_dir) / "candidates" / slug(model), [cb])
        runs[model] = res
        cands.append(_from_run(costs, cb, f"{model} · as given", model, program, "as given", res.before, "before",
                               scorer))
        if res.after and program_hash(res.program) != start:
            cands.append(_from_run(costs, cb, f"{model} · optimized", model, res.program, "optimized", res.after,
                                   "after", scorer))
    for i, pair in enumerate(obj.candidates):
        name = model_name(pair["model"])
        c = Candidate(f"{name} · yours {i + 1}", name, with_prompt(program, pair["prompt"]), "yours")
        for split in OPTIMIZE_SPLITS:
            scorer.score(c, split)
        cands.append(c)
    reference = None
    if obj.reference is not None:
        ref_prog = with_prompt(program, obj.reference["prompt"])
        name = model_name(obj.reference["model"])
        same = [c for c in cands if c.model == name and program_hash(c.program) == program_hash(ref_prog)]
        if same:
            reference = same[0]
        else:
            reference = Candidate(f"{name} · deployed", name, ref_prog, "reference")
            for split in OPTIMIZE_SPLITS:
                scorer.score(reference, split)
            cands.append(reference)
    return cands, reference, runs


def choose(obj: Objective, cands: Sequence[Candidate], reference: Candidate | None,
           scorer: CandidateScorer, test: bool = True) -> tuple[Candidate, dict]:
    """Apply the rule on validation, then score the test split once for the chosen candidate and the
    reference.

    Args:
        obj: the objective.
        cands: the candidates, scored on validation.
        reference: the given reference (one of cands), or None for the best on validation.
        scorer: scores the test split.
        test: score the test split (False: the run has none).

    Returns:
        (the chosen candidate, the report's "objective" section).
    """
    sel = select(cands, obj, reference)
    chosen, ref = sel["chosen"], sel["reference"]
    section: dict[str, Any] = {
        "kind": obj.kind, "margin": obj.margin, "axis": AXIS[obj.kind],
        "reference": ref.label, "reference_given": reference is not None, "chosen": chosen.label,
        "chosen_model": chosen.model, "chosen_is_reference": chosen is ref, "verdict": sel["verdict"],
        "rule": ("non-inferior: the paired bootstrap 95% interval of Δ pass rate (candidate − reference) on "
                 f"validation has its lower bound above −{obj.margin:g}; among those, the lowest "
                 f"{'USD per item (ties: latency p50)' if obj.kind == 'cheapest-not-worse' else 'latency p50 per item (ties: USD)'}"),
        "candidates": [candidate_row(r["candidate"], r) for r in sel["rows"]],
    }
    if test:
        for c in dict.fromkeys([chosen, ref]):  # once each; once in all when the reference is chosen
            scorer.score(c, "test")
        section["test"] = confirm_on_test(chosen, ref)
        for row, c in zip(section["candidates"], [r["candidate"] for r in sel["rows"]]):
            if "test" in c.evals:
                row["splits"]["test"] = {**c.quality("test"), **c.costs["test"]}
    cached = sum((s.get("cached_calls") or 0) for row in section["candidates"] for s in row["splits"].values())
    estimated = sum((s.get("estimated_calls") or 0) for row in section["candidates"] for s in row["splits"].values())
    section["cost_note"] = (f"USD and tokens per item from each item's own LM calls; {cached} cached call(s) priced "
                            f"as if sent ({estimated} of them with tokens estimated as characters / 4, no latency)")
    return chosen, section


def front_rows(section: dict) -> list[dict]:
    """The candidates as table rows, the Pareto front first (cheapest first): what `verifirst run` prints.

    Args:
        section: the report's "objective" section.
    """
    rows = []
    for c in section.get("candidates", []):
        v = c["splits"].get("val", {})
        ci = v.get("ci95") or [None, None]
        d = c.get("val_vs_reference") or {}
        rows.append({"candidate": c["label"], "front": c.get("front", False), "val_pass_rate": v.get("pass_rate"),
                     "ci95": ci, "usd_per_item": v.get("usd_per_item"), "tokens_per_item": v.get("tokens_per_item"),
                     "latency_p50_s": v.get("latency_p50_s"), "latency_p90_s": v.get("latency_p90_s"),
                     "delta_vs_reference": d.get("delta"), "delta_ci95": d.get("ci95"),
                     "non_inferior": c.get("non_inferior"), "chosen": c["label"] == section.get("chosen"),
                     "reference": c["label"] == section.get("reference")})
    axis = section.get("axis", "usd_per_item")
    rows.sort(key=lambda r: (not r["front"], r[axis] if r[axis] is not None else float("inf")))
    return rows


def splits_to_score(manifest: Any) -> tuple[str, ...]:
    """The optimizer runs' splits: train and validation, those that have items."""
    return tuple(s for s in OPTIMIZE_SPLITS if manifest.sizes()[s])


def _role_models(models: Any) -> dict:
    """The caller's models by role as a dict (a Models object or None too)."""
    if models is None:
        return {}
    if isinstance(models, dict):
        return dict(models)
    return {r: getattr(models, r) for r in ("task", "reflection", "teacher", "judge") if getattr(models, r, None)}


def remaining(budget: Any, spent: dict) -> Any:
    """`budget` less what earlier runs of this objective spent (one spend cap for all of them).

    Args:
        budget: the run's Budget.
        spent: {"usd", "tokens", "lm_calls", "wall_s"} spent so far.
    """
    import dataclasses

    if not getattr(budget, "spend_limited", False):
        return budget
    left = {}
    for limit, key in (("max_usd", "usd"), ("max_tokens", "tokens"), ("max_lm_calls", "lm_calls"),
                       ("max_wall_s", "wall_s")):
        cap = getattr(budget, limit)
        if cap is not None:
            rest = cap - spent.get(key, 0)
            if rest <= 0:  # nothing left for the next model's run: a budget stop, not a bad limit
                from verifirst.lm.spend import BudgetExceeded

                raise BudgetExceeded(limit, None, spent.get(key, 0), cap, message=(
                    f"stopped by budget: {limit} {cap:g} for the run was spent by the earlier models' runs of the "
                    "objective; rerun with a larger limit (calls already made come from the cache)"))
            left[limit] = int(rest) if limit in ("max_tokens", "max_lm_calls") else float(rest)
    return dataclasses.replace(budget, **left)


def _plus(spent: dict, meter: Any) -> dict:
    """The models' runs' spend plus what the objective's own meter spent (wall time: the runs')."""
    out = dict(spent)
    if meter.limited:
        run = meter.spent()["run"]
        for key in ("usd", "tokens", "lm_calls"):
            out[key] = out.get(key, 0) + (run.get(key) or 0)
    return out


def _add_spent(total: dict, report: dict, wall_s: float) -> None:
    run = ((report or {}).get("spend") or {}).get("run") or {}
    for key in ("usd", "tokens", "lm_calls"):
        total[key] = total.get(key, 0) + (run.get(key) or 0)
    total["wall_s"] = total.get("wall_s", 0.0) + wall_s


def run_objective(goal: Objective, request: Any, rerun: Callable[..., Any], *, manifest: Any, suite: Any,
                  scorer: Any, lms: Any, task_lm: Any, budget: Any, run_dir: Path, workdir: Path,
                  tracking: Any, result: Callable[..., Any], publish: Callable[[dict, Path], Any]) -> Any:
    """`vf.optimize` with a cost or latency objective: refuse what it cannot run (a model without a
    price for cost), estimate (dry_run), or run every candidate, choose, confirm on test, publish.

    Args:
        goal: the checked objective.
        request: the run's OptimizeRequest (verifirst.requests): each model's run is this request
            with its model, run directory, name and remaining budget.
        rerun: (**changes) -> the Result of the request with `changes`, checked again and run.
        manifest, suite, scorer: the run's splits, data and Metric.
        lms: the built Models (None: DSPy's configured LM).
        task_lm: the run's task LM.
        budget: the run's Budget (its spend limits hold for all the candidates' runs together).
        run_dir: the run directory (not yet created).
        workdir: the work directory (the test-reuse ledger).
        tracking: the run's tracker (each model's run is tracked; the objective's metrics too).
        result: the Result class to return.
        publish: (report, run_dir) -> the report files.

    Returns:
        The Result (the chosen candidate's program; report["objective"]), or with dry_run the
        estimate per model (`ObjectiveEstimate`).
    """
    import time

    import dspy

    from verifirst.lm import adapter_for, make_lm
    from verifirst.lm.call_journal import CALLS_FILE, sum_journals
    from verifirst.lm.spend import Prices, metering
    from verifirst.lm.user_lm import metered
    from verifirst.loop.driver import spend_meter
    from verifirst.loop.run_guard import open_meter
    from verifirst.loop.ledger import LEDGER_FILE, TestLedger
    from verifirst.loop.objective import check_prices

    prices = Prices(budget.prices)
    task_name = getattr(task_lm, "model", None)
    check_prices(goal, task_name, prices)  # before anything is written or called
    roles = _role_models(request.models)
    base = {"objective": None, "margin": None, "splits": manifest, "data": suite,
            "eval_splits": splits_to_score(manifest)}
    specs: dict[str, Any] = {model_name(m): m for m in goal.models}
    for pair in [*goal.candidates, *([goal.reference] if goal.reference else [])]:
        specs.setdefault(model_name(pair["model"]), pair["model"])
    if not goal.models:
        specs.setdefault(task_name, roles.get("task") or task_lm)
    if request.dry_run:
        return ObjectiveEstimate({m: rerun(**base, models={**roles, "task": spec}, run_dir=None)
                                  for m, spec in specs.items() if spec is not None},
                                 evaluations=len(goal.candidates) + bool(goal.reference), max_usd=budget.max_usd)
    name = request.name or suite.name
    spent: dict = {}  # the models' runs'
    run_dir.mkdir(parents=True, exist_ok=True)
    # The objective's own calls (candidates scored outside the models' runs, the choice on validation
    # and test) are journaled before they are sent (RUN_DIR/calls.jsonl): a resume counts a killed
    # invocation's calls, and they count against the one cap with the models' runs'.
    meter, journal = open_meter(budget, run_dir, spend_meter)

    def optimize_on(spec: Any, sub_dir: Path, callbacks: list) -> Any:
        t0 = time.time()
        res = rerun(**base, models={**roles, "task": spec}, run_dir=sub_dir,
                    budget=remaining(budget, _plus(spent, meter)), name=f"{name}-{slug(model_name(spec))}",
                    callbacks=[*request.callbacks, *callbacks])
        _add_spent(spent, res.report, time.time() - t0)
        if meter.limited:  # what the models' runs spent is no longer the objective's to spend
            meter.total = spend_meter(remaining(budget, {k: v for k, v in spent.items() if k != "wall_s"})).total
        return res

    adapter = request.adapter
    built: dict[str, Any] = {}

    def scope_for(model: str) -> Any:
        if model not in built:
            spec = specs.get(model, model)
            built[model] = metered(spec) if callable(spec) and not isinstance(spec, str) else make_lm(spec, role="task")
        return dspy.context(lm=built[model], adapter=adapter_for(built[model], adapter))

    ledger = TestLedger(Path(workdir) / LEDGER_FILE)
    costs = ItemCosts(prices)
    by_split = {s: manifest.select(suite.items, s) for s in SPLITS}
    scoring = CandidateScorer(scorer, by_split, manifest, costs, scope_for, run_dir, threads=request.threads,
                              on_test=lambda prog: ledger.record(manifest.digest, program_hash(prog), run_dir,
                                                                 "objective"))
    try:
        with metering(meter):  # a model's run meters its own calls inside (driver.run)
            cands, reference, runs = gather(goal, program=request.program, task_model=task_name,
                                            optimize_on=optimize_on, scorer=scoring, costs=costs, run_dir=run_dir)
            chosen, section = choose(goal, cands, reference, scoring, test=bool(manifest.sizes()["test"]))
    finally:
        journal.close()
    if meter.limited:
        spent = _plus(spent, meter)
    base_report = next((r.report for m, r in runs.items() if model_name(m) == chosen.model), None)
    report = json_copy(base_report if base_report is not None else next(iter(runs.values())).report)
    report.update({"objective": section, "run_dir": str(run_dir), "experiment": name,
                   "instructions": instructions(chosen.program)})
    report["models"] = {**(report.get("models") or {}), "task": chosen.model}
    if spent:
        report["objective"]["spend"] = {**spent, "usd": round(spent.get("usd", 0.0), 8)}
    report["objective"]["usage_choice"] = journal.totals()
    # every request of the objective: each candidate model's run directory and the choice's
    report["usage_run_dir"] = sum_journals([run_dir / CALLS_FILE, *sorted(run_dir.glob(f"candidates/*/{CALLS_FILE}"))])
    chosen.program.save(str(run_dir / "optimized_program.json"))
    publish(report, run_dir)  # report.json, report.md, report.html with the Pareto plot
    if tracking is not None and hasattr(tracking, "log_objective"):
        report["objective"]["mlflow_run_id"] = tracking.log_objective(report, run_dir, workdir)
    return result(chosen.program, report, manifest, run_dir, {}, dict(chosen.evals))


def json_copy(report: dict) -> dict:
    """A deep copy of a report through JSON (what it is written as)."""
    import json

    return json.loads(json.dumps(report, default=str))


def instructions(program: Any) -> dict:
    """The program's instructions by predictor."""
    if not hasattr(program, "named_predictors"):
        return {}
    return {n: p.signature.instructions for n, p in program.named_predictors()}


class ObjectiveEstimate:
    """A dry run's estimate for an objective: one estimate per candidate model (its optimizer run on
    train and validation), beside how many (model, prompt) pairs are scored as given and the test
    split scored for at most two candidates (not counted: which two is decided by the run).

    Args:
        per_model: {model: SpendEstimate}.
        evaluations: the user's pairs (and a deployed reference) scored as given on train and validation.
        max_usd: the run's max_usd (one cap for all the models' runs).
    """

    def __init__(self, per_model: dict, evaluations: int = 0, max_usd: float | None = None):
        self.per_model, self.evaluations, self.max_usd = per_model, evaluations, max_usd

    @property
    def total(self) -> dict:
        """{calls, usd_low, usd_high} of every model's run summed (usd None when a model has no price)."""
        totals = [e.total for e in self.per_model.values()]
        priced = all(t["usd_low"] is not None for t in totals)
        return {"calls": sum(t["calls"] for t in totals),
                "usd_low": sum(t["usd_low"] for t in totals) if priced else None,
                "usd_high": sum(t["usd_high"] for t in totals) if priced else None}

    def over_limits(self) -> list[str]:
        """What the high end of all the models' runs together would cross (the one max_usd)."""
        high = self.total["usd_high"]
        if self.max_usd is not None and high is not None and high > self.max_usd:
            return [f"the estimate for all models (up to {high:.4f} USD) exceeds max_usd {self.max_usd:g} for the run"]
        return []

    def as_dict(self) -> dict:
        return {"per_model": {m: e.as_dict() for m, e in self.per_model.items()}, "total": self.total,
                "evaluations_as_given": self.evaluations}

    def render(self, width: int = 140) -> str:
        parts = [f"== {m} ==\n{e.render(width)}" for m, e in self.per_model.items()]
        t = self.total
        usd = (f"{t['usd_low']:.4f}-{t['usd_high']:.4f} USD" if t["usd_low"] is not None
               else "USD unknown (a model has no price)")
        parts.append(f"all models: {t['calls']} calls, {usd}; plus {self.evaluations} (model, prompt) pair(s) "
                     "scored as given, and the test split for the chosen candidate and the reference")
        return "\n\n".join(parts) + "\n"


__all__ = ["gather", "choose", "front_rows", "slug", "splits_to_score", "OPTIMIZE_SPLITS", "SPLITS"]
