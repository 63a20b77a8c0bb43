"""The judge domain's steps on the one loop (`CalibrationSteps`, a RunCallback): progress lines, then,
when the report is ready, the judge statistics, calibrated_prompt.txt, the review queue, the anchors,
the baseline, the registered prompt and its champion alias; and their calls in a dry run's estimate."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


from verifirst.core import atomic

from verifirst.loop.splits import SplitManifest
from verifirst.core.callbacks import RunCallback
from verifirst.loop.budget_stop import test_claimed
from verifirst.loop.ledger import LEDGER_FILE, TestLedger
from verifirst.judging.robustness import metrics as robustness_metrics, perturbation_suite, promotion_gate
from verifirst.core.task import Suite
from verifirst.tracking import Tracker
from verifirst.judge.anchor import record_anchor, run_anchor
from verifirst.judge.baseline import record_baseline, score_baseline
from verifirst.judge.options import REVIEW_QUEUE_FILE, lm_spec, held_out_pi, val_pi_of, judge_section
from verifirst.judge.promotion import CHAMPION, promote
from verifirst.judge.prompts import StartPrompt, score_prompt
from verifirst.judge.judge_report import judge_report


def _progress(echo, metrics: dict, step: int) -> None:
    shown = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())
    echo(f"  step {step}: {shown}")


@dataclass
class CalibrationSettings:
    """What a calibration run was asked to do, beyond the loop's own arguments (its post-steps'
    inputs; also logged as the run's settings and part of its resume key)."""

    judge: str = "passfail"
    max_iters: int = 5
    threads: Any = 1  # the run's judge Pool (verifirst.judge.pool), made once from the request's threads
    view: str | None = None
    repeats: int = 1
    model: str | None = None  # the judge model spec (the anchor's model)
    workdir: Path = Path(".verifirst")
    experiment: str = "verifirst-calibrate"  # the MLflow experiment (its -review twin holds the queue)
    start: "StartPrompt | None" = None
    promote_alias: str | None = None
    promote_rule: Any = None
    budget: Any = None  # a vf.Budget whose spend limits hold for the run (max_iters and threads come from here)
    aligners: list = field(default_factory=list)
    anchor_engine: Any = None
    n_boot: int = 2000
    baseline: "StartPrompt | None" = None  # --baseline: the deployed prompt scored beside, per time window
    cache: bool = True  # the workdir's disk cache of LM replies
    robustness: Any = None  # a perturbation suite (True: built-in) gating promotion (verifirst.judging.robustness)
    extra: dict = field(default_factory=dict)  # report sections known before the run (labels, from_mlflow)


