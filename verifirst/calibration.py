"""Journey 1: calibrate a judge prompt on workflow outcomes (AutoRefine) and apply it.

Calibration is the judge domain on the one run loop: `vf.optimize` with the outcomes suite, the
judge program (passfail | rubric, or your prompt), the label verifier and the AutoRefine engine,
so the split guard, run directory, cache, tracking and test-reuse ledger are `run`'s own. Its
steps observe the loop (`CalibrationSteps`, a RunCallback): when the report is ready they add a
`judge` section (π, FAIL/PASS recall, McNemar, the teacher) computed from the loop's
before/after evaluations, then the review queue, the anchors, the prompt registry with an alias
that moves only on validation with a `champion` alias that moves only on validation
evidence (verifirst.loop.promotion: the --promote-rule against the current champion, both scored by
this run's judge LM on this run's validation items; test numbers are reported and decide
nothing). `calibrate` is the Python API (`vf.calibrate`); `cli_calibrate` is `verifirst calibrate`.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import dspy

from verifirst.core import atomic

from verifirst.core import registry
from verifirst.api import DEFAULT_WORKDIR, MLflow, Result, build_models
from verifirst.loop.splits import DEFAULT_RATIOS, SPLITS, SplitManifest, make_splits
from verifirst.core.callbacks import RunCallback
from verifirst.core.engine import Budget, resolve_engine
from verifirst.core.errors import InputError, RunFailed
from verifirst.loop.judge_prompt import template_variables
from verifirst.loop.budget_stop import test_claimed
from verifirst.loop.ledger import LEDGER_FILE, TestLedger, program_hash
from verifirst.lm import FastJSONAdapter, configure_cache, make_lm
from verifirst.loop.preflight import check_verifiers
from verifirst.core.stats import scotts_pi
from verifirst.judging.robustness import metrics as robustness_metrics, perturbation_suite, promotion_gate, report_lines
from verifirst.core.task import Suite
from verifirst.tracking import Tracker

CHAMPION = "champion"
ALIGNERS = ("simba", "gepa", "memalign")  # MLflow's Judge.align() optimizers the anchor can run
REVIEW_QUEUE_FILE = "review_queue.jsonl"
# The judge's evaluations stop as `verifirst run`'s do (evaluate.py): when the first requests all
# failed, and once 10 items are done above this share of LM errors (AutoRefine's own passes' limit).
MAX_ERROR_RATE = 0.5


def _part(name: str) -> Callable:
    """A calibration part by its registered name (the kernel imports no domain module)."""
    return registry.component("calibration", name)


def is_ice_score(path: Path) -> bool:
    """Whether an outcomes path is an ICE-Score grade file (read per problem and snippet)."""
    return Path(path).suffix == ".json" and "grade" in Path(path).name


def check_record_source(outcomes: Path | None, from_mlflow: str | None, snippets: int | None = None) -> None:
    """One source of records, and options that apply to it: --outcomes and --from-mlflow together are
    refused (neither would be silently dropped), and so is --snippets on anything but ICE-Score grades.

    Args:
        outcomes: the --outcomes file, or None.
        from_mlflow: the --from-mlflow experiment, or None.
        snippets: --snippets, or None.
    """
    if outcomes is not None and from_mlflow:
        raise InputError(f"both --outcomes {str(outcomes)!r} and --from-mlflow {from_mlflow!r} name the records",
                         field="--from-mlflow", expected="one source: --outcomes FILE or --from-mlflow EXPERIMENT")
    if snippets is not None and (outcomes is None or not is_ice_score(Path(outcomes))):
        raise InputError("--snippets applies to ICE-Score grade files only (snippets per problem)", field="--snippets",
                         expected="no --snippets, or --outcomes humaneval_<language>_grade.json")


def load_outcome_suite(path: Path, limit: int | None = None, snippets: int | None = None, labels=None) -> Suite:
    """Outcome records (JSONL/CSV), or ICE-Score execution grades, as a suite.

    Args:
        path: the outcomes file.
        limit: keep the first `limit` records (problems for ICE-Score).
        snippets: ICE-Score snippets per problem.
        labels: a verifirst.loop.labels.LabelRule (--pass-at, --label-map), or None for PASS/FAIL words.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("outcomes file not found", path=str(path), expected="a .jsonl or .csv file")
    if is_ice_score(path):  # ICE-Score HumanEval grades (an execution oracle)
        return registry.component("suite", "ice-score")(path, problems=limit, snippets=snippets)
    suite = registry.component("suite", "outcomes")(path, labels=labels) if labels is not None else \
        registry.component("suite", "outcomes")(path)
    if limit:
        suite = Suite(suite.name, suite.items[:limit], suite.description, suite.meta)
    return suite


def parse_ratios(text: Any, no_test: bool = False) -> tuple[float, float, float]:
    """Split ratios from "0.5,0.25,0.25" (or a 3-sequence of numbers); an empty test split only
    with no_test, never an empty training or validation split (AutoRefine selects on validation).

    Args:
        text: the --splits value.
        no_test: run without a held-out test split (--no-test).
    """
    if not isinstance(text, str):
        text = ",".join(str(x) for x in text)
    try:
        parts = tuple(float(x) for x in text.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 3:
        raise InputError(f"--splits {text!r} is not three numbers", field="--splits", expected="e.g. 0.5,0.25,0.25")
    from verifirst.loop.splits import check_ratios

    return check_ratios(parts, no_test=no_test, field="--splits", flags=(None, "--no-test"))


def check_calibrate_options(judge: str, judge_field: str = "--judge", **numbers: int | None) -> None:
    """The judge kind and each whole-number option in range, before anything is read or written.

    Args:
        judge: the judge kind (passfail | rubric).
        judge_field: the option that named it.
        numbers: max_iters (from 0), threads, limit, snippets, seed (None: not given).
    """
    from verifirst.config import MAX_THREADS, check_number

    if judge not in ("passfail", "rubric"):
        raise InputError(f"unknown judge kind {judge!r}", field=judge_field, expected="passfail | rubric")
    # 0 iterations is meaningful here: the starting prompt scored, nothing edited
    ranges = {"max_iters": (0, None), "threads": (1, MAX_THREADS), "limit": (1, None), "snippets": (1, None),
              "seed": (0, None)}
    for key, value in numbers.items():
        if value is not None:
            check_number(value, *ranges[key], "--" + key.replace("_", "-"), integer=True)


def judge_section(report: dict) -> dict:
    """The judge statistics of a calibration report (its `judge` section)."""
    j = report.get("judge")
    return j if isinstance(j, dict) else {}


def _test_pi(report: dict) -> float | None:
    j = judge_section(report).get("test", {}).get("judges", {}).get("calibrated")
    return None if j is None else float(j["pi"])


def _val_pi(y: list, pred: list) -> float:
    return scotts_pi(list(y), list(pred))


def promote(tracker: Tracker, name: str, version: int, report: dict,
            rescore: Callable[[str, float | None], dict[str, str | None]] | None = None,
            alias: str = CHAMPION, rule=None, robustness: Callable[[str, Any], dict] | None = None) -> dict:
    """Move `alias` (default `champion`) to this version only on validation evidence against the alias's
    current version, paired on the same validation items (verifirst.loop.promotion: rule, first champion,
    detectable Δπ); test π is reported and never decides. An error reading the alias moves nothing.

    A current version calibrated on another split is not comparable (its prompt may have been chosen
    on this run's validation items); one that names no split (written by hand) is re-scored.

    Args:
        tracker: the run's Tracker (its MLflow client holds the registry).
        name: the registered prompt name.
        version: the version this run registered.
        report: the calibration report (split_digest; its judge section's validation labels and
            verdicts, test).
        rescore: (prompt text, threshold) -> verdict per validation item id, running a prompt with
            this run's judge LM on this run's validation items; it scores the current champion.
        alias: the alias to move.
        rule: a verifirst.loop.promotion.PromoteRule (default: significant).
        robustness: (champion text, threshold) -> verifirst.judging.robustness.compare(); a refusal keeps the alias.

    Returns:
        {"moved", "decided_on": "validation", "reason", "val_pi", "champion_val_pi", "pi" (test π,
        reported only), ...}.
    """
    client = tracker.client
    val = judge_section(report).get("validation") or {}
    labels = val.get("labels") or {}
    mine = (val.get("verdicts") or {}).get("calibrated") or {}
    from verifirst.loop.promotion import decide, first_champion, parse_rule, read_alias

    rule = parse_rule(rule)
    out: dict[str, Any] = {"moved": False, "decided_on": "validation", "pi": _test_pi(report),
                           "val_pi": val.get("pi"), "alias": alias, "rule": str(rule)}
    cur, error = read_alias(client, name, alias)
    if error is not None:
        return {**out, "error": error, "reason": f"the {alias} alias could not be read ({error}); "
                                                 f"promotion stopped, the alias did not move"}
    if not labels or not any(v is not None for v in mine.values()):
        return {**out, "reason": "no validation verdicts to decide on (test π never decides)"}
    if cur is None:
        ids = [i for i in labels if mine.get(i) is not None]
        first = first_champion([labels[i] for i in ids], [mine[i] for i in ids])
        out.update({"val_pi_ci95": first["pi_ci95"], "paired_n": len(ids)})
        if not first["move"]:
            return {**out, "reason": f"no first {alias}: {first['why']} (decided on validation)"}
        client.set_prompt_alias(name, alias, version)
        return {**out, "moved": True, "reason": f"first {alias}: {first['why']} (decided on validation)"}
    if int(cur.version) == int(version):
        return {**out, "reason": f"v{version} is already the {alias} (decided on validation)"}
    tags = dict(getattr(cur, "tags", {}) or {})
    if tags.get("split_digest") not in (None, "", report["split_digest"]):
        return {**out, "reason": f"{alias} v{cur.version} was calibrated on another split "
                                 f"({tags.get('split_digest')}): its validation items are not this run's; "
                                 f"not comparable (decided on validation)"}
    if rescore is None:
        return {**out, "reason": f"the {alias} cannot be re-scored on this run's validation items"}
    th = tags.get("threshold")
    theirs = rescore(cur.template, None if th in (None, "", "None") else float(th))
    ids = [i for i in labels if mine.get(i) is not None and theirs.get(i) is not None]
    if not ids:
        return {**out, "reason": f"{alias} v{cur.version} got no validation verdict (LM errors)"}
    y = [labels[i] for i in ids]
    a, b = [theirs[i] for i in ids], [mine[i] for i in ids]
    d = decide(rule, y, a, b)
    gate = robustness(cur.template, None if th in (None, "", "None") else float(th)) if robustness else None
    out.update({"robustness": gate} if gate else {})
    lo, hi = d["ci95"]
    pm, pt = _val_pi(y, b), _val_pi(y, a)
    out.update({"val_pi": pm, "champion_val_pi": pt, "paired_n": len(ids), "excluded": len(labels) - len(ids),
                "val_pi_delta_ci95": [lo, hi], "champion_version": int(cur.version),
                "detectable_delta": d["detectable_delta"]})
    cmp = (f"validation π {pm:.3f} vs {alias} v{cur.version} {pt:.3f} on the same {len(ids)} validation "
           f"items (Δ {d['delta']:+.3f}, 95% paired bootstrap [{lo:+.3f}, {hi:+.3f}]); {d['why']}; "
           f"decided on validation, test π reported only")
    if d["move"] and gate and gate["refuse"]:
        return {**out, "reason": f"refused by the robustness gate: {gate['reason']}; {cmp}"}
    if d["move"]:
        client.set_prompt_alias(name, alias, version)
        return {**out, "moved": True, "reason": f"beats ({rule}): {cmp}"}
    return {**out, "reason": f"does not beat ({rule}): {cmp}"}


def _fmt(x) -> str:
    return "n/a" if x is None else f"{float(x):.3f}"


def _progress(echo, metrics: dict, step: int) -> None:
    shown = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())
    echo(f"  step {step}: {shown}")


