"""The one driver: (program, metric, items, splits, engine, budget) -> (program, report).

`optimize` admits train + val through the split guard, scores the unoptimized program on every
split, runs the engine, scores the result, and compares the two pairwise (McNemar exact, Wilson
CIs, paired bootstrap). The test split is scored only through the guard, after selection; each
test evaluation goes into the workdir's test-reuse ledger, and the report says how many other
programs were already scored on the same test split.

Tracking is a callback the driver calls (evaluation scopes and rows, the optimizer's scope and
iterations); engines never see a tracker, only `EngineContext.log_metrics`.
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from . import atomic, stats
from .engine import Budget, Engine, EngineContext
from .errors import RunFailed
from .evaluate import EvalResult, evaluate, optimizer_saw_only_errors, unscored_splits
from .ledger import TestLedger, ledger_for_run_dir, program_hash
from .lm import USAGE, usage_phase
from .metric import Metric
from .splits import SPLITS, SplitManifest
from .task import Item


class RunCallback:
    """What the driver tells a tracker; every method is a no-op here. Subclass what you need."""

    def run_start(self, name: str, params: dict, tags: dict) -> str | None:
        """A run begins (called by the API, which owns the run); returns a run id or None."""
        return None

    @contextlib.contextmanager
    def evaluation(self, phase: str, split: str) -> Iterator[None]:
        """Scope of one evaluation."""
        yield None

    def row(self, phase: str, split: str, item: Item, row: Any) -> None:
        """One evaluated item, called in the thread that ran the program (its trace is the last active)."""

    def evaluation_done(self, phase: str, split: str, result: EvalResult, checkpoint: Path) -> None:
        """One evaluation finished (inside its scope)."""

    @contextlib.contextmanager
    def optimization(self, engine_name: str) -> Iterator[None]:
        """Scope of the engine's compile."""
        yield None

    def iteration(self, metrics: dict, step: int) -> None:
        """One optimizer iteration's metrics (through EngineContext.log_metrics)."""

    def artifact(self, path: Path) -> None:
        """A file the engine wrote (through EngineContext.log_artifact)."""

    def optimization_done(self, history: list, details: dict) -> None:
        """The engine finished (inside its scope)."""

    def run_end(self, status: str) -> None:
        """The run ends: FINISHED, FAILED or KILLED."""


class TrackerCallback(RunCallback):
    """An MLflow `Tracker` as the driver's callback: nested runs per evaluation and per optimizer."""

    def __init__(self, tracker: Any):
        self.tracker = tracker
        self._opt_run: str | None = None
        self._eval_run: str | None = None
        self._hook: Any = None

    def run_start(self, name: str, params: dict, tags: dict) -> str | None:
        return self.tracker.start(name, params=params, tags=tags)

    @contextlib.contextmanager
    def evaluation(self, phase: str, split: str) -> Iterator[None]:
        t = self.tracker
        with t.child(f"eval/{phase}/{split}", tags={"verifirst.split": split, "verifirst.phase": phase}) as rid:
            hook = t.feedback_hook(rid, split)
            self._eval_run, self._hook = rid, hook
            try:
                yield None
            finally:
                self._hook = None
                t.attach_feedback(hook)

    def row(self, phase: str, split: str, item: Item, row: Any) -> None:
        if self._hook is not None:
            self._hook(item, row)  # notes the item's trace; attach_feedback adds the verdicts at scope end

    def evaluation_done(self, phase: str, split: str, result: EvalResult, checkpoint: Path) -> None:
        t, rid = self.tracker, self._eval_run
        summ = result.summary()
        t.log_metrics({k: summ[k] for k in ("pass_rate", "mean_score", "errors", "ci_lo", "ci_hi")}, run_id=rid)
        t.log_metrics({f"{phase}_{split}_pass_rate": summ["pass_rate"], f"{phase}_{split}_errors": summ["errors"]})
        t.log_artifact(checkpoint, "per_item", run_id=rid)

    @contextlib.contextmanager
    def optimization(self, engine_name: str) -> Iterator[None]:
        with self.tracker.child(f"optimize/{engine_name}", tags={"verifirst.phase": "optimize"}) as rid:
            self._opt_run = rid
            try:
                yield None
            finally:
                self._opt_run = None

    def iteration(self, metrics: dict, step: int) -> None:
        self.tracker.log_metrics(metrics, step, run_id=self._opt_run)

    def artifact(self, path: Path) -> None:
        self.tracker.log_artifact(path, run_id=self._opt_run)

    def optimization_done(self, history: list, details: dict) -> None:
        self.tracker.log_json(history, "history.json", run_id=self._opt_run)
        self.tracker.log_json(details, "details.json", run_id=self._opt_run)

    def run_end(self, status: str) -> None:
        self.tracker.finish(status)