class CalibrationSteps(RunCallback):
    """The judge domain's steps on the one loop: progress lines, then, when the report is ready,
    the judge statistics, calibrated_prompt.txt, the review queue, the anchors, the registered
    prompt and its champion alias (moved only on validation evidence).

    Args:
        settings: the calibration's settings.
        suite: the outcome records.
        manifest: the run's split manifest (the loop records in it every item the engine scored).
        program: the starting judge program (the uncalibrated judge).
        engine: the AutoRefine engine the loop runs.
        lms: {"judge", "teacher", "reflection"} LMs.
        mlflow: the run's MLflow observer (registry and review-queue export), or None.
        echo: where progress lines go.
        source_line: the lines said before the splits (records read from MLflow traces).
    """

    def __init__(self, settings: CalibrationSettings, suite: Suite, manifest: SplitManifest, program: Any,
                 engine: Any, lms: dict, mlflow: Any, echo: Callable[[str], None], source_line: str | None = None):
        self.s, self.suite, self.program, self.engine, self.lms = settings, suite, program, engine, lms
        self.manifest = manifest
        self.mlflow, self.echo, self.source_line = mlflow, echo, source_line
        self.log_metrics: Callable[[dict, int], None] | None = None
        self.run_id: str | None = None

    def on_run_start(self, event) -> None:
        if self.source_line:
            self.echo(self.source_line)
        z = event.sizes
        self.echo(f"{event.suite}: {event.n_items} outcome records; splits train {z['train']} / val {z['val']} / "
                  f"test {z['test']} (digest {event.split_digest}); run dir {event.run_dir}")
        m = self.manifest
        if m.method == "time":
            c = m.cuts
            self.echo(f"time split on {m.time_field}: train to {c.get('train_end')}, validation from "
                      f"{c.get('val_start')}, test from {c.get('test_start')}")
        return None

    def on_iteration(self, event) -> None:
        _progress(self.echo, event.metrics, event.step)
        if self.log_metrics is not None:
            self.log_metrics(event.metrics, event.step)

    def on_report(self, event) -> None:
        s, rep, res, run_dir = self.s, event.report, event.result, Path(event.run_dir)
        self.run_id = rep.get("run_id")
        manifest = self.manifest
        rep["judge"] = judge_report(self.program, res.before, res.after, self.suite.items, manifest,
                                             rep["details"], judge_lm=self.lms["judge"],
                                             teacher_lm=self.lms["teacher"], threads=s.threads, n_boot=s.n_boot)
        prompt_text = rep["judge"].get("calibrated_prompt") or getattr(res.program, "prompt", "")
        atomic.write_text(run_dir / "calibrated_prompt.txt", str(prompt_text) + "\n")
        rep["models"] = {"judge": lm_spec(self.lms["judge"], s.model), "teacher": lm_spec(self.lms["teacher"], s.model),
                         "proposer": lm_spec(self.lms["reflection"], s.model)}
        rep.update(s.extra)
        if s.start is not None:
            rep["start_prompt"] = {"source": s.start.source, "name": s.start.name, "version": s.start.version,
                                   "alias": s.start.alias, "view": s.view}
        tracker = self.mlflow.tracker if self.mlflow is not None else None
        judged = judge_section(rep)
        rep["review_queue"] = export_review_queue(judged.get("review_queue") or [], run_dir, tracker,
                                                  s.experiment, self.run_id, self.echo)
        stopped = rep.get("stopped")
        if stopped and (s.aligners or s.baseline is not None):  # their calls would cross the limit that stopped the run
            self.echo("the anchors and the baseline are not scored: the run was stopped by its budget")
        if s.aligners and not stopped:
            self.echo(f"anchor: MLflow make_judge + Judge.align({', '.join(a.upper() for a in s.aligners)}) on the "
                      f"same train split ...")
            rep["anchor"] = run_anchor(self.suite, manifest, rep, s.model or "local", s.workdir,
                                       engine=s.anchor_engine, aligners=s.aligners)
            rep["test_reuse"] = record_anchor(TestLedger(s.workdir / LEDGER_FILE), rep, run_dir)
        if s.baseline is not None and not stopped:
            rep["baseline"] = score_baseline(s, self.suite, manifest, res, rep, self.lms["judge"])
            rep["test_reuse"] = record_baseline(TestLedger(s.workdir / LEDGER_FILE), rep, run_dir, s.baseline)
        if tracker is not None and tracker.enabled and test_claimed(rep):
            self._track(tracker, rep, judged, manifest)

    def _track(self, tracker: Tracker, rep: dict, judged: dict, manifest: SplitManifest) -> None:
        s = self.s
        for jname, j in judged.get("test", {}).get("judges", {}).items():
            tracker.log_metrics({f"test_{jname}_pi": j["pi"], f"test_{jname}_fail_recall": j["fail_recall"],
                                 f"test_{jname}_fail_precision": j["fail_precision"],
                                 f"test_{jname}_pass_recall": j["pass_recall"]})
        t = judged.get("teacher", {})
        tracker.log_metrics({f"teacher_{k}": v for k, v in t.items() if isinstance(v, (int, float))})
        pname = s.start.name if s.start else f"verifirst-{s.judge}-judge"
        uri = tracker.register_prompt(pname, judged["calibrated_prompt"], tags={
            "split_digest": manifest.digest, "test_pi": f"{held_out_pi(rep) or float('nan'):.6f}",
            "val_pi": f"{val_pi_of(rep):.6f}",
            "run_id": self.run_id or "", "judge": s.judge, "threshold": str(judged.get("calibrated_threshold")),
            **({"calibrated_from": s.start.source, "view": s.view or ""} if s.start else {})},
            message=f"AutoRefine, {s.max_iters} max iterations, run {self.run_id}")
        rep["prompt_uri"] = uri
        val_items = manifest.select(self.suite.items, "val")

        def rescore(text: str, threshold: float | None) -> dict:
            return score_prompt(s.judge, sorted(self.suite.items[0].inputs), text, threshold, val_items,
                                 self.lms["judge"], s.threads, s.view)

        robust = None if not s.robustness else promotion_gate(
            lambda text, th, its: score_prompt(s.judge, sorted(self.suite.items[0].inputs), text, th, its,
                                                self.lms["judge"], s.threads, s.view),
            judged["calibrated_prompt"], judged.get("calibrated_threshold"), val_items, s.robustness)
        alias = s.promote_alias if s.start else (s.promote_alias or CHAMPION)
        if alias:
            rep["champion"] = promote(tracker, pname, int(uri.rsplit("/", 1)[1]), rep, rescore, alias=alias,
                                      rule=s.promote_rule, robustness=robust)
            tracker.log_metrics(robustness_metrics(rep["champion"].get("robustness")))
        else:
            rep["champion"] = {"moved": False, "alias": None, "decided_on": "validation",
                               "reason": "no alias moves without --promote ALIAS"}

    def on_report_written(self, event) -> None:
        tracker = self.mlflow.tracker if self.mlflow is not None else None
        if tracker is None or not tracker.enabled:
            return
        for f in ("calibrated_prompt.txt", "split_manifest.json", REVIEW_QUEUE_FILE):
            if (Path(event.run_dir) / f).exists():
                tracker.log_artifact(Path(event.run_dir) / f, "report")


