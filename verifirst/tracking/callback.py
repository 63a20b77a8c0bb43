"""MLflow as an observer of the run loop: a parent run, nested runs per evaluation and per
optimizer, traces with the verifier's feedback, the report files, plots and inspection views,
the optimized prompt in the registry. The loop never sees the tracker; it sends events."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from verifirst.core.callbacks import (ArtifactWritten, EvaluationEnd, EvaluationStart, ItemStart, Iteration, OptimizerEnd,
                                     OptimizerStart, ReportReady, ReportWritten, RowScored, RunCallback, RunEnd,
                                     RunStart)
from verifirst.loop.budget_stop import test_claimed
from verifirst.loop.evaluation import has_no_verdict, no_verdict_reason
from verifirst.tracking import Tracker
from verifirst.tracking.runs import end_stale_runs, log_datasets


def tracking_failures(tracker: Tracker, result: Any) -> dict:
    """Trace operations that failed and were skipped: the tracker's own and the per-item hooks'.

    Args:
        tracker: the run's tracker (counts failed feedback, flush and link calls).
        result: the OptimizationResult whose evaluations count failed per-item hooks.
    """
    evals = {id(r): r for phase in (result.before, result.after) for r in phase.values()}.values()
    firsts = [tracker.first_failure] + [r.hook_error for r in evals]
    count = tracker.failures + sum(r.hook_failures for r in evals)
    return {"count": count, "first": next((f for f in firsts if f), None)}


def log_report_files(tracker: Tracker, report: dict, run_dir: str | Path | None = None,
                     published: bool = False) -> None:
    """Log the report's plots and report.html under report/ of the report's MLflow run (the
    tracker's parent run unless the report names another), the per-item rows as the table
    inspection/per_item.json (once: MLflow appends to an existing table), the prompt diff and
    GEPA's lineage under inspection/.

    Args:
        tracker: the run's Tracker (nothing is logged when it is disabled).
        report: the run report.
        run_dir: the run directory (default: the report's run_dir).
        published: the report files were written in run_dir just now (not drawn again).
    """
    import json

    from verifirst.report.html import report_files

    files = report_files(report, run_dir, published=published)
    if not tracker.enabled:
        return
    rid = report.get("run_id") or tracker.parent_id
    for name, path in files.items():
        if name == "inspection_per_item":
            if not tracker.has_artifact("inspection/per_item.json", run_id=rid):
                tracker.log_table(json.loads(Path(path).read_text()), "inspection/per_item.json", run_id=rid)
        elif name.startswith("inspection_"):
            tracker.log_artifact(path, "inspection", run_id=rid)
        elif name == "html":
            tracker.log_artifact(path, "report", run_id=rid)
        else:
            tracker.log_artifact(path, "report/plots", run_id=rid)


def unscored_metrics(report: dict) -> dict[str, int]:
    """Items without a verdict per phase and cause, and skipped trace operations, as run metrics.

    Args:
        report: the run report (its split summaries and tracking_failures).
    """
    from verifirst.report import unscored_totals

    names = {"lm": "items_lm_error", "verifier": "items_verifier_error", "inconclusive": "items_inconclusive",
             "program": "items_program_error"}
    out = {f"{names[cause]}_{phase}": n
           for phase in ("before", "after") for cause, n in unscored_totals(report, phase).items()}
    out["tracking_failures"] = (report.get("tracking_failures") or {}).get("count", 0)
    return out


def evaluation_metrics(summary: dict) -> dict[str, float]:
    """An evaluation's metrics: its counts always, its rates only when an item was scored (a rate
    over no item would read as a real 0%).

    Args:
        summary: the evaluation's summary (EvalResult.summary()).
    """
    out = {k: summary[k] for k in ("n", "scored", "errors")}
    if summary["scored"]:
        out.update({k: summary[k] for k in ("pass_rate", "mean_score", "ci_lo", "ci_hi")})
    return out


def _ended_as() -> str:
    """How a nested run that raised ends: KILLED while a signal stops the run, else FAILED."""
    from verifirst.core.interrupts import stop_requested

    return "KILLED" if stop_requested() is not None else "FAILED"


class MLflowCallback(RunCallback):
    """Log a run to MLflow.

    Args:
        workdir: where the local store goes when no URI is given.
        uri: the tracking URI (default: MLFLOW_TRACKING_URI, else sqlite in the workdir).
        experiment: the MLflow experiment name.
        traces: trace each evaluated program call (DSPy autolog) with the verifier's feedback.
        offline: log to the workdir's local store whatever the environment says.
        register_prompt: register the optimized instructions when the optimizer changed them.
        enabled: False observes nothing (a disabled [tracking] section).
    """

    def __init__(self, workdir: str | Path, *, uri: str | None = None, experiment: str = "verifirst",
                 traces: bool = True, offline: bool = False, register_prompt: bool = True, enabled: bool = True):
        # built now: an unreachable server refuses the run before anything is written
        self.tracker = Tracker(workdir, uri=uri, experiment=experiment, enabled=enabled, offline=offline,
                               autolog=traces)
        self.register_prompt = register_prompt
        self.run_id: str | None = None
        self._scopes: dict[str, contextlib.ExitStack] = {}
        self._eval_run: str | None = None
        self._opt_run: str | None = None
        self._hook: Any = None

    @property
    def enabled(self) -> bool:
        return self.tracker.enabled

    @property
    def uri(self) -> str:
        return self.tracker.uri

    @property
    def experiment_id(self) -> str | None:
        return self.tracker.experiment_id

    # -- the run ----------------------------------------------------------------------
    def on_run_start(self, event: RunStart) -> str | None:
        self.run_id = self.tracker.start(event.name, params=event.params, tags=event.tags)
        if event.resumed:  # a killed predecessor's runs, left RUNNING, end KILLED
            end_stale_runs(self.tracker, event.run_dir)
        if event.config is not None:
            self.tracker.log_json(event.config, "config.json")
        if event.datasets:
            try:
                log_datasets(self.tracker, event.datasets, event.suite)
            except Exception as e:  # best-effort, as traces: the items are in items.jsonl
                self.tracker.note_failure("datasets of the run", e)
        return self.run_id

    def on_evaluation_start(self, event: EvaluationStart) -> None:
        t = self.tracker
        scope = self._scopes["eval"] = contextlib.ExitStack()
        rid = scope.enter_context(t.child(f"eval/{event.phase}/{event.split}",
                                          tags={"verifirst.split": event.split, "verifirst.phase": event.phase}))
        hook = t.feedback_hook(rid, event.split)
        scope.callback(t.attach_feedback, hook)  # the verdicts join the traces when the scope closes
        self._eval_run, self._hook = rid, hook

    def item_scope(self, event: ItemStart) -> contextlib.AbstractContextManager:
        return self.tracker.item_trace(self._hook, event.item)

    def on_row(self, event: RowScored) -> None:
        if self._hook is not None:
            self._hook(event.item, event.row)

    def on_evaluation_end(self, event: EvaluationEnd) -> None:
        t, rid, res = self.tracker, self._eval_run, event.result
        self._hook = None
        no_verdict = res is not None and has_no_verdict(res)
        try:
            if res is not None:
                metrics = evaluation_metrics(res.summary())
                t.log_metrics(metrics, run_id=rid)
                t.log_metrics({f"{event.phase}_{event.split}_{k}": v for k, v in metrics.items()
                               if k in ("pass_rate", "errors", "scored")})
                t.log_artifact(event.checkpoint, "per_item", run_id=rid)
            if no_verdict:  # the run fails on it: say why on the run that shows it
                why = no_verdict_reason(event.phase, event.split, res)
                t.set_tags({"verifirst.failure": why, "mlflow.note.content": why}, run_id=rid)
        finally:
            self._close("eval", failed=res is None or no_verdict, status=_ended_as())

    def on_optimizer_start(self, event: OptimizerStart) -> None:
        scope = self._scopes["opt"] = contextlib.ExitStack()
        self._opt_run = scope.enter_context(self.tracker.child(f"optimize/{event.engine}",
                                                               tags={"verifirst.phase": "optimize"}))

    def on_iteration(self, event: Iteration) -> None:
        self.tracker.log_metrics(event.metrics, event.step, run_id=self._opt_run)

    def on_artifact(self, event: ArtifactWritten) -> None:
        self.tracker.log_artifact(event.path, run_id=self._opt_run)

    def on_optimizer_end(self, event: OptimizerEnd) -> None:
        try:
            if not event.failed:
                self.tracker.log_json(event.history, "history.json", run_id=self._opt_run)
                self.tracker.log_json(event.details, "details.json", run_id=self._opt_run)
        finally:
            self._opt_run = None
            self._close("opt", failed=event.failed, status=_ended_as())

    def on_report(self, event: ReportReady) -> None:
        rep, t = event.report, self.tracker
        rep["tracking_uri"] = t.uri
        rep["tracking_failures"] = tracking_failures(t, event.result)
        # only what the optimizer changed is registered: a kept seed prompt is no new version
        if self.register_prompt and t.enabled and rep.get("instructions") and rep.get("instructions_changed") \
                and test_claimed(rep):
            name = f"{rep['experiment']}-instructions".replace(" ", "-")
            text = "\n\n".join(f"## {k}\n{v}" for k, v in rep["instructions"].items())
            rep["prompt_uri"] = t.register_prompt(name, text, tags={
                "split_digest": rep.get("split_digest", ""), "run_id": self.run_id or "", "engine": rep.get("engine")})

    def on_report_written(self, event: ReportWritten) -> None:
        t, rep, run_dir = self.tracker, event.report, Path(event.run_dir)
        if not t.enabled:
            return
        for p in event.paths:
            if Path(p).name in ("report.json", "report.md"):
                t.log_artifact(p, "report")
        log_report_files(t, rep, run_dir, published=any(Path(p).name == "report.html" for p in event.paths))
        t.log_artifact(run_dir / "split_manifest.json")
        if (run_dir / "optimized_program.json").exists():
            t.log_artifact(run_dir / "optimized_program.json", "program")
        t.log_json(rep["usage"], "usage.json")
        sp = rep.get("spend")
        if isinstance(sp, dict):  # spend/usd, spend/tokens, spend/lm_calls, and per role
            t.log_metrics({f"spend/{k}": float(v) for k, v in (sp.get("run") or {}).items()
                           if isinstance(v, (int, float))})
            t.log_metrics({f"spend/{role}/{k}": float(v) for role, c in (sp.get("roles") or {}).items()
                           for k, v in c.items() if isinstance(v, (int, float))})
        u = rep["usage_this_run"]
        t.log_metrics({"lm_calls": u["lm_calls"], "cache_hits": u["cache_hits"], "lm_errors": u["errors"],
                       "prompt_tokens": u["prompt_tokens"], "completion_tokens": u["completion_tokens"],
                       **unscored_metrics(rep)})

    def on_run_end(self, event: RunEnd) -> None:
        # Every step is tried, so the parent run ends even when a nested one cannot (a full disk);
        # the first failure is raised after the others ran.
        first: Exception | None = None
        steps = [lambda name=name: self._close(name, failed=event.status != "FINISHED",
                                               status="KILLED" if event.status == "KILLED" else "FAILED")
                 for name in list(self._scopes)]
        if event.stopped_by:
            steps.append(lambda: self.tracker.set_tags({"verifirst.stopped_by": event.stopped_by[:500]}))
        if event.failure:  # the run's description too: the reason shows on the run's page
            steps.append(lambda: self.tracker.set_tags({"verifirst.failure": event.failure,
                                                        "mlflow.note.content": event.failure}))
        steps.append(lambda: self.tracker.finish(event.status))
        for step in steps:
            try:
                step()
            except Exception as e:  # noqa: BLE001 - raised after every step ran
                first = first or e
        if first is not None:
            raise first

    def _close(self, name: str, failed: bool = False, status: str = "FAILED") -> None:
        """Close a nested run's scope: `status` (FAILED, or KILLED for a run stopped by a signal) when
        what it scoped raised, as a `with` block would be."""
        scope = self._scopes.pop(name, None)
        if scope is None:
            return
        if failed:
            err = RuntimeError(f"{name} {status.lower()}")
            err.mlflow_status = status  # type: ignore[attr-defined]
            scope.__exit__(RuntimeError, err, None)
        else:
            scope.close()