def compare(before: EvalResult, after: EvalResult) -> dict:
    """Paired comparison on the items both runs scored (errors and inconclusive on either side excluded).

    Args:
        before: the unoptimized program's evaluation of a split.
        after: the optimized program's evaluation of the same split.
    """
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


def fail_if_unscored(phase: str, results: dict[str, EvalResult], run_dir: Path) -> None:
    """Raise RunFailed when an evaluated split of `phase` has items and none got a verdict.

    Args:
        phase: "before" or "after".
        results: the phase's evaluations by split.
        run_dir: the run directory a rerun resumes (its ERROR rows are asked again).
    """
    why = unscored_splits({phase: results})
    if why:  # no result to trust: nothing saved or registered
        raise RunFailed(f"run failed: {why}; nothing registered. Check the model endpoint, then rerun on the "
                        f"same run directory ({run_dir}) to resume.")


def _instructions(prog) -> dict:
    if not hasattr(prog, "named_predictors"):
        return {}
    return {n: p.signature.instructions for n, p in prog.named_predictors()}


def optimize(program: Any, scorer: Metric, items: Sequence[Item], manifest: SplitManifest,
             engine: Engine | None, budget: Budget, ctx: EngineContext, *, threads: int = 1,
             tracker: Any = None, splits: Sequence[str] = SPLITS, progress: bool | None = None,
             max_error_rate: float | None = None, ledger: TestLedger | None = None,
             callback: RunCallback | None = None, executor: Any = None) -> OptimizationResult:
    """Guard -> score every split -> engine on train + val -> score again -> paired comparisons.

    Args:
        program: the DSPy program to optimize (left unchanged; the engine works on a copy).
        scorer: the run's Metric (a verifier and the output it checks, or a plain metric).
        items: every item of the suite; `manifest` says which split each belongs to.
        manifest: the split manifest; the engine's metric records every item it scores there.
        engine: the optimizer, or None to only evaluate.
        budget: the engine's budget.
        ctx: run directory, LMs by role; its log_metrics/log_artifact are set to the callback's.
        threads: evaluation threads.
        tracker: an MLflow Tracker (wrapped in a TrackerCallback), or None.
        splits: the splits to evaluate.
        progress: show progress bars (None: when attached to a terminal).
        max_error_rate: LM error rate that stops an evaluation.
        ledger: the test-reuse ledger; default WORKDIR/test_ledger.jsonl of the run directory.
        callback: what the driver tells about the run (instead of `tracker`).
        executor: where verifier calls run, for evaluations and the engine's metric alike
            (vf.Threads, the default, or vf.Ray); closed when the run ends.

    Raises:
        RunFailed: an evaluated split in which no item got a verdict (checked before the engine
            starts and after it), or an engine that saw only errors; nothing is saved or registered.
    """
    if executor is None:
        return _optimize(program, scorer, items, manifest, engine, budget, ctx, threads=threads, tracker=tracker,
                         splits=splits, progress=progress, max_error_rate=max_error_rate, ledger=ledger,
                         callback=callback)
    try:
        if not isinstance(scorer, Metric):
            scorer = Metric(scorer)
        return _optimize(program, executor.metric(scorer), items, manifest, engine, budget, ctx,
                         threads=executor.concurrency(threads), tracker=tracker, splits=splits, progress=progress,
                         max_error_rate=max_error_rate, ledger=ledger, callback=callback)
    finally:
        executor.close()