def estimate_promotion(est: Any, s: CalibrationSettings, manifest: SplitManifest) -> None:
    """Add the promotion step's judge calls (the alias's current prompt re-scored on validation) to an estimate."""
    from verifirst.loop.estimate import Line

    one = next((ln for ln in est.lines if ln.phase.startswith("before ")), None)
    if one is not None and (s.promote_alias or not s.start):
        est.add(Line("report", one.role, "promotion: the alias's current prompt on validation (when it exists)",
                     manifest.sizes()["val"], one.prompt_tokens, one.completion_tokens, one.model, one.price, "up to"))
        if s.robustness:  # both prompts on validation, as is and under each perturbation
            est.add(Line("report", one.role, "robustness gate: calibrated and champion, perturbed", 2 * (1 + len(
                perturbation_suite(s.robustness))) * manifest.sizes()["val"], one.prompt_tokens, one.completion_tokens,
                one.model, one.price, "up to"))


def estimate_report_steps(est: Any, s: CalibrationSettings, suite: Suite, manifest: SplitManifest, program: Any,
                           tracked: bool) -> None:
    """Add the judge calls of the calibration's report steps to a dry run's estimate: a rubric's start
    prompt re-scored at its train threshold, the champion re-scored on validation, the baseline."""
    from verifirst.loop.estimate import Line

    judge_lines = [ln for ln in est.lines if ln.phase.startswith("before ")]
    if not judge_lines:
        return
    one = judge_lines[0]

    def add(n: int, what: str) -> None:
        est.add(Line("report", one.role, what, n, one.prompt_tokens, one.completion_tokens, one.model, one.price,
                     "up to"))

    if getattr(program, "kind", None) == "rubric":
        add(sum(ln.calls for ln in judge_lines), "rubric: the start prompt at its train threshold (cache hits "
            "with the cache on)")
    if tracked:
        estimate_promotion(est, s, manifest)
    if s.baseline is not None:
        add(len(suite.items), "baseline: the deployed prompt on test and each older time window")
    if s.aligners:
        est.notes.append(f"the MLflow anchors ({', '.join(s.aligners)}) are not estimated: their aligners' calls "
                         "are MLflow's")


def export_review_queue(rows: list[dict], run_dir: Path, tracker: Tracker, experiment: str, run_id: str | None,
                        echo=print) -> dict:
    """The items a human should look at: `review_queue.jsonl` in the run dir and, when tracking, traces
    in the experiment `<experiment>-review` merged into an evaluation dataset (a labeling session
    loads it; labels added there come back with `--from-mlflow <experiment>-review --label label`).

    Args:
        rows: the judge section's review_queue rows (train/validation only: test stays held out).
        run_dir: the run directory.
        tracker: the run's Tracker.
        experiment: the calibration's MLflow experiment name.
        run_id: the MLflow run id (names the dataset).
        echo: where the summary line goes.
    """
    path = Path(run_dir) / REVIEW_QUEUE_FILE
    atomic.write_text(path, "".join(json.dumps(r, default=str) + "\n" for r in rows))
    reasons: dict[str, int] = {}
    for r in rows:
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    out: dict[str, Any] = {"file": str(path), "n": len(rows), "by_reason": reasons}
    if tracker is not None and tracker.enabled and rows:
        from verifirst.judge.traces import review_queue_to_mlflow as to_mlflow

        try:
            out["mlflow"] = to_mlflow(rows, tracker.uri, f"{experiment}-review",
                                      f"{experiment}-review-{(run_id or 'run')[:8]}", run_id)
        except Exception as e:  # the queue file stands; the MLflow copy failing is reported, not fatal
            tracker.note_failure("review queue export", e)
            out["mlflow_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    echo(f"review queue: {len(rows)} item(s) {reasons or ''} -> {path}"
         + (f"; MLflow dataset {out['mlflow']['dataset']} in experiment {out['mlflow']['experiment']}"
            if out.get("mlflow") else ""))
    return out
