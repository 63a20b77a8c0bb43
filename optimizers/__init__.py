"""Optimizers behind one interface: (program, metric, splits, budget) -> (program, report).

`optimize` admits train + val through the split guard, scores the unoptimized program on every
split, runs the engine, scores the result, and compares the two pairwise (McNemar exact, Wilson
CIs). The test split is scored only through the guard, after selection; each test
evaluation goes into the workdir's test-reuse ledger, and the report says how many other
programs were already scored on the same test split.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from verifirst import atomic, stats
from verifirst.evaluate import EvalResult, Scorer, evaluate
from verifirst.ledger import TestLedger, ledger_for_run_dir, program_hash
from verifirst.lm import usage_phase
from verifirst.splits import SPLITS, SplitManifest
from verifirst.task import Item

from .base import Budget, Engine, EngineContext, EngineResult
from .metric import VerifierMetric

__all__ = ["Budget", "Engine", "EngineContext", "EngineResult", "VerifierMetric", "get_engine",
           "optimize", "OptimizationResult", "compare"]

ENGINES = ("gepa", "simba", "autorefine", "none")


def get_engine(name: str, **options: Any) -> Engine | None:
    if name == "gepa":
        from .gepa import GEPAEngine

        return GEPAEngine(**options)
    if name == "simba":
        from .simba import SIMBAEngine

        return SIMBAEngine(**options)
    if name == "autorefine":
        from .autorefine import AutoRefineEngine  # type: ignore[attr-defined]

        return AutoRefineEngine(**options)
    if name == "none":
        return None
    raise ValueError(f"unknown optimizer {name!r}; one of {', '.join(ENGINES)}")


def compare(before: EvalResult, after: EvalResult) -> dict:
    """Paired comparison on the items both runs scored (errors on either side excluded)."""
    a, b = before.by_id(), after.by_id()
    ids = [i for i in a if i in b and a[i].status in ("PASS", "FAIL") and b[i].status in ("PASS", "FAIL")]
    pa = [a[i].passed for i in ids]
    pb = [b[i].passed for i in ids]
    m = stats.mcnemar_paired(pa, pb)
    n = len(ids)
    out = {"paired_n": n, "before_pass": sum(pa), "after_pass": sum(pb),
           "delta": (sum(pb) - sum(pa)) / n if n else 0.0,
           "b_before_only": m.b, "c_after_only": m.c, "mcnemar_p": m.p_value}
    if n:
        d = stats.paired_bootstrap(lambda y, p: sum(p) / len(p), [float(x) for x in pa],
                                   [float(x) for x in pb], [0] * n, n=2000, seed=0)
        out.update({"delta_ci_lo": d.lo, "delta_ci_hi": d.hi})
    return out


@dataclass
class OptimizationResult:
    program: Any
    report: dict
    before: dict[str, EvalResult] = field(default_factory=dict)
    after: dict[str, EvalResult] = field(default_factory=dict)


def _save_program(program, path: Path) -> None:
    tmp = path.with_suffix(".tmp.json")
    program.save(str(tmp))
    tmp.replace(path)


def optimize(program: Any, scorer: Scorer, items: Sequence[Item], manifest: SplitManifest,
             engine: Engine | None, budget: Budget, ctx: EngineContext, *, threads: int = 1,
             tracker: Any = None, splits: Sequence[str] = SPLITS, progress: bool | None = None,
             max_error_rate: float | None = None, ledger: TestLedger | None = None) -> OptimizationResult:
    """Guard -> score every split -> engine on train + val -> score again -> paired comparisons.

    Args:
        program: the DSPy program to optimize (left unchanged; the engine works on a copy).
        scorer: the verifier and the program output it checks.
        items: every item of the suite; `manifest` says which split each belongs to.
        manifest: the split manifest; the engine's metric records every item it scores there.
        engine: the optimizer, or None to only evaluate.
        budget: the engine's budget.
        ctx: run directory, LMs by role, loggers.
        threads: evaluation threads.
        tracker: an MLflow Tracker, or None.
        splits: the splits to evaluate.
        progress: show progress bars (None: when attached to a terminal).
        max_error_rate: LM error rate that stops an evaluation.
        ledger: the test-reuse ledger; default WORKDIR/test_ledger.jsonl of the run directory.
    """
    run_dir = Path(ctx.run_dir)
    ledger = ledger or ledger_for_run_dir(run_dir)
    scored_on_test: list[str] = []
    run_dir.mkdir(parents=True, exist_ok=True)
    by_split = {s: manifest.select(items, s) for s in SPLITS}
    train, val = by_split["train"], by_split["val"]
    # The guard: the engine sees train and val only, and we record that it did.
    manifest.admit_to_optimizer([it.id for it in train + val], who=getattr(engine, "name", "optimizer"))
    manifest.save(run_dir / "split_manifest.json")

    def run_eval(prog, split: str, phase: str) -> EvalResult:
        res = _run_eval(prog, split, phase)
        if split == "test":  # the guard let it through: this program has now been scored on the test split
            h = program_hash(prog)
            scored_on_test.append(h)
            ledger.record(manifest.digest, h, run_dir, phase)
        return res

    def _run_eval(prog, split: str, phase: str) -> EvalResult:
        its = by_split[split]
        ckpt = run_dir / "eval" / f"{phase}_{split}.jsonl"
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        child = tracker.child(f"eval/{phase}/{split}", tags={"verifirst.split": split,
                                                             "verifirst.phase": phase}) if tracker else None
        if child is None:
            return evaluate(prog, its, scorer, split=split, threads=threads, manifest=manifest,
                            checkpoint=ckpt, progress=progress, desc=f"{phase} {split}",
                            max_error_rate=max_error_rate)
        with child as rid:
            hook = tracker.feedback_hook(rid, split)
            try:
                res = evaluate(prog, its, scorer, split=split, threads=threads, manifest=manifest,
                               checkpoint=ckpt, progress=progress, desc=f"{phase} {split}",
                               max_error_rate=max_error_rate, on_row=hook)
            finally:
                tracker.attach_feedback(hook)
            summ = res.summary()
            tracker.log_metrics({k: summ[k] for k in ("pass_rate", "mean_score", "errors", "ci_lo", "ci_hi")},
                                run_id=rid)
            tracker.log_metrics({f"{phase}_{split}_pass_rate": summ["pass_rate"],
                                 f"{phase}_{split}_errors": summ["errors"]})
            tracker.log_artifact(ckpt, "per_item", run_id=rid)
        return res

    before = {s: run_eval(program, s, "before") for s in splits}
    prog_path = run_dir / "optimized_program.json"
    history: list[dict] = []
    details: dict = {}
    if engine is None:
        best = program
    elif prog_path.exists() and (run_dir / "engine_done.json").exists():
        best = program.deepcopy()
        best.load(str(prog_path))  # finished in an earlier invocation of this run directory
        done = json.loads((run_dir / "engine_done.json").read_text())
        history, details = done.get("history", []), done.get("details", {})
    else:
        metric = VerifierMetric(scorer.verifier, scorer.output_field, train + val, manifest=manifest)
        trainset = [it.example() for it in train]
        valset = [it.example() for it in val]
        child = tracker.child(f"optimize/{engine.name}", tags={"verifirst.phase": "optimize"}) if tracker else None
        try:
            if child is None:
                with usage_phase("optimize"):
                    res = engine.compile(program.deepcopy(), metric, trainset, valset, budget, ctx)
            else:
                with child as rid:
                    ctx.log_metrics = lambda m, step, _rid=rid: tracker.log_metrics(m, step, run_id=_rid)
                    ctx.log_artifact = lambda p, _rid=rid: tracker.log_artifact(p, run_id=_rid)
                    with usage_phase("optimize"):
                        res = engine.compile(program.deepcopy(), metric, trainset, valset, budget, ctx)
                    tracker.log_json(res.history, "history.json", run_id=rid)
                    tracker.log_json(res.details, "details.json", run_id=rid)
        finally:
            manifest.save(run_dir / "split_manifest.json")  # with every item the metric evaluated
        best, history, details = res.program, res.history, dict(res.details)
        details["metric"] = metric.counts()  # items the metric could not judge scored 0.0 for DSPy
        _save_program(best, prog_path)
        atomic.write_json(run_dir / "engine_done.json", {"history": history, "details": details})
    after = {s: run_eval(best, s, "after") for s in splits} if engine is not None else dict(before)

    report: dict[str, Any] = {
        "engine": getattr(engine, "name", "none"), "split_digest": manifest.digest,
        "sizes": manifest.sizes(), "budget": budget.__dict__, "splits": {}, "history": history,
        "details": details,
    }
    for s in splits:
        report["splits"][s] = {"before": before[s].summary(), "after": after[s].summary(),
                               "comparison": compare(before[s], after[s])}
    def _instr(prog):
        return {n: p.signature.instructions for n, p in prog.named_predictors()} if hasattr(prog, "named_predictors") else {}

    if "test" in splits:
        report["test_reuse"] = ledger.reuse(manifest.digest, scored_on_test)
    report["instructions"] = _instr(best)
    report["instructions_changed"] = _instr(best) != _instr(program)
    return OptimizationResult(best, report, before, after)
