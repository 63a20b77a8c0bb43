"""The one driver: (program, metric, items, splits, engine, budget) -> (program, report).

`optimize` admits train + val through the split guard, scores the unoptimized program on every
split, runs the engine, scores the result, and compares the two pairwise (McNemar exact, Wilson
CIs, paired bootstrap). The test split is scored only through the guard, after selection; each
test evaluation goes into the workdir's test-reuse ledger, and the report says how many other
programs were already scored on the same test split.

`run` is the one run loop around it: every entry point (the CLI's `run` and `calibrate`, the
TOML file, `vf.optimize`, `vf.run`, `vf.calibrate`) comes through it. It locks the run directory,
refuses to resume another run's, records the run state, tells the observers (typed events of
`verifirst.core.callbacks`: tracking, console, a domain's post-steps), adds usage to the report and
hands it to the caller's `publish` (the report files). Engines never see a tracker, only
`EngineContext.log_metrics`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from verifirst.core import atomic

from verifirst.core import stats
from verifirst.core.callbacks import (ArtifactWritten, EvaluationEnd, EvaluationStart, ItemStart, Iteration, OptimizerEnd,
                        OptimizerStart, ReportReady, ReportWritten, RowScored, RunCallback, RunEnd, RunStart,
                        as_callback)
from verifirst.core.engine import Budget, Engine, EngineContext, EngineResult
from verifirst.core.errors import RunFailed
from verifirst.loop.evaluation import (EvalResult, Row, evaluate, no_verdict_reason, optimizer_saw_only_errors,
                                       unscored_split)
from verifirst.loop.ledger import TestLedger, ledger_for_run_dir, program_hash
from verifirst.lm import USAGE, usage_phase
from verifirst.lm.spend import active_meter, refused
from verifirst.core.metric import Metric
from verifirst.loop.budget_stop import NOT_SCORED, TEST_COST_FILE, TestCost, stopped_section
from verifirst.loop.run_items import write_items
from verifirst.lm.call_journal import CALLS_FILE
from verifirst.loop.executor import wall_capped
from verifirst.loop.run_state import (USAGE_KEYS, RunRequest, _add_usage, _record_failure, _state,  # noqa: F401
                                      budget_params, check_resume, failure_message, run_digest, run_params,
                                      spend_meter)
from verifirst.loop.splits import SPLITS, SplitManifest
from verifirst.core.task import Item


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


def score_split(program: Any, items: Sequence[Item], scorer: Metric, **kw: Any) -> EvalResult:
    """One split of `items` scored by the loop's own evaluation (the objective's selection scores its
    candidates through here, so the driver stays the one place splits are evaluated).

    Args:
        program, items, scorer: as evaluation.evaluate takes them.
        kw: evaluate's keywords (split, threads, manifest, checkpoint, progress, desc, item_scope).
    """
    return evaluate(program, items, scorer, **kw)


def fail_if_unscored(phase: str, results: dict[str, EvalResult], run_dir: Path) -> None:
    """Raise RunFailed when an evaluated split of `phase` has items and none got a verdict.

    Args:
        phase: "before" or "after".
        results: the phase's evaluations by split.
        run_dir: the run directory a rerun resumes (its ERROR rows are asked again).
    """
    found = unscored_split({phase: results})
    if found:  # no result to trust: nothing saved or registered
        res = found[2]
        raise RunFailed(f"run failed: {no_verdict_reason(*found)}; nothing registered. {unscored_advice(res)}, "
                        f"then rerun on the same run directory ({run_dir}) to resume.")


# What most items without a verdict say, and what to do about it, by cause.
UNSCORED_ADVICE = {
    "lm": ("LM errors", "check the model endpoint (api_base, key, the role's timeout_s)"),
    "program": ("program errors: the program raised", "fix it"),
    "verifier": ("verifier errors: the metric or verifier raised", "fix it"),
    "inconclusive": ("inconclusive: the verifier could not decide", "see why in each item's feedback (eval/*.jsonl)"),
}


def unscored_advice(res: EvalResult) -> str:
    """The dominant cause of a split's missing verdicts, its first error, and the advice that fits it.

    Args:
        res: an evaluation in which no item got a verdict.
    """
    kind = res.dominant_unscored() or "lm"
    what, fix = UNSCORED_ADVICE[kind]
    share = "All" if res.unscored_counts()[kind] == res.n else "Mostly"
    first = res.first_unscored(kind)
    return f"{share} {what} (first, item {first.id}: {_row_detail(first)}); {fix}" if first else f"{share} {what}; {fix}"


def _row_detail(row: Row) -> str:
    """A row's error, or for an inconclusive one the first line of its feedback."""
    text = row.error or (row.feedback or "").strip().split("\n")[0] or row.status
    return text[:300]