def _optimize(program: Any, scorer: Metric, items: Sequence[Item], manifest: SplitManifest,
              engine: Engine | None, budget: Budget, ctx: EngineContext, *, threads: int, tracker: Any,
              splits: Sequence[str], progress: bool | None, max_error_rate: float | None,
              ledger: TestLedger | None, callback: RunCallback | None) -> OptimizationResult:
    if callback is None:
        callback = TrackerCallback(tracker) if tracker is not None else RunCallback()
    if not isinstance(scorer, Metric):
        scorer = Metric(scorer)
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
        ckpt = run_dir / "eval" / f"{phase}_{split}.jsonl"
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        with callback.evaluation(phase, split):
            def on_row(item: Item, row: Any) -> None:
                callback.row(phase, split, item, row)

            res = evaluate(prog, by_split[split], scorer, split=split, threads=threads, manifest=manifest,
                           checkpoint=ckpt, progress=progress, desc=f"{phase} {split}",
                           max_error_rate=max_error_rate, on_row=on_row)
            callback.evaluation_done(phase, split, res, ckpt)
        if split == "test":  # the guard let it through: this program has now been scored on the test split
            h = program_hash(prog)
            scored_on_test.append(h)
            ledger.record(manifest.digest, h, run_dir, phase)
        return res

    before = {s: run_eval(program, s, "before") for s in splits}
    fail_if_unscored("before", before, run_dir)  # before the optimizer spends anything on it
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
        metric = scorer.for_optimizer(train + val, manifest)
        trainset = [it.example() for it in train]
        valset = [it.example() for it in val]
        own_metrics, own_artifact = ctx.log_metrics, ctx.log_artifact  # a caller's own loggers still hear

        def log_metrics(m: dict, step: int) -> None:
            own_metrics(m, step)
            callback.iteration(m, step)

        def log_artifact(p: Path) -> None:
            own_artifact(p)
            callback.artifact(p)

        ctx.log_metrics, ctx.log_artifact = log_metrics, log_artifact
        usage0 = USAGE.total()
        try:
            with callback.optimization(engine.name), usage_phase("optimize"):
                res = engine.compile(program.deepcopy(), metric, trainset, valset, budget, ctx)
                callback.optimization_done(res.history, res.details)
        finally:
            manifest.save(run_dir / "split_manifest.json")  # with every item the metric evaluated
        best, history, details = res.program, res.history, dict(res.details)
        details["metric"] = metric.counts()  # items the metric could not judge scored 0.0 for DSPy
        why = optimizer_saw_only_errors(details["metric"], usage0)
        if why:  # nothing saved: a rerun against a working endpoint optimizes afresh
            raise RunFailed(why)
        _save_program(best, prog_path)
        atomic.write_json(run_dir / "engine_done.json", {"history": history, "details": details})
    after = {s: run_eval(best, s, "after") for s in splits} if engine is not None else dict(before)
    fail_if_unscored("after", after, run_dir)

    report: dict[str, Any] = {
        "engine": getattr(engine, "name", "none"), "split_digest": manifest.digest,
        "sizes": manifest.sizes(), "budget": budget.__dict__, "splits": {}, "history": history,
        "details": details,
    }
    for s in splits:
        report["splits"][s] = {"before": before[s].summary(), "after": after[s].summary(),
                               "comparison": compare(before[s], after[s])}
    if manifest.method == "time":  # cut times; windows: per-window counts, each test item's window
        report["time_split"] = manifest.time_report()
    if "test" in splits:
        report["test_reuse"] = ledger.reuse(manifest.digest, scored_on_test)
    report["instructions"] = _instructions(best)
    report["instructions_changed"] = _instructions(best) != _instructions(program)
    stages = getattr(getattr(scorer, "metric", None), "stages", None)  # the verifier's funnel, if it has one
    if stages:
        report["stage_order"] = list(stages)
    return OptimizationResult(best, report, before, after)