@dataclass
class CalibrationSettings:
    """What a calibration run was asked to do, beyond the loop's own arguments (its post-steps'
    inputs; also logged as the run's settings and part of its resume key)."""

    judge: str = "passfail"
    max_iters: int = 5
    threads: int = 1
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
        # the judge domain's statistics, by registered name: the kernel's Engine protocol has no such method
        rep["judge"] = _part("judge-report")(self.program, res.before, res.after, self.suite.items, manifest,
                                             rep["details"], judge_lm=self.lms["judge"],
                                             teacher_lm=self.lms["teacher"], num_threads=s.threads, n_boot=s.n_boot)
        prompt_text = rep["judge"].get("calibrated_prompt") or getattr(res.program, "prompt", "")
        atomic.write_text(run_dir / "calibrated_prompt.txt", str(prompt_text) + "\n")
        rep["models"] = {"judge": _spec(self.lms["judge"], s.model), "teacher": _spec(self.lms["teacher"], s.model),
                         "proposer": _spec(self.lms["reflection"], s.model)}
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
            rep["test_reuse"] = _record_anchor(TestLedger(s.workdir / LEDGER_FILE), rep, run_dir)
        if s.baseline is not None and not stopped:
            rep["baseline"] = score_baseline(s, self.suite, manifest, res, rep, self.lms["judge"])
            rep["test_reuse"] = _record_baseline(TestLedger(s.workdir / LEDGER_FILE), rep, run_dir, s.baseline)
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
            "split_digest": manifest.digest, "test_pi": f"{_test_pi(rep) or float('nan'):.6f}",
            "val_pi": f"{_val_pi_of(rep):.6f}",
            "run_id": self.run_id or "", "judge": s.judge, "threshold": str(judged.get("calibrated_threshold")),
            **({"calibrated_from": s.start.source, "view": s.view or ""} if s.start else {})},
            message=f"AutoRefine, {s.max_iters} max iterations, run {self.run_id}")
        rep["prompt_uri"] = uri
        val_items = manifest.select(self.suite.items, "val")

        def rescore(text: str, threshold: float | None) -> dict:
            return _score_prompt(s.judge, sorted(self.suite.items[0].inputs), text, threshold, val_items,
                                 self.lms["judge"], s.threads, s.view)

        robust = None if not s.robustness else promotion_gate(
            lambda text, th, its: _score_prompt(s.judge, sorted(self.suite.items[0].inputs), text, th, its,
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


def _budget(s: CalibrationSettings) -> Budget:
    """The loop's budget: AutoRefine's iterations and threads, with the caller's spend limits."""
    import dataclasses

    if s.budget is None:
        return Budget(max_iters=s.max_iters, num_threads=s.threads)
    return dataclasses.replace(s.budget, max_iters=s.max_iters, num_threads=s.threads)


def calibrate_suite(suite: Suite, manifest: SplitManifest, settings: CalibrationSettings, lms: dict, *,
                    prompt: str | None = None, run_dir: Path | None = None, tracking: Any = None,
                    echo: Callable[[str], None] = print, engine_options: dict | None = None,
                    source_line: str | None = None, config: dict | None = None,
                    log_metrics: Callable[[dict, int], None] | None = None, program: Any = None,
                    name: str | None = None, eval_splits: tuple[str, ...] = SPLITS, dry_run: bool = False,
                    confirm: Callable[[Any], bool] | None = None):
    """Calibrate a judge on these records through the one loop (`vf.optimize`) with its steps.

    Args:
        suite: the outcome records (inputs: the judge's view; gold["label"]: PASS/FAIL).
        manifest: the split manifest (train for the loop, val to select, test held out).
        settings: the calibration's settings (judge kind, view, iterations, promotion, anchors).
        lms: {"judge", "teacher", "reflection"} LMs.
        prompt: the starting prompt (default: the kind's default prompt).
        run_dir: the run directory (default: a new WORKDIR/runs/calibrate-KIND-TIME).
        tracking: the MLflow observer (verifirst.tracking.callback.MLflowCallback), or None.
        echo: where progress lines go.
        engine_options: AutoRefineEngine options (repeats, temperature, target_pi, ...).
        source_line: a line said before the splits.
        config: the calibration's settings as logged and resumed.
        log_metrics: also told each loop iteration's metrics.
        program: the judge program to calibrate (default: the kind's judge over the records'
            fields, or `prompt` as a template); e.g. an MLflow judge wrapped as a program.
        name: the run's name (default calibrate-KIND).
        eval_splits: the splits scored before and after (the loop scores test once either way).
        dry_run: return the spend estimate (the loop's, plus the calibration's report steps) instead of
            running: no model is called and nothing is written.
        confirm: asked with the estimate when it exceeds a max_usd limit (see `vf.optimize`).

    Returns:
        The api Result (program, report with `judge`, manifest, run_dir, before, after), or with
        dry_run the SpendEstimate.
    """
    from verifirst.api import optimize
    from verifirst.lm import Models

    s = settings
    program = program if program is not None else make_judge_program(s.judge, suite, prompt, s.view)
    verifier = registry.component("verifier", "label")()
    engine = resolve_engine("autorefine", engine_options)
    steps = CalibrationSteps(s, suite, manifest, program, engine, lms, tracking, echo, source_line)
    steps.log_metrics = log_metrics
    judge_lm = lms["judge"] if lms.get("judge") is not None else dspy.settings.lm
    models = Models(task=judge_lm, judge=judge_lm, teacher=lms["teacher"], reflection=lms["reflection"])
    out = optimize(program, suite, verifier, engine, splits=manifest, models=models,
                   budget=_budget(s), run_dir=run_dir,
                   tracking=tracking, callbacks=[steps], output_field="verdict", threads=s.threads,
                   workdir=s.workdir, name=name or f"calibrate-{s.judge}", max_error_rate=MAX_ERROR_RATE, progress=False,
                   adapter=FastJSONAdapter(), cache=s.workdir / "cache" if s.cache else None, config=config,
                   eval_splits=eval_splits, dry_run=dry_run, confirm=confirm)
    if dry_run:
        _estimate_report_steps(out, s, suite, manifest, program, tracking is not None)
    return out


def _estimate_promotion(est: Any, s: CalibrationSettings, manifest: SplitManifest) -> None:
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


def _estimate_report_steps(est: Any, s: CalibrationSettings, suite: Suite, manifest: SplitManifest, program: Any,
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
        _estimate_promotion(est, s, manifest)
    if s.baseline is not None:
        add(len(suite.items), "baseline: the deployed prompt on test and each older time window")
    if s.aligners:
        est.notes.append(f"the MLflow anchors ({', '.join(s.aligners)}) are not estimated: their aligners' calls "
                         "are MLflow's")


def make_judge_program(judge: str, suite: Suite, prompt: str | None, view: str | None = None):
    """The judge program on this suite's record fields (a prompt with variables: a template judge).

    Args:
        judge: the judge kind.
        suite: the records (their fields fill the view or the template's variables).
        prompt: the starting prompt, or None for the kind's default.
        view: the --view spec, or None.
    """
    fields = sorted(suite.items[0].inputs)
    if view is None:
        return _part("make-judge")(judge, fields, prompt)
    return _part("make-judge")(judge, fields, prompt, view=view)


@dataclass
class CalibrationRun:
    """What `calibrate_run` returns: the driver's result (report with `judge`), splits, run dir."""

    result: Any  # the api Result: program, report, before, after
    manifest: SplitManifest
    run_dir: Path

    @property
    def report(self) -> dict:
        return self.result.report


def calibrate_outcomes(outcomes: Path, *args: Any, **kwargs: Any) -> dict:
    """`verifirst calibrate`: the report dict (the driver's report plus `judge`).

    Args:
        outcomes: the outcomes file; every other argument is calibrate_run's.
    """
    return calibrate_run(outcomes, *args, **kwargs).report


@dataclass
class StartPrompt:
    """The user's starting prompt: its text and the registry name its calibrated version goes under."""

    text: str
    name: str
    source: str
    version: int | None = None  # the registry version started from
    alias: str | None = None
    tags: dict = field(default_factory=dict)


def missing_store(uri: str) -> Path | None:
    """The file of a local sqlite MLflow store that does not exist: opening it would create it (and
    find nothing), so a read from it is refused instead. None for any other store.

    Args:
        uri: the tracking URI.
    """
    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return None
    path = Path(uri[len(prefix):].split("?", 1)[0])
    return None if str(path) in ("", ":memory:") or path.exists() else path


def check_store_has(uri: str, what: str, field: str, expected: str) -> None:
    """Refuse to read `what` from a local store that does not exist, before it would be created.

    Args:
        uri: the tracking URI.
        what: what was asked for, e.g. "prompt 'x'".
        field: the option that asked for it.
        expected: what the option expects.
    """
    path = missing_store(uri)
    if path is not None:
        raise InputError(f"no {what}: there is no MLflow store at {path}", field=field,
                         expected=f"{expected} (--workdir or --tracking-uri where it was logged)")


def _registry_client(workdir: Path, tracking_uri: str | None):
    import mlflow

    uri = tracking_uri or Tracker(workdir, enabled=False).uri
    return mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)


def resolve_start_prompt(spec: str, workdir: Path, tracking_uri: str | None = None,
                         name: str | None = None) -> StartPrompt:
    """The `--prompt` value read: a file (registered under `name` or its stem) or a registry URI.

    Args:
        spec: a file path, prompts:/NAME/VERSION or prompts:/NAME@ALIAS.
        workdir: the workdir (its local MLflow store when no tracking URI is given).
        tracking_uri: the MLflow tracking URI holding the prompt registry.
        name: the registry name for a file's calibrated versions (default: the file's stem).
    """
    p = Path(spec)
    if p.exists() or p.is_symlink():
        from verifirst.core.textfile import read_text

        text = read_text(p, "prompt file").strip()  # a directory, a loop, binary: InputError
        if not text:
            raise InputError("the prompt file is empty", path=str(p), expected="a judge prompt")
        return StartPrompt(text, name or re.sub(r"[^A-Za-z0-9_.-]+", "-", p.stem), spec)
    m = re.fullmatch(r"prompts:/([^/@]+)(?:/(\d+)|@([^/@]+))", spec.strip())
    if not m:
        raise InputError(f"{spec!r} is not a file nor a registry URI", field="--prompt",
                         expected="a path, prompts:/NAME/VERSION or prompts:/NAME@ALIAS")
    pname, version, alias = m.groups()
    check_store_has(tracking_uri or Tracker(Path(workdir), enabled=False).uri, f"prompt {pname!r}", "--prompt",
                    "a registered prompt")
    client = _registry_client(Path(workdir), tracking_uri)
    try:
        pv = client.get_prompt_version_by_alias(pname, alias) if alias else client.get_prompt_version(pname, version)
    except Exception as e:  # MLflow raises for an unknown prompt, version or alias
        pv, why = None, str(e).splitlines()[0][:200]
    else:
        why = "not found"
    if pv is None:
        what = f"alias {alias!r}" if alias else f"version {version}"
        raise InputError(f"prompt {pname!r} has no {what} in the registry ({why})", field="--prompt",
                         expected="an existing prompt version or alias: " + _known_versions(client, pname))
    return StartPrompt(pv.template if isinstance(pv.template, str) else json.dumps(pv.template), pname, spec,
                       int(pv.version), alias, dict(getattr(pv, "tags", {}) or {}))


def _known_versions(client, name: str) -> str:
    try:
        versions = sorted(int(v.version) for v in client.search_prompt_versions(name))
        aliases = sorted({a for v in client.search_prompt_versions(name) for a in (getattr(v, "aliases", None) or [])})
    except Exception:
        return f"no prompt named {name!r} here"
    return f"versions {versions or 'none'}" + (f", aliases {aliases}" if aliases else "")


def parse_anchor(anchor: Any) -> list[str]:
    """`--anchor` as a list of MLflow aligners: "simba", "gepa", "memalign", a comma list, or "all".

    Args:
        anchor: False/None (no anchor), True (SIMBA), a string or a sequence of names.
    """
    if anchor in (None, False, "", "none"):
        return []
    if anchor is True:
        return ["simba"]
    names = [a.strip().lower() for a in (anchor.split(",") if isinstance(anchor, str) else anchor) if a.strip()]
    if "all" in names:
        return list(ALIGNERS)
    bad = [a for a in names if a not in ALIGNERS]
    if bad:
        raise InputError(f"unknown aligner(s) {bad}", field="--anchor", expected="simba, gepa, memalign, a comma list or all")
    return list(dict.fromkeys(names))


def calibrate_run(outcomes: Path | None, judge: str = "passfail", model: str = "local", teacher: str | None = None,
                  proposer: str | None = None, max_iters: int = 5, splits: Any = DEFAULT_RATIOS,
                  workdir: Path = Path(".verifirst"), limit: int | None = None,
                  snippets: int | None = None, seed: int = 0,
                  tracking_uri: str | None = None, offline: bool = False, threads: int = 1,
                  run_dir: Path | None = None, models: dict | None = None, trace: bool = False,
                  anchor: Any = False, anchor_engine=None, echo=print, prompt: str | None = None,
                  tracking: bool = True, experiment: str = "verifirst-calibrate", *,
                  prompt_source: str | None = None, view: str | None = None, name: str | None = None,
                  promote_alias: str | None = None, from_mlflow: str | None = None, label: str = "label",
                  repeats: int = 1, temperature: float = 0.7, timeout_s: float | None = None,
                  no_test: bool = False, pass_at: float | None = None, label_map: Any = None,
                  promote_rule: str = "significant", budget: Budget | None = None,
                  baseline: str | None = None, dry_run: bool = False, robustness: Any = None,
                  confirm: Callable[[Any], bool] | None = None) -> Any:
    """Calibrate a judge on an outcomes file: driver run, then prompt registry, champion and anchor.

    Args:
        outcomes: the outcomes file (.jsonl/.csv, or ICE-Score grades); None with from_mlflow.
        judge: "passfail" or "rubric".
        model: the judge model spec (teacher and proposer default to it).
        teacher: the informed teacher's model spec.
        proposer: the edit proposer's model spec.
        max_iters: AutoRefine iterations at most.
        splits: train,val,test ratios ("0.5,0.25,0.25" or a 3-sequence), stratified by label; or
            {"ratios": ..., "by": "time", "time_field": "created_at", "windows": "7d"} for a
            time-ordered split (train oldest, test newest; see verifirst.loop.timesplit).
        workdir: cache, runs, ledger and the local MLflow store.
        limit: use the first N records (ICE-Score: problems).
        snippets: ICE-Score snippets per problem.
        seed: the split seed.
        tracking_uri: the MLflow tracking URI.
        offline: log to the workdir's local store whatever the environment says.
        threads: evaluation and loop threads.
        run_dir: the run directory; an unfinished one resumes.
        models: {"judge", "teacher", "reflection"} LMs instead of the model specs (tests, the API).
        trace: also trace every judge/teacher call in MLflow (slow on a sqlite store).
        anchor: MLflow make_judge + align() anchors on the same split: True (SIMBA), "simba", "gepa",
            "memalign", a comma list or "all".
        anchor_engine: the anchor's engine (tests pass a scripted one).
        echo: where progress lines go.
        prompt: the starting judge prompt's text (default: the kind's default).
        tracking: False runs without MLflow (no prompt registry, no champion).
        experiment: the MLflow experiment name.
        prompt_source: the user's prompt: a file, prompts:/NAME/VERSION or prompts:/NAME@ALIAS; its
            calibrated version is registered under the same name (a file: `name` or its stem).
        view: record fields the judge reads or that fill the prompt's variables ("title,diff" or
            "diff=patch,title=title").
        name: the registry name for a prompt file's calibrated versions.
        promote_alias: move this alias to the new version on the promote_rule's validation
            evidence against its current one (a user's prompt moves no alias without it).
        from_mlflow: read records from this MLflow experiment's traces instead of `outcomes`.
        label: the assessment (feedback or expectation) name holding a trace's label.
        repeats: judge runs per validation item in the loop (temperature > 0 when above 1); an edit
            is kept only when validation π improves by more than the repeat noise.
        temperature: the judge's temperature for repeated runs.
        timeout_s: seconds one request to a served model may take (default: lm.DEFAULT_TIMEOUT_S).
        no_test: run without a held-out test split (ratios give test 0; no test number is reported).
        pass_at: numeric ratings at or above it are PASS (--pass-at; see verifirst.loop.labels).
        label_map: categorical labels to PASS/FAIL ("excellent=PASS,poor=FAIL" or a dict).
        promote_rule: significant | better | noninferior:MARGIN (see verifirst.loop.promotion).
        budget: a vf.Budget whose spend limits hold for the run (`--max-usd`, ...).
        baseline: the deployed judge prompt to compare with (`--baseline`): a file,
            prompts:/NAME@ALIAS or prompts:/NAME/VERSION; scored with the run's judge LM on the test
            split and on each older time window (report["baseline"]); it decides nothing.
        dry_run: return the spend estimate instead of running (`verifirst calibrate --dry-run`): no
            model is called and nothing is written (no run directory, no MLflow run).
        robustness: a perturbation suite (True: the built-in one) gating promotion against the champion.
        confirm: asked with the estimate when it exceeds a max_usd limit (see `vf.optimize`).

    Returns:
        The CalibrationRun, or with dry_run the SpendEstimate.
    """
    from verifirst.loop.labels import LabelRule
    from verifirst.loop.promotion import parse_rule

    workdir = Path(workdir)
    rule = LabelRule.of(pass_at, label_map)
    promote_by = parse_rule(promote_rule)
    check_calibrate_options(judge, max_iters=max_iters, threads=threads, limit=limit, snippets=snippets, seed=seed)
    check_record_source(outcomes, from_mlflow, snippets)
    from verifirst.loop.splits import check_resumed_manifest, split_options

    splits, split_by = split_options(splits)
    parse_ratios(splits, no_test)  # refused here, before any file is read
    aligners = parse_anchor(anchor)
    if repeats < 1:
        raise InputError(f"--repeats {repeats} is below 1", field="--repeats", expected="an integer >= 1")
    trace_stats: dict | None = None
    if from_mlflow:
        from verifirst.tracking.records import load_trace_suite

        uri = tracking_uri or Tracker(workdir, enabled=False).uri
        check_store_has(uri, f"MLflow experiment {from_mlflow!r}", "--from-mlflow", "an experiment with labelled traces")
        suite, trace_stats = load_trace_suite(from_mlflow, uri, label=label, limit=limit, rule=rule)
        source = f"mlflow:{from_mlflow}"
    elif outcomes is None:
        raise InputError("no records to calibrate on", field="--outcomes", expected="--outcomes FILE or --from-mlflow EXPERIMENT")
    else:
        suite, source = load_outcome_suite(outcomes, limit, snippets, rule if rule.given else None), str(outcomes)
    start = resolve_start_prompt(prompt_source, workdir, tracking_uri, name) if prompt_source else None
    if start is not None:
        prompt = start.text
    if view is None and not template_variables(prompt or "") and suite.meta.get("default_view"):
        # traces: the judge reads the keys of their inputs/outputs, not the same text twice as JSON
        view = ",".join(suite.meta["default_view"])
    make_judge_program(judge, suite, prompt, view)  # a variable no field fills stops here, before any LM call
    base = resolve_baseline(baseline, workdir, tracking_uri, judge, suite, view) if baseline is not None else None
    manifest = make_splits(suite.items, key=lambda it: it.id, group=lambda it: it.group_key,
                           ratios=parse_ratios(splits, no_test), seed=seed, stratify=lambda it: it.gold["label"],
                           source=source, lines=suite.meta.get("lines"), **split_by)
    check_verifiers([registry.component("verifier", "label")()])  # before any model loads or any LM call
    if models is None:
        judge_lm = make_lm(model, role="judge", timeout_s=timeout_s)
        teacher_lm = make_lm(teacher or model, role="teacher", timeout_s=timeout_s)
        proposer_lm = make_lm(proposer or teacher or model, role="reflection", timeout_s=timeout_s)
    else:
        judge_lm, teacher_lm, proposer_lm = models["judge"], models["teacher"], models["reflection"]
    if run_dir is not None and (Path(run_dir) / "split_manifest.json").exists():
        check_resumed_manifest(Path(run_dir), manifest)  # a time split does not resume a random one
    source_line = None
    if trace_stats is not None:
        source_line = (f"{from_mlflow}: {trace_stats['n_traces']} traces, {trace_stats['n_labelled']} labelled by "
                       f"{label!r}, {trace_stats['skipped_unlabelled']} skipped without that label")
    extra: dict[str, Any] = {"labels": {"rule": rule.describe(), "pass_at": rule.pass_at, "label_map": rule.label_map}}
    if trace_stats is not None:
        extra["from_mlflow"] = {"experiment": from_mlflow, "label": label, **trace_stats}
    settings = CalibrationSettings(judge=judge, max_iters=max_iters, threads=threads, view=view, repeats=repeats,
                                   model=model, workdir=workdir, experiment=experiment, start=start,
                                   promote_alias=promote_alias, promote_rule=promote_by, aligners=aligners,
                                   anchor_engine=anchor_engine, extra=extra, budget=budget, baseline=base,
                                   robustness=robustness)
    from verifirst.tracking.callback import MLflowCallback

    mlflow = MLflowCallback(workdir, uri=tracking_uri, experiment=experiment, traces=trace, offline=offline,
                            register_prompt=False) if tracking and not dry_run else None
    config = {"judge": judge, "max_iters": max_iters, "splits": str(splits), "split_by": split_by["by"],
              "outcomes": source, "prompt": prompt_source or "", "view": view or "", "repeats": repeats}
    res = calibrate_suite(suite, manifest, settings, {"judge": judge_lm, "teacher": teacher_lm,
                                                      "reflection": proposer_lm},
                          prompt=prompt, run_dir=Path(run_dir) if run_dir else None, tracking=mlflow,
                          echo=echo, source_line=source_line, config=config,
                          engine_options={"repeats": repeats, "temperature": temperature} if repeats > 1 else None,
                          dry_run=dry_run, confirm=confirm)
    if dry_run:
        if tracking:  # the promotion step (it needs the tracker, which a dry run does not start)
            _estimate_promotion(res, settings, manifest)
        return res
    return CalibrationRun(res, manifest, res.run_dir)


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
        from verifirst.tracking.records import export_review_queue as to_mlflow

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


def _spec(lm, given: str | None) -> str | None:
    return getattr(lm, "spec", None) or getattr(lm, "model", None) or given


def _record_anchor(ledger: TestLedger, rep: dict, run_dir: Path) -> dict:
    """The anchor judge was scored on the test split too: into the ledger, and the reuse count again."""
    text = json.dumps(rep["anchor"].get("instructions"), sort_keys=True, default=str)
    ledger.record(rep["split_digest"], program_hash(text), run_dir, "anchor")
    mine = ledger.programs_of(run_dir)  # this run's programs
    return ledger.reuse(rep["split_digest"], sorted(mine))


BASELINE_EXPECTED = "a prompt file, prompts:/NAME@ALIAS or prompts:/NAME/VERSION"
BASELINE_JUDGES = ("baseline", "uncalibrated", "calibrated")


def resolve_baseline(spec: str, workdir: Path, tracking_uri: str | None, judge: str, suite: Suite,
                     view: str | None) -> StartPrompt:
    """The `--baseline` prompt read and checked against the records, before any LM call.

    Args:
        spec: a prompt file, prompts:/NAME@ALIAS or prompts:/NAME/VERSION.
        workdir: the workdir (its local MLflow store when no tracking URI is given).
        tracking_uri: the MLflow tracking URI holding the prompt registry.
        judge: the judge kind the baseline is run as.
        suite: the records (their fields fill the prompt's variables).
        view: the run's --view, or None.

    Raises:
        InputError: a missing or empty file, an unknown prompt, version or alias, or a variable no
            field fills; field --baseline, naming the value.
    """
    spec = str(spec).strip()
    if not spec:
        raise InputError("an empty --baseline", field="--baseline", expected=BASELINE_EXPECTED)
    if not spec.startswith("prompts:/") and not (Path(spec).exists() or Path(spec).is_symlink()):
        raise InputError(f"baseline prompt file {spec!r} not found", path=spec, field="--baseline",
                         expected=BASELINE_EXPECTED)
    try:
        base = resolve_start_prompt(spec, workdir, tracking_uri)
        make_judge_program(judge, suite, base.text, view)
    except InputError as e:
        raise InputError(f"baseline {spec!r}: {e.message}", path=e.path, line=e.line, field="--baseline",
                         expected=e.expected or BASELINE_EXPECTED) from None
    return base


def _row_verdicts(result) -> dict[str, str | None]:
    """A judge's verdict per item from the loop's rows; an unscored row (LM error) has none."""
    from verifirst.core.verdicts import FAIL, PASS, normalize_label

    return {r.id: (normalize_label(r.output) if r.status in (PASS, FAIL) else None) for r in result.rows}


def baseline_columns(manifest: SplitManifest) -> list[dict]:
    """The baseline table's columns: the test split (the current window), then the older windows,
    newest first. With a time split and --windows: each window's train/validation items (timesplit's
    windows; a window's test items belong to the test column); a time split without windows: the
    validation and the train split; a random split: the test split alone."""
    cols: list[dict] = []
    cuts = manifest.cuts if manifest.method == "time" else {}
    if manifest.test:
        cols.append({"window": "test", "current": True, "start": cuts.get("test_start"), "end": cuts.get("test_end"),
                     "ids": list(manifest.test), "n_train": 0, "n_val": 0, "n_test": len(manifest.test)})
    if manifest.method != "time":
        return cols
    train, val = set(manifest.train), set(manifest.val)
    older: list[dict] = []
    if manifest.windows is not None:
        from verifirst.loop.timesplit import iso, time_windows

        rows = [{"id": i, "t": t} for i, t in manifest.times.items()]
        for w in time_windows(rows, "t", manifest.windows):
            ids = [r["id"] for r in w.items if r["id"] in train or r["id"] in val]
            if ids:
                older.append({"window": w.label, "current": False, "start": iso(w.start), "end": iso(w.end),
                              "ids": ids, "n_train": sum(i in train for i in ids),
                              "n_val": sum(i in val for i in ids), "n_test": 0})
    else:
        for split, ids in (("train", manifest.train), ("val", manifest.val)):
            if ids:
                older.append({"window": split, "current": False, "start": cuts.get(f"{split}_start"),
                              "end": cuts.get(f"{split}_end"), "ids": list(ids),
                              "n_train": len(ids) if split == "train" else 0,
                              "n_val": len(ids) if split == "val" else 0, "n_test": 0})
    return cols + older[::-1]


def score_baseline(s: CalibrationSettings, suite: Suite, manifest: SplitManifest, res: Any, rep: dict,
                   judge_lm) -> dict:
    """report["baseline"]: the deployed prompt, the uncalibrated start and the calibrated prompt on
    the test split and on each older window (baseline_columns): π with its 95% bootstrap interval
    and n per cell, and per column the calibrated prompt against the baseline (paired Δπ bootstrap,
    exact McNemar) on the items every judge scored.

    The start and calibrated verdicts are the loop's own before/after rows. The baseline is scored
    once per item with the run's judge LM: older items together, the test items after the split
    guard has checked that no optimizer saw them. It decides nothing (no selection, no promotion).

    Args:
        s: the calibration's settings (s.baseline: the prompt).
        suite: the records.
        manifest: the split manifest.
        res: the loop's result (before/after evaluations by split).
        rep: the report (its split digest).
        judge_lm: the run's judge LM.
    """
    from verifirst.core.stats import compare_judges

    b = s.baseline
    by_id = {it.id: it for it in suite.items}
    cols = baseline_columns(manifest)
    fields = sorted(suite.items[0].inputs)
    threshold = None
    if s.judge == "rubric" and b.tags.get("threshold") not in (None, "", "None"):
        threshold = float(b.tags["threshold"])
    older_ids = list(dict.fromkeys(i for c in cols if not c["current"] for i in c["ids"]))
    verdicts: dict[str, dict[str, str | None]] = {"baseline": {}, "uncalibrated": {}, "calibrated": {}}
    if older_ids:
        verdicts["baseline"].update(_score_prompt(s.judge, fields, b.text, threshold, [by_id[i] for i in older_ids],
                                                  judge_lm, s.threads, s.view))
    if manifest.test:
        manifest.check_test(manifest.test)  # never seen by an optimizer: reported, decides nothing
        verdicts["baseline"].update(_score_prompt(s.judge, fields, b.text, threshold,
                                                  manifest.select(suite.items, "test"), judge_lm, s.threads, s.view))
    for phase, name in ((res.before, "uncalibrated"), (res.after, "calibrated")):
        for split_result in (phase or {}).values():
            verdicts[name].update(_row_verdicts(split_result))
    columns = []
    for c in cols:
        labels = {i: by_id[i].gold["label"] for i in c["ids"]}
        cmp = compare_judges(labels, {k: {i: v.get(i) for i in c["ids"]} for k, v in verdicts.items()},
                             "calibrated", ["baseline", "uncalibrated"], n_boot=s.n_boot)
        judges = {k: {"pi": m["pi"], "pi_ci95": m.get("pi_ci95"), "n": m["n"], "accuracy": m["accuracy"],
                      "fail_recall": m["fail_recall"], "pass_recall": m["pass_recall"]}
                  for k, m in cmp["judges"].items()}
        vs = (cmp["comparisons"] or {}).get("calibrated_vs_baseline")
        col = {k: v for k, v in c.items() if k != "ids"}
        col.update(n_items=cmp["n_items"], n_scored=cmp["n_scored"], label_counts=cmp["label_counts"],
                   excluded_lm_errors=cmp["excluded_lm_errors"], judges=judges)
        if vs is not None:
            col["calibrated_vs_baseline"] = {
                "pi_delta": vs["pi_delta"], "pi_ci95": vs["pi_ci95"],
                "mcnemar_p": vs["mcnemar_exact"]["p_value"],
                "calibrated_right_baseline_wrong": vs["ours_right_anchor_wrong"],
                "baseline_right_calibrated_wrong": vs["anchor_right_ours_wrong"]}
            d = vs["pi_delta"]
            col["ahead"] = "calibrated" if d > 0 else "baseline" if d < 0 else "tie"
        columns.append(col)
    return {"source": b.source, "name": b.name, "version": b.version, "alias": b.alias,
            "judge_lm": _spec(judge_lm, s.model), "threshold": threshold, "judges": list(BASELINE_JUDGES),
            "split_method": manifest.method, "windows_spec": manifest.windows, "columns": columns,
            "decides": "nothing: reported only, no prompt is selected or promoted on it",
            "test_scored": bool(manifest.test)}


def _record_baseline(ledger: TestLedger, rep: dict, run_dir: Path, base: StartPrompt) -> dict | None:
    """The baseline prompt was scored on the test split: into the ledger, and the reuse count again."""
    if not (rep.get("baseline") or {}).get("test_scored"):
        return rep.get("test_reuse")
    ledger.record(rep["split_digest"], program_hash(base.text), run_dir, "baseline")
    return ledger.reuse(rep["split_digest"], sorted(ledger.programs_of(run_dir)))


def _val_pi_of(rep: dict) -> float:
    pi = (judge_section(rep).get("validation") or {}).get("pi")
    return float("nan") if pi is None else float(pi)


def _score_prompt(judge: str, fields: list[str], text: str, threshold: float | None, items, judge_lm,
                  threads: int, view: str | None = None) -> dict[str, str | None]:
    """Verdicts of one judge prompt on these items with this LM (None where the LM failed)."""
    run_judge, verdicts_at, make_judge = _part("run-judge"), _part("verdicts-at"), _part("make-judge")
    program = make_judge(judge, fields, text) if view is None else make_judge(judge, fields, text, view=view)
    with dspy.context(lm=judge_lm, adapter=FastJSONAdapter()):
        return verdicts_at(run_judge(program, items, judge_lm, threads), threshold)


def mlflow_model_uri(spec: str) -> str | None:
    """LiteLLM `provider/model` -> MLflow `provider:/model`; the embedded model is served locally."""
    from verifirst.lm import is_local

    if is_local(spec):
        return None
    provider, _, name = spec.partition("/")
    return f"{provider}:/{name}"


def run_anchor(suite: Suite, manifest, rep: dict, model: str, workdir: Path, engine=None,
               aligners: list[str] | None = None) -> dict:
    """The baselines a user would otherwise pick, on the same train split and test items: one table
    with the uncalibrated judge, AutoRefine (calibrated) and MLflow's align() per aligner, each
    compared with AutoRefine (paired Δπ interval, exact McNemar).

    Args:
        suite: the records.
        manifest: the split manifest (train to align on, test to score).
        rep: the calibration report (its judge section's test verdicts).
        model: the judge model spec.
        workdir: the workdir (the anchor's MLflow store goes under it).
        engine: the anchor's engine (tests pass a scripted one).
        aligners: MLflow aligners to run ("simba", "gepa", "memalign"; default SIMBA).
    """
    import inspect

    from verifirst.core.stats import compare_judges

    align_anchor = _part("align-anchor")
    train, test = manifest.select(suite.items, "train"), manifest.select(suite.items, "test")
    judged = judge_section(rep)
    aligners = list(aligners or ["simba"])
    kw: dict[str, Any] = {}
    if aligners != ["simba"]:
        if "aligners" not in inspect.signature(align_anchor).parameters:
            raise InputError(f"the installed anchor runs SIMBA only; asked for {aligners}", field="--anchor",
                             expected="simba")
        kw["aligners"] = aligners
    res = align_anchor(train, test, judged.get("view_fields"), model_uri=mlflow_model_uri(model),
                       manifest=manifest, workdir=Path(workdir) / "anchor", engine=engine, **kw)
    labels = {it.id: it.gold["label"] for it in test}
    mine = judged["test_verdicts"]
    base = "uncalibrated" if "uncalibrated" in mine else "uncalibrated_train_threshold"
    verdicts = {"calibrated": mine["calibrated"], **({"uncalibrated": mine[base]} if base in mine else {}),
                **res.verdicts}
    cmp = compare_judges(labels, verdicts, "calibrated", sorted(set(verdicts) - {"calibrated"}))
    return {"comparison": cmp, "metadata": res.metadata, "instructions": res.instructions, "aligners": aligners,
            "errors": {k: len(v) for k, v in res.errors.items()}}


def print_calibration(rep: dict, echo=print) -> None:
    """The run's common tables and the judge table (verifirst.report), then anchor and champion."""
    from rich.console import Console

    from verifirst.report import print_report

    con = Console(width=None if sys.stdout.isatty() else 140)
    print_report(rep, con)
    if rep.get("from_mlflow"):
        f = rep["from_mlflow"]
        con.print(f"records from MLflow experiment {f['experiment']}: {f['n_labelled']} of {f['n_traces']} traces "
                  f"labelled {f['label']!r}; skipped {f['skipped_unlabelled']} unlabelled, "
                  f"{f['skipped_unreadable']} unreadable", markup=False)
    _print_noise(judge_section(rep).get("loop", {}).get("noise"), con)
    if rep.get("anchor"):
        _print_anchor(rep["anchor"], con)
    if rep.get("baseline"):
        _print_baseline(rep["baseline"], con)
    q = rep.get("review_queue") or {}
    if q:
        where = (f"; MLflow dataset {q['mlflow']['dataset']} (experiment {q['mlflow']['experiment']}): label "
                 f"its traces, then --from-mlflow {q['mlflow']['experiment']} --label label") if q.get("mlflow") else ""
        con.print(f"review queue: {q['n']} item(s) {q.get('by_reason') or ''} in {q['file']}{where}",
                  soft_wrap=True, markup=False)
    if rep.get("prompt_uri"):
        ch = rep.get("champion", {})
        con.print(f"calibrated prompt: {rep['run_dir']}/calibrated_prompt.txt, registered as {rep['prompt_uri']}",
                  soft_wrap=True)
        who = ch.get("alias") or "alias"
        con.print(f"{who} {'moved' if ch.get('moved') else 'kept'} (decided on {ch.get('decided_on')}): "
                  f"{ch.get('reason')}", soft_wrap=True, markup=False)
        for line in report_lines(rep):
            con.print(line, soft_wrap=True, markup=False)
    if rep.get("run_id"):
        con.print(f"MLflow run {rep.get('run_id')} in {rep.get('tracking_uri')}")


def _print_noise(noise: dict | None, con) -> None:
    """The judge's repeat noise on validation: π spread and flip rates, start vs selected prompt."""
    if not noise:
        return
    for which in ("initial", "selected"):
        n = noise.get(which) or {}
        if n.get("pi_mean") is None:
            continue
        flips = sorted(((v, k) for k, v in (n.get("flip_rate") or {}).items() if v > 0), reverse=True)[:5]
        con.print(f"judge noise ({which} prompt, {noise['repeats']} runs at temperature {noise['temperature']}): "
                  f"validation π mean {n['pi_mean']:.3f} sd {n['pi_sd']:.3f} [min {n['pi_min']:.3f}, max "
                  f"{n['pi_max']:.3f}]; {n['items_flipping']} item(s) flip, mean flip rate "
                  f"{(n.get('mean_flip_rate') or 0):.3f}" + (f"; most: {', '.join(f'{k} {v:.2f}' for v, k in flips)}"
                                                              if flips else ""), markup=False, soft_wrap=True)
    for a in noise.get("acceptance") or []:
        ci = a.get("paired_ci95")
        con.print(f"  iteration {a['iteration']} vs {a['against_iteration']}: Δπ {a['delta']:+.3f}, noise "
                  f"{a['noise']:.3f}" + (f", paired 95% [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")
                  + f" -> {'accepted' if a['accepted'] else 'rejected (within noise)'}", markup=False)


def _print_anchor(anchor: dict, con) -> None:
    """One table on the test split: uncalibrated, AutoRefine and each MLflow aligner, paired against AutoRefine."""
    from rich.table import Table

    cmp = anchor.get("comparison") or {}
    t = Table(title=f"anchor: {cmp.get('n_scored')} of {cmp.get('n_items')} test items scored by every judge "
                    f"(LM errors left out: {cmp.get('excluded_lm_errors')})")
    for col in ("judge", "π", "accuracy", "FAIL recall", "PASS recall", "Δπ AutoRefine − judge [95% CI]",
                "McNemar exact p"):
        t.add_column(col)
    for name, m in (cmp.get("judges") or {}).items():
        c = (cmp.get("comparisons") or {}).get(f"calibrated_vs_{name}")
        label = "AutoRefine (calibrated)" if name == "calibrated" else name
        t.add_row(label, f"{m['pi']:+.3f}", f"{m['accuracy']:.3f}", _fmt(m.get("fail_recall")),
                  _fmt(m.get("pass_recall")),
                  "" if c is None else f"{c['pi_delta']:+.3f} [{c['pi_ci95'][0]:+.3f}, {c['pi_ci95'][1]:+.3f}]",
                  "" if c is None else f"{c['mcnemar_exact']['p_value']:.3g}")
    con.print(t)
    if anchor.get("metadata", {}).get("align_error"):
        con.print(f"anchor align error: {anchor['metadata']['align_error']}", markup=False)


def _print_baseline(base: dict, con) -> None:
    """The judge × window table: baseline, uncalibrated start and calibrated prompt per window."""
    from rich.table import Table

    from verifirst.report import baseline_lines, baseline_rows, baseline_title

    headers, rows = baseline_rows({"baseline": base})
    if rows:
        t = Table(title=baseline_title({"baseline": base}))
        for h in headers:
            t.add_column(h)
        for r in rows:
            t.add_row(*r)
        con.print(t)
    for line in baseline_lines({"baseline": base}):
        con.print(line, markup=False, soft_wrap=True)


def load_prompt_text(spec: str, workdir: Path, tracking_uri: str | None = None) -> tuple[str, dict]:
    """A prompt from a file path or the registry (prompts:/name/version or prompts:/name@alias)."""
    start = resolve_start_prompt(spec, workdir, tracking_uri)
    return start.text, start.tags


class NothingJudged(RunFailed):
    """`verifirst judge` judged no record: every one is an LM error (exit 1, as a calibration whose
    model gave no usable answers). `rows` holds the verdict-null rows, each with its error."""

    def __init__(self, message: str, rows: list[dict[str, Any]]):
        super().__init__(message)
        self.rows = rows


def _row_error(result: dict | None) -> str | None:
    """A record's LM error as a row shows it (credentials masked: a provider may quote the key)."""
    from verifirst.core.redaction import redact_text

    error = (result or {}).get("error")
    return redact_text(str(error)) if error else None


def _first_lm_error(rows: list[dict[str, Any]]) -> str | None:
    return next((r["error"] for r in rows if r.get("verdict") is None and r.get("error")), None)


def judge_summary(rows: list[dict[str, Any]]) -> str:
    """One line: how many records were judged, the first LM error if any, and agreement where
    records carry a label.

    Args:
        rows: apply_judge's rows.
    """
    from verifirst.core import stats

    judged = [r for r in rows if r["verdict"] in ("PASS", "FAIL")]
    msg = f"judged {len(judged)} of {len(rows)} records ({len(rows) - len(judged)} LM errors)"
    first = _first_lm_error(rows)
    if first:
        msg += f"; first LM error: {first}"
    both = [r for r in judged if r.get("label") in ("PASS", "FAIL")]
    if len(both) >= 2:
        agree = sum(r["verdict"] == r["label"] for r in both) / len(both)
        pi = stats.scotts_pi([r["label"] for r in both], [r["verdict"] for r in both])
        msg += f"; against the {len(both)} labels: agreement {agree:.3f}, Scott's pi {pi:+.3f}"
    return msg


def _check_judged(rows: list[dict[str, Any]]) -> None:
    """NothingJudged when records were given and none got a verdict: no result, never exit 0."""
    if rows and not any(r["verdict"] in ("PASS", "FAIL") for r in rows):
        raise NothingJudged(f"judged 0 of {len(rows)} records: every one is an LM error (never PASS or FAIL); "
                            f"first LM error: {_first_lm_error(rows) or 'no verdict'}", rows)


def judge_kind(given: str | None, tags: dict, source: str, field: str = "--kind") -> str:
    """The kind a prompt is judged as: the one it was registered with (its `judge` tag), else the one
    given, else passfail. A given kind that conflicts with the tag is refused: a prompt calibrated
    as a rubric judge run as pass/fail (or the reverse) gives verdicts nobody calibrated.

    Args:
        given: the kind asked for (--kind), or None.
        tags: the prompt version's tags (a prompt file has none).
        source: the prompt, for the error.
        field: the option that asks for a kind.
    """
    if given is not None:
        check_calibrate_options(given, field)
    tagged = tags.get("judge") if tags.get("judge") in JUDGE_KINDS else None
    if given is not None and tagged is not None and given != tagged:
        raise InputError(f"{source} was calibrated as a {tagged} judge (its 'judge' tag), not {given}",
                         field=field, expected=f"{field} {tagged}, or no {field} (the prompt's own kind)")
    return tagged or given or "passfail"


def judge_threshold(kind: str, given: float | None, tags: dict, field: str = "--threshold") -> float | None:
    """The score threshold a judge's verdicts are read at: a rubric's given one, else its registered
    `threshold` tag, else its own; a pass/fail judge has no score, so a threshold for it is refused.

    Args:
        kind: the judge kind.
        given: the threshold asked for, or None.
        tags: the prompt version's tags.
        field: the option that asks for a threshold.
    """
    if kind != "rubric":
        if given is not None:
            raise InputError(f"a threshold ({given}) applies to a rubric judge's score; this prompt is judged "
                             f"{kind}", field=field, expected=f"no {field}, or a rubric prompt")
        return None
    if given is not None:
        return float(given)
    raw = tags.get("threshold")
    if raw in (None, "", "None"):
        return None
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise InputError(f"the prompt's 'threshold' tag {raw!r} is not a number", field=field,
                         expected=f"{field} X, or a prompt version tagged with a numeric threshold") from None


def apply_judge(prompt: str, input_path: Path, judge: str | None = None, model: str = "local",
                workdir: Path = Path(".verifirst"), threshold: float | None = None, view: str | None = None,
                tracking_uri: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """`verifirst judge`: a (registered) prompt applied to records, one verdict row per record
    (verdict None with the LM error when the judge could not judge it). Raises NothingJudged
    (exit 1, the rows attached) when no record could be judged.

    Args:
        prompt: a prompt file, prompts:/NAME/VERSION or prompts:/NAME@ALIAS.
        input_path: the records (.jsonl/.csv; label optional).
        judge: the judge kind (default: the one the prompt was registered with, else passfail; one
            that conflicts with it is refused).
        model: the judge model spec.
        workdir: cache and the local MLflow store.
        threshold: rubric threshold (default: the registered one).
        view: the --view spec (default: the view the prompt was calibrated with, if registered).
        tracking_uri: the MLflow tracking URI holding the registry.
        limit: judge only the first `limit` records of the file (each costs a model call).
    """
    from verifirst.config import check_number, check_workdir

    if limit is not None:
        check_number(limit, 1, None, "--limit", integer=True)

    check_workdir(workdir, "workdir")  # as calibrate: a file there is refused before the cache is written
    if judge is not None:
        check_calibrate_options(judge, "--kind")
    if threshold is not None:
        check_number(threshold, 0.0, 1.0, "--threshold")
    run_judge, verdicts_at = _part("run-judge"), _part("verdicts-at")
    load_outcomes = registry.component("suite", "outcomes")
    text, tags = load_prompt_text(prompt, workdir, tracking_uri)
    judge = judge_kind(judge, tags, prompt)
    th = judge_threshold(judge, threshold, tags)  # before any record is read or judged
    suite = load_outcomes(input_path, require_label=False) if _accepts_unlabelled(load_outcomes) \
        else load_outcomes(input_path)
    suite.items = suite.items[:limit] if limit is not None else suite.items
    j = make_judge_program(judge, suite, text, view or tags.get("view") or None)
    lm = make_lm(model, role="judge")
    configure_cache(Path(workdir) / "cache")
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        run = run_judge(j, suite.items, lm)
    verdicts = verdicts_at(run, th)
    rows = [{"id": it.id, "verdict": verdicts.get(it.id), "label": it.gold.get("label"),
             "reasoning": (run.get(it.id) or {}).get("reasoning"), "error": _row_error(run.get(it.id))}
            for it in suite.items]
    _check_judged(rows)
    return rows


def cli_judge(*args: Any, **kwargs: Any) -> int:
    """`verifirst judge`: one JSON row per record on stdout, the summary on stderr; exit code 0.
    When no record could be judged the rows are printed, then NothingJudged is raised (exit 1,
    the first LM error in its message).

    Args:
        args, kwargs: apply_judge's.
    """
    try:
        rows = apply_judge(*args, **kwargs)
    except NothingJudged as e:
        _print_judged(e.rows)
        raise
    _print_judged(rows)
    return 0


def _print_judged(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        print(json.dumps(row, default=str))
    print(judge_summary(rows), file=sys.stderr)


def _accepts_unlabelled(load_outcomes: Callable) -> bool:
    import inspect

    return "require_label" in inspect.signature(load_outcomes).parameters


def cli_calibrate(**kw) -> int:
    as_json = kw.pop("as_json", False)
    if kw.get("dry_run"):
        est = calibrate_run(kw.pop("outcomes", None), echo=lambda m: None, **kw)
        print(json.dumps(est.as_dict(), indent=2) if as_json else est.render(), end="\n" if as_json else "")
        return 0
    rep = calibrate_outcomes(kw.pop("outcomes", None), echo=(lambda m: None) if as_json else print, **kw)
    if as_json:
        from verifirst.report import report_json

        print(report_json(rep))
    else:
        print_calibration(rep)
    return 0


JUDGE_KINDS = ("passfail", "rubric")
CALIBRATION_ROLES = ("judge", "task", "teacher", "reflection")


def _judge_prompt(judge: str, kind: str) -> tuple[str, str | None]:
    """(kind, starting prompt) from a judge kind, a prompt file or a prompt's text."""
    if judge in JUDGE_KINDS:
        return judge, None
    if kind not in JUDGE_KINDS:
        raise InputError(f"unknown judge kind {kind!r}", field="kind", expected=" or ".join(JUDGE_KINDS))
    if "\n" not in judge and len(judge) < 4096:
        path = Path(judge)
        if path.is_file():
            text = path.read_text(encoding="utf-8").strip()
            if not text:
                raise InputError("the judge prompt file is empty", path=str(path), expected="a prompt text")
            return kind, text
    if not judge.strip():
        raise InputError("empty judge prompt", field="judge", expected="passfail, rubric, a prompt or its file")
    return kind, judge.strip()


def _calibration_models(models: Any) -> dict:
    """{judge, teacher, reflection} LMs: teacher defaults to the judge, reflection to the teacher."""
    import dspy

    given = {k: v for k, v in dict(models or {}).items() if v is not None}
    unknown = sorted(set(given) - set(CALIBRATION_ROLES))
    if unknown:
        raise InputError(f"unknown role {unknown[0]!r}", field="models", expected="roles judge, teacher, reflection")
    judge = given.get("judge") or given.get("task")
    if judge is None and dspy.settings.lm is None:
        raise InputError("no judge LM: pass models={'judge': ...} or dspy.configure(lm=...)", field="models.judge")
    if judge is None:
        judge = dspy.settings.lm
    teacher = given.get("teacher") or judge
    lms = build_models({"task": judge, "judge": judge, "teacher": teacher,
                        "reflection": given.get("reflection") or teacher})
    return {"judge": lms.judge, "teacher": lms.teacher, "reflection": lms.reflection}


def calibrate(outcomes: str | Path | None, judge: str = "passfail", *, models: Any = None, max_iters: int = 5,
              splits: Any = DEFAULT_RATIOS, run_dir: str | Path | None = None, tracking: MLflow | None = None,
              kind: str = "passfail", workdir: str | Path | None = None, seed: int = 0, threads: int = 1,
              limit: int | None = None, anchor: bool | str = False, echo: Any = None,
              prompt: str | None = None, view: str | None = None, name: str | None = None,
              promote: str | None = None, from_mlflow: str | None = None, label: str = "label",
              repeats: int = 1, no_test: bool = False, pass_at: float | None = None, label_map: Any = None,
              promote_rule: str = "significant", budget: Budget | None = None,
              baseline: str | Path | None = None, dry_run: bool = False, robustness: Any = None) -> Any:
    """Calibrate an LLM judge on recorded outcomes with AutoRefine, through the one driver.

    The same experiment as `verifirst calibrate`: the judge program is scored before and after
    on every split against the recorded labels, AutoRefine sees train and validation only, and
    the test split is scored once, after selection. The report is `optimize`'s report plus a
    `judge` section (Scott's π against the uncalibrated judge with a paired bootstrap interval,
    FAIL recall/precision, PASS recall, McNemar, the teacher's keep/correct/abstain).

    Args:
        outcomes: a JSONL/CSV file of outcome records: `id`, `label` (PASS/FAIL or words such as
            merged/rejected), the view fields the judge reads, optionally `group` and metadata.
        judge: "passfail" or "rubric" (the default prompt), or your own starting prompt: its
            text or the path of a file holding it (a judge of `kind`).
        models: {"judge": ..., "teacher": ..., "reflection": ...} as model strings, dicts with
            api_base, or dspy.LM objects; the teacher defaults to the judge and the reflection
            (edit proposer) to the teacher; None uses the LM you configured in DSPy.
        max_iters: AutoRefine iterations at most.
        splits: (train, val, test) ratios, stratified by label, related records (`group`) kept together;
            or {"ratios": ..., "by": "time", "time_field": "created_at", "windows": "7d"}.
        run_dir: where checkpoints, evaluations, calibrated_prompt.txt and the reports go
            (default: a new WORKDIR/runs/calibrate-KIND-TIME); an unfinished one resumes.
        tracking: vf.MLflow(...) logs the run and registers the calibrated prompt, whose
            `champion` alias moves only on validation evidence; None tracks nothing.
        kind: the judge kind for a prompt of your own ("passfail" or "rubric").
        workdir: cache, runs, the test-reuse ledger and the local MLflow store (default .verifirst).
        seed: the split seed.
        threads: evaluation and loop threads.
        limit: use the first N records.
        anchor: also run MLflow make_judge + align() on the same split and compare: True (SIMBA),
            or aligners as "simba", "gepa", "memalign", a comma list or "all".
        echo: a callable for progress lines (default: none).
        prompt: your judge template with {{ variables }}: a file, prompts:/NAME/VERSION or
            prompts:/NAME@ALIAS (as `verifirst calibrate --prompt`); the calibrated version is
            registered under the same name (a file: `name` or its stem).
        view: which record fields fill the template's variables: "title,diff" or "diff=patch,...".
        name: the registry name for a file prompt.
        promote: move this alias to the calibrated version, only on validation evidence.
        from_mlflow: read records from this MLflow experiment's traces instead of `outcomes`,
            labelled by the human assessment or expectation named `label`.
        label: the assessment name that carries the label (with from_mlflow).
        repeats: judge runs per validation item; an edit must beat the repeat noise.
        no_test: run without a held-out test split (splits with test 0), on purpose.
        pass_at: numeric ratings at or above it are PASS (e.g. 4 on a 1-5 scale).
        label_map: categorical labels to PASS/FAIL: {"excellent": "PASS", "poor": "FAIL"} or
            "excellent=PASS,poor=FAIL"; a value neither covers is refused, naming its records.
        promote_rule: "significant" (validation Δπ interval above zero), "better" or
            "noninferior:MARGIN".
        budget: spend limits for the run, every role (vf.Budget(max_usd=..., max_lm_calls=...,
            per_role=..., prices=...)); a call that would cross one is not sent and the run stops,
            resumable with a larger budget. Its max_iters and threads are this call's.
        baseline: the judge prompt deployed now, to recalibrate against: a file or
            prompts:/NAME@champion (as `verifirst calibrate --baseline`). report["baseline"] is a judge
            × window table: baseline, uncalibrated start and calibrated prompt on the test split and
            on each older time window, π with its interval, paired Δπ and McNemar against the baseline.
            It is reported only: nothing is selected or promoted on it.
        dry_run: return the spend estimate (calls, tokens and USD low-high per role and phase: the
            teacher pass, AutoRefine's iterations x items, proposer and applier, the evaluations of
            every split) instead of running: no model is called and nothing is written.
        robustness: gate promotion on perturbed validation items: True (the built-in suite), or built-in
            names and functions item -> item (see vf.robustness); refused when the calibrated judge flips
            significantly more often than the champion (paired exact McNemar), report["champion"]["robustness"].

    Returns:
        A Result like `optimize`'s: the calibrated judge program, the report, the split
        manifest, the run directory and the driver's before/after evaluations; with dry_run the
        SpendEstimate (verifirst.loop.estimate).
    """
    kind, judge_text = _judge_prompt(str(judge), kind)
    lms = _calibration_models(models)
    out = calibrate_run(Path(outcomes) if outcomes is not None else None, kind, max_iters=max_iters, splits=splits,
                        workdir=Path(workdir or DEFAULT_WORKDIR), limit=limit, seed=seed, threads=threads,
                        run_dir=Path(run_dir) if run_dir else None, models=lms, anchor=anchor,
                        echo=echo or (lambda line: None), prompt=judge_text, tracking=tracking is not None,
                        tracking_uri=tracking.uri if tracking else None,
                        trace=bool(tracking and tracking.traces),
                        experiment=(tracking.experiment if tracking and tracking.experiment else "verifirst-calibrate"),
                        prompt_source=prompt, view=view, name=name, promote_alias=promote, from_mlflow=from_mlflow,
                        label=label, repeats=repeats, no_test=no_test, pass_at=pass_at, label_map=label_map,
                        promote_rule=promote_rule, budget=budget,
                        baseline=str(baseline) if baseline is not None else None, dry_run=dry_run,
                        robustness=robustness)
    return out if dry_run else out.result