def _instructions(prog) -> dict:
    if not hasattr(prog, "named_predictors"):
        return {}
    return {n: p.signature.instructions for n, p in prog.named_predictors()}


def optimize(program: Any, scorer: Metric, items: Sequence[Item], manifest: SplitManifest,
             engine: Engine | None, budget: Budget, ctx: EngineContext, *, threads: int = 1,
             splits: Sequence[str] = SPLITS, progress: bool | None = None,
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
        splits: the splits to evaluate.
        progress: show progress bars (None: when attached to a terminal).
        max_error_rate: LM error rate that stops an evaluation.
        ledger: the test-reuse ledger; default WORKDIR/test_ledger.jsonl of the run directory.
        callback: the observers of the evaluations and the engine (verifirst.core.callbacks).
        executor: where verifier calls run, for evaluations and the engine's metric alike
            (vf.Threads, the default, or vf.Ray); closed when the run ends.

    Raises:
        RunFailed: an evaluated split in which no item got a verdict (checked before the engine
            starts and after it), or an engine that saw only errors; nothing is saved or registered.
    """
    if executor is None:
        return _optimize(program, scorer, items, manifest, engine, budget, ctx, threads=threads,
                         splits=splits, progress=progress, max_error_rate=max_error_rate, ledger=ledger,
                         callback=callback)
    try:
        if not isinstance(scorer, Metric):
            scorer = Metric(scorer)
        return _optimize(program, executor.metric(scorer), items, manifest, engine, budget, ctx,
                         threads=executor.concurrency(threads), splits=splits, progress=progress,
                         max_error_rate=max_error_rate, ledger=ledger, callback=callback)
    finally:
        executor.close()


def _optimize(program: Any, scorer: Metric, items: Sequence[Item], manifest: SplitManifest,
              engine: Engine | None, budget: Budget, ctx: EngineContext, *, threads: int,
              splits: Sequence[str], progress: bool | None, max_error_rate: float | None,
              ledger: TestLedger | None, callback: RunCallback | None) -> OptimizationResult:
    if callback is None:
        callback = RunCallback()
    if not isinstance(scorer, Metric):
        scorer = Metric(scorer)
    scorer = wall_capped(scorer)  # a metric running past max_wall_s stops the run, naming the cap
    run_dir = Path(ctx.run_dir)
    ledger = ledger or ledger_for_run_dir(run_dir)
    scored_on_test: list[str] = []
    run_dir.mkdir(parents=True, exist_ok=True)
    by_split = {s: manifest.select(items, s) for s in SPLITS}
    train, val = by_split["train"], by_split["val"]
    # The guard: the engine sees train and val only, and we record that it did.
    manifest.admit_to_optimizer([it.id for it in train + val], who=getattr(engine, "name", "optimizer"))
    manifest.save(run_dir / "split_manifest.json")
    write_items(run_dir, items, manifest)

    def run_eval(prog, split: str, phase: str, checkpoint: Path | None = None) -> EvalResult:
        ckpt = checkpoint or run_dir / "eval" / f"{phase}_{split}.jsonl"
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        callback.on_evaluation_start(EvaluationStart(phase, split))
        res = None
        try:
            def on_row(item: Item, row: Any) -> None:
                callback.on_row(RowScored(phase, split, item, row))

            res = evaluate(prog, by_split[split], scorer, split=split, threads=threads, manifest=manifest,
                           checkpoint=ckpt, progress=progress, desc=f"{phase} {split}",
                           max_error_rate=max_error_rate, on_row=on_row,
                           item_scope=lambda item: callback.item_scope(ItemStart(phase, split, item)))
        finally:
            callback.on_evaluation_end(EvaluationEnd(phase, split, res, ckpt))
        if split == "test":  # the guard let it through: this program has now been scored on the test split
            h = program_hash(prog)
            scored_on_test.append(h)
            ledger.record(manifest.digest, h, run_dir, phase)
        return res

    test_cost = TestCost(_limited_meter(), run_dir)
    before = {}
    for s in splits:
        if s == "test":
            test_cost.start()
        before[s] = run_eval(program, s, "before")
        if s == "test":
            test_cost.stop()
    if refused() is not None:  # the budget ran out before the optimizer could start
        raise refused()
    fail_if_unscored("before", before, run_dir)  # before the optimizer spends anything on it
    held = test_cost.hold_back() if "test" in splits and engine is not None else None
    stopped = None  # the refused call that stopped the optimizer, if one did
    best_so_far = False  # the engine stopped at its last completed iteration and returned the best of them
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
            callback.on_iteration(Iteration(m, step))

        def log_artifact(p: Path) -> None:
            own_artifact(p)
            callback.on_artifact(ArtifactWritten(Path(p)))

        ctx.log_metrics, ctx.log_artifact = log_metrics, log_artifact
        usage0 = USAGE.total()
        try:
            callback.on_optimizer_start(OptimizerStart(engine.name))
            end = OptimizerEnd([], {}, failed=True)
            try:
                with usage_phase("optimize"):
                    res = engine.compile(program.deepcopy(), metric, trainset, valset, budget, ctx)
                end = OptimizerEnd(res.history, res.details)
            finally:
                callback.on_optimizer_end(end)
        except Exception:
            if refused() is None:
                raise
            res = None  # the budget, not the engine, ended it: nothing the engine did is kept
        finally:
            manifest.save(run_dir / "split_manifest.json")  # with every item the metric evaluated
        stopped = refused()
        if stopped is not None:
            # Its state may hold steps whose calls were refused (scored as errors): it goes, so a resume
            # with a larger budget redoes the engine (its calls served by the cache) and ends where an
            # unbudgeted run would have.
            _discard_engine_state(run_dir)
            best_so_far = res is not None and res.stopped == "budget"
            if not best_so_far:
                res = EngineResult(program.deepcopy(), list(res.history) if res else [], {})
        best, history, details = res.program, res.history, dict(res.details)
        details["metric"] = metric.counts()  # items the metric could not judge scored 0.0 for DSPy
        why = None if stopped is not None else optimizer_saw_only_errors(details["metric"], usage0)
        if why:  # nothing saved: a rerun against a working endpoint optimizes afresh
            raise RunFailed(why)
        _save_program(best, prog_path)
        if stopped is None:
            atomic.write_json(run_dir / "engine_done.json", {"history": history, "details": details})
    test_cost.release()
    not_scored: dict[str, str] = {}
    engine_finished = stopped is None
    if engine is None:
        after = dict(before)
    elif stopped is not None:
        after, not_scored = _score_stopped(best, program, before, splits, run_eval, run_dir)
    elif _limited_meter() is None:
        after = {s: run_eval(best, s, "after") for s in splits}
    else:  # the engine finished: test first, then what the budget leaves
        after, not_scored = _score_budgeted(best, splits, run_eval)
        stopped = refused() if not_scored else None
    fail_if_unscored("after", after, run_dir)

    report: dict[str, Any] = {
        "engine": getattr(engine, "name", "none"), "split_digest": manifest.digest,
        "sizes": manifest.sizes(), "budget": budget.__dict__, "splits": {}, "history": history,
        "details": details,
    }
    for s in splits:
        if s in after:
            report["splits"][s] = {"before": before[s].summary(), "after": after[s].summary(),
                                   "comparison": compare(before[s], after[s])}
        else:
            report["splits"][s] = {"before": before[s].summary(), "after": None, "comparison": None,
                                   "not_scored": not_scored[s]}
    if stopped is not None:
        kept = ("the optimizer's finished result" if engine_finished
                else "the optimizer's best on validation of the iterations it completed" if best_so_far
                else "the start program (the optimizer keeps no completed iteration)")
        report["stopped"] = stopped_section(stopped, kept, held, not_scored)
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


def _limited_meter():
    """The active spend meter when it has limits (every run has one; without limits it only accounts)."""
    meter = active_meter()
    return meter if meter is not None and meter.limited else None


def _unless_refused(evaluate_split) -> EvalResult | None:
    """The evaluation's result, or None when the budget refused one of its calls (an evaluation that
    raised for another reason raises)."""
    meter = active_meter()
    refusals = meter.refusals
    try:
        res = evaluate_split()
    except Exception:
        if meter.refusals == refusals:
            raise
        return None
    return res if meter.refusals == refusals else None


def _score_stopped(best, start, before: dict, splits, run_eval, run_dir: Path) -> tuple[dict, dict]:
    """After a budget stop: the test split scored once with what was held back for it (the start
    program kept: its own test rows stand); train and validation not scored again."""
    not_scored = {s: NOT_SCORED for s in splits if s != "test"}
    if "test" not in splits:
        return {}, not_scored
    if program_hash(best) == program_hash(start):
        return {"test": before["test"]}, not_scored
    ckpt = run_dir / "eval" / "stopped" / "after_test.jsonl"  # never a resumed run's rows: they score another program
    ckpt.unlink(missing_ok=True)
    res = _unless_refused(lambda: run_eval(best, "test", "after", checkpoint=ckpt))
    if res is None:
        return {}, {**not_scored, "test": NOT_SCORED}
    return {"test": res}, not_scored


def _score_budgeted(best, splits, run_eval) -> tuple[dict, dict]:
    """After an engine that finished under a budget: the test split first (what was held back for
    it is free again), then the other splits while the budget lasts; a split the budget cut short
    is "not scored" (its rows kept: a resume finishes it)."""
    meter = active_meter()
    after, not_scored = {}, {}
    for s in sorted(splits, key=lambda s: s != "test"):
        res = None if meter.first_refusal is not None else _unless_refused(lambda: run_eval(best, s, "after"))
        if res is None:
            not_scored[s] = NOT_SCORED
        else:
            after[s] = res
    return after, not_scored


# What the loop itself keeps in a run directory; everything else there is the engine's own state.
LOOP_FILES = {"eval", "split_manifest.json", "items.jsonl", "run_state.json", "run.lock", "optimized_program.json",
              "engine_done.json", TEST_COST_FILE, CALLS_FILE}


def _discard_engine_state(run_dir: Path) -> None:
    """An engine stopped by the budget may have checkpointed steps whose calls were refused (scored as
    errors): its state goes, so a resume redoes the engine from the start, its calls served by the
    cache (paid once), and ends where an unbudgeted run would have."""
    import shutil

    for p in Path(run_dir).iterdir():
        if p.name not in LOOP_FILES:
            shutil.rmtree(p) if p.is_dir() else p.unlink()



def run(req: RunRequest, callbacks: Any = None, publish: Any = None) -> tuple[OptimizationResult, str | None]:
    """The one run loop: lock the run directory, resume or start it, run `optimize`, report.

    Every LM request is journaled as it goes out (RUN_DIR/calls.jsonl), so a resumed run counts the
    requests of every earlier invocation, in its usage and against its limits. SIGINT and SIGTERM
    stop the run after the requests in flight (verifirst.loop.run_guard): every MLflow run it
    opened ends KILLED, run_state.json holds usage and spend, and RunInterrupted says how to resume.

    Args:
        req: the checked run (`vf.optimize` builds it; so do `vf.run`, the CLI and calibration,
            all through `vf.optimize`).
        callbacks: a RunCallback or a list of them (verifirst.core.callbacks), told every event.
        publish: (report, run_dir) -> paths of the report files written (the caller's report
            writer; the loop sits below the report layer and names none).

    Returns:
        (the driver's result with the full report, the tracker's run id or None).

    Raises:
        RunFailed: a split without a verdict or an engine that saw only errors; the run directory
            stays resumable, nothing is published.
        RunInterrupted: SIGINT or SIGTERM (exit code 130 or 143); the run directory resumes.
        StorageError: the disk or the run directory failed under the run (exit code 74).
    """
    import contextlib
    import time

    from verifirst.core.callbacks import CallbackList
    from verifirst.core.interrupts import RunInterrupted, StopRequested, stop_requested
    from verifirst.lm.spend import BudgetExceeded, metering
    from verifirst.loop.run_guard import RunDirGuard, interrupted_message, open_meter, stop_on_signals, storage_failure
    from verifirst.loop.rundir import lock_run_dir

    check_resume(req.ctx.run_dir, req.digest)  # before the lock: a refused run writes nothing
    hold = lock_run_dir(req.ctx.run_dir, fresh=req.fresh)  # another process on this run dir is refused, by pid
    try:
        resumed = check_resume(hold.path, req.digest)  # again under the lock: another run may have started it
        meter, journal = open_meter(req.budget, hold.path, spend_meter)
    except BaseException:
        hold.release()
        raise
    run_dir = req.ctx.run_dir = hold.path
    cb = CallbackList([RunDirGuard(hold.fd, run_dir), as_callback(callbacks)])
    status, report, stopped_by, failure = "FAILED", None, None, None

    def end_state(status_: str, **extra: Any) -> dict:
        return {**_state(req, status_), **extra, "usage_run_dir": journal.totals(),
                "spend": meter.spent() if meter.limited else None}

    try:
        with stop_on_signals():
            opt = getattr(req.engine, "name", "none")
            run_id = cb.on_run_start(RunStart(
                name=req.name, run_dir=run_dir, suite=req.suite, n_items=len(req.items), sizes=req.manifest.sizes(),
                split_digest=req.manifest.digest, optimizer=opt, resumed=resumed, config=req.config,
                params=run_params(req, opt),
                tags={"verifirst.split_digest": req.manifest.digest, "verifirst.suite": req.suite,
                      "verifirst.optimizer": opt, "verifirst.run_dir": str(run_dir)},
                datasets=split_datasets(req.items, req.manifest, req.eval_splits)))
            atomic.write_json(run_dir / "run_state.json", _state(req, "running"))
            usage_before, t0 = USAGE.total(), time.time()
            with (req.lm_scope() if req.lm_scope else contextlib.nullcontext()), metering(meter):
                ask = req.request  # what the caller asked for, read here and nowhere re-spread
                res = optimize(ask.program, req.scorer, req.items, req.manifest, req.engine, req.budget, req.ctx,
                               threads=ask.threads, splits=req.eval_splits, progress=ask.progress,
                               max_error_rate=ask.max_error_rate, ledger=req.ledger, callback=cb,
                               executor=ask.executor)
                report = res.report
                report.update({"experiment": req.name, "suite": req.suite, "metric": req.scorer.name,
                               "run_dir": str(run_dir), "run_id": run_id, "wall_s": round(time.time() - t0, 2),
                               "models": req.models})
                _add_usage(report, usage_before, meter)
                cb.on_report(ReportReady(report, run_dir, res))  # in the LM scope: a post-step may ask the LM
                _add_usage(report, usage_before, meter)  # with the post-steps' calls (a baseline, the anchors)
            stop = report.get("stopped")
            if stop:
                stopped_by = stop["by"]
            paths = list(publish(report, run_dir)) if publish else []
            cb.on_report_written(ReportWritten(report, run_dir, tuple(paths)))
            if stop:  # resumable with a larger limit: the engine is redone, its calls served by the cache
                atomic.write_json(run_dir / "run_state.json", {**end_state("stopped"), "run_id": run_id,
                                                               "stopped_by": stopped_by})
                if stop["test"] != "scored":
                    status = "KILLED"
                    first = meter.first_refusal
                    raise BudgetExceeded(first.limit, first.role, first.spent, first.cap, first.need, message=(
                        f"{stopped_by}; test not scored: budget (the report in {run_dir} claims nothing). Nothing "
                        f"past the limit was sent; rerun on the same run directory with a larger limit to resume"))
            else:
                atomic.write_json(run_dir / "run_state.json", {**_state(req, "finished", run_id),
                                                               "usage_run_dir": journal.totals()})
            status = "FINISHED"
            return res, run_id
    except (StopRequested, KeyboardInterrupt) as e:
        import signal

        signum = getattr(e, "signum", None) or stop_requested() or signal.SIGINT
        status = "KILLED"
        failure = interrupted_message(signum, run_dir, journal)
        _write_quietly(run_dir / "run_state.json", end_state("interrupted", signal=int(signum), failure=failure))
        raise RunInterrupted(signum, failure) from None
    except Exception as e:
        failure = failure_message(e)
        broken = storage_failure(e, run_dir)
        if broken is not None:
            failure = failure_message(broken)
            _write_quietly(run_dir / "run_state.json", end_state("failed", failure=failure))
            raise broken from None
        if report is not None and report.get("stopped"):
            raise  # stopped with its report published (test not scored): the state is written
        # A refused call stops the run, whatever an engine made of it (an error count, a failed step):
        # nothing past the cap was sent, and the run directory resumes with a larger limit.
        refused = e if isinstance(e, BudgetExceeded) else meter.first_refusal
        if refused is None:
            _record_failure(req, run_dir, failure)
            raise
        status, stopped_by = "KILLED", refused.message
        atomic.write_json(run_dir / "run_state.json", end_state("stopped", stopped_by=refused.message))
        stop = BudgetExceeded(refused.limit, refused.role, refused.spent, refused.cap, refused.need,
                              message=f"{refused.message}. Nothing past the limit was sent; rerun on the same run "
                                      f"directory ({run_dir}) with a larger limit to resume (finished evaluations "
                                      f"are kept; with the LM cache on, calls already made are free)")
        failure = failure_message(stop)
        raise stop from None
    finally:
        try:
            cb.on_run_end(RunEnd(status, run_dir, report, stopped_by, failure))
        except Exception as e:  # an observer that cannot close (its store is full) after the run failed
            if status == "FINISHED":
                raise storage_failure(e, run_dir) or e
        finally:
            journal.close()
            hold.release()


def _write_quietly(path: Path, body: dict) -> None:
    """Write run_state.json unless the storage that failed the run refuses it too."""
    try:
        atomic.write_json(path, body)
    except OSError:
        pass


def split_datasets(items: Sequence[Item], manifest: SplitManifest, splits: Sequence[str]) -> dict:
    """{split: {"digest", "records"}} of the evaluated splits, for a tracker's datasets (train,
    validation, test). The digest is the split's: its manifest's digest and its item ids.

    Args:
        items: every item of the run.
        manifest: the split manifest.
        splits: the splits the run evaluates (train and val always reach the optimizer).
    """
    import hashlib

    from verifirst.loop.run_items import item_record

    out = {}
    for s in dict.fromkeys(["train", "val", *splits]):
        chosen = manifest.select(items, s)
        ids = "\n".join(str(it.id) for it in chosen)
        digest = hashlib.sha256(f"{manifest.digest}\n{s}\n{ids}".encode()).hexdigest()[:16]
        out[s] = {"digest": digest, "records": [item_record(it, s) for it in chosen]}
    return out
