"""Journey 1: calibrate a judge prompt on workflow outcomes (AutoRefine) and apply it.

Calibration is the judge domain on the one run loop: `vf.optimize` with the outcomes suite, the
judge program (passfail | rubric, or your prompt), the label verifier and the AutoRefine engine,
so the split guard, run directory, cache, tracking and test-reuse ledger are `run`'s own. Its
steps observe the loop (`CalibrationSteps`, a RunCallback): when the report is ready they add a
`judge` section (π, FAIL/PASS recall, McNemar, the teacher) computed from the loop's
before/after evaluations, then the review queue, the anchors, the prompt registry with an alias
that moves only on validation with a `champion` alias that moves only on validation
evidence (verifirst.judge.promotion: the --promote-rule against the current champion, both scored by
this run's judge LM on this run's validation items; test numbers are reported and decide
nothing). `calibrate` is the Python API (`vf.calibrate`); `cli_calibrate` is `verifirst calibrate`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import dspy


from verifirst.api import DEFAULT_WORKDIR, MLflow, build_models
from verifirst.loop.splits import DEFAULT_RATIOS, SPLITS, SplitManifest, make_splits
from verifirst.core.engine import Budget
from verifirst.core.errors import InputError
from verifirst.judge.template import template_variables
from verifirst.lm import FastJSONAdapter, make_lm
from verifirst.loop.preflight import check_verifiers
from verifirst.core.task import Suite
from verifirst.tracking import Tracker
from verifirst.judge.anchor import parse_anchor
from verifirst.judge.baseline import resolve_baseline
from verifirst.judge.options import CALIBRATION_ROLES, JUDGE_KINDS, load_outcome_suite, parse_ratios
from verifirst.judge.printing import print_calibration
from verifirst.judge.prompts import check_store_has, make_judge_program, resolve_start_prompt
from verifirst.judge.steps import CalibrationSettings, CalibrationSteps, estimate_promotion, estimate_report_steps
from verifirst.judge.autorefine import DEFAULT_LENGTH_CAP, DEFAULT_TARGET_PI, AutoRefineEngine
from verifirst.judge.label_verifier import LabelVerifier
from verifirst.judge.labellers import apply_label_policy
from verifirst.judge.pool import Pool, as_pool


# The judge's evaluations stop as `verifirst run`'s do (evaluate.py): when the first requests all
# failed, and once 10 items are done above this share of LM errors (AutoRefine's own passes' limit).
MAX_ERROR_RATE = 0.5
DEFAULT_TEMPERATURE = 0.7  # the judge's temperature for repeated validation runs (--repeats above 1)


def _budget(s: CalibrationSettings) -> Budget:
    """The loop's budget: AutoRefine's iterations and threads, with the caller's spend limits."""
    import dataclasses

    if s.budget is None:
        return Budget(max_iters=s.max_iters, num_threads=as_pool(s.threads).threads)
    return dataclasses.replace(s.budget, max_iters=s.max_iters, num_threads=as_pool(s.threads).threads)


def _progress_lines(echo: Callable[[str], None]) -> list:
    """Progress lines for a calibration written to a file or a pipe (cron, CI): one per phase and
    per tenth of a split (the steps observer prints the optimizer's own)."""
    from verifirst.report.progress import PhaseLines, wanted

    return [PhaseLines(echo, announce=False, iterations=False)] if wanted() else []


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
    verifier = LabelVerifier()
    engine = AutoRefineEngine(**(engine_options or {}))
    steps = CalibrationSteps(s, suite, manifest, program, engine, lms, tracking, echo, source_line)
    steps.log_metrics = log_metrics
    judge_lm = lms["judge"] if lms.get("judge") is not None else dspy.settings.lm
    models = Models(task=judge_lm, judge=judge_lm, teacher=lms["teacher"], reflection=lms["reflection"])
    out = optimize(program, suite, verifier, engine, splits=manifest, models=models,
                   budget=_budget(s), run_dir=run_dir,
                   tracking=tracking, callbacks=[steps, *_progress_lines(echo)], output_field="verdict",
                   threads=as_pool(s.threads).threads,
                   workdir=s.workdir, name=name or f"calibrate-{s.judge}", max_error_rate=MAX_ERROR_RATE, progress=False,
                   adapter=FastJSONAdapter(), cache=s.workdir / "cache" if s.cache else None, config=config,
                   eval_splits=eval_splits, dry_run=dry_run, confirm=confirm)
    if dry_run:
        estimate_report_steps(out, s, suite, manifest, program, tracking is not None)
    return out


@dataclass
class CalibrationRun:
    """What `calibrate_run` returns: the driver's result (report with `judge`), splits, run dir."""

    result: Any  # the api Result: program, report, before, after
    manifest: SplitManifest
    run_dir: Path

    @property
    def report(self) -> dict:
        return self.result.report


def calibrate_outcomes(outcomes: Path | None, **kwargs: Any) -> dict:
    """The report dict of a calibration on an outcomes file (tests, studies): `calibrate_run`'s.

    Args:
        outcomes: the outcomes file (None with from_mlflow).
        kwargs: CalibrateRequest fields, with `prompt_source` for the request's `prompt` (a file or
            registry URI) and `prompt` for its `prompt_text`; and calibrate_run's echo, confirm,
            anchor_engine.
    """
    from verifirst.judge.requests import CalibrateRequest

    run = {k: kwargs.pop(k) for k in ("echo", "confirm", "anchor_engine") if k in kwargs}
    if "prompt" in kwargs:
        kwargs["prompt_text"] = kwargs.pop("prompt")
    if "prompt_source" in kwargs:
        kwargs["prompt"] = kwargs.pop("prompt_source")
    request = CalibrateRequest.build(dict(outcomes=outcomes, **kwargs))
    return calibrate_run(request, **run).report


def calibrate_run(request: Any, *, echo: Callable[[str], None] = print, confirm: Callable[[Any], bool] | None = None,
                  anchor_engine: Any = None) -> Any:
    """Calibrate a judge as `request` asks: records, splits, the one run loop with the judge's steps
    (report, prompt registry, champion, anchors). `vf.calibrate` is its door.

    Args:
        request: the checked verifirst.judge.requests.CalibrateRequest (what each field means: `calibrate`'s
            Args); its records come from `outcomes`, `from_mlflow` or, in memory, `records` (with
            `manifest`, `program`: the aligner's and run_calibration's). Its LMs are `models`
            ({"judge", "teacher", "reflection"}), else made from the model strings.
        echo: where progress lines go.
        confirm: asked with the estimate when it exceeds a max_usd limit (see `vf.optimize`).
        anchor_engine: the MLflow anchors' engine (tests pass a scripted one).

    Returns:
        The CalibrationRun, or with dry_run the SpendEstimate.
    """
    from verifirst.judge.labels import LabelRule
    from verifirst.judge.promotion import parse_rule
    from verifirst.loop.splits import check_resumed_manifest, split_options

    r = request
    workdir, judge, prompt, view, labels = Path(r.workdir), r.judge, r.prompt_text, r.view, r.labels
    rule = LabelRule.of(r.pass_at, r.label_map)
    splits, split_by = split_options(r.split_spec())
    trace_stats: dict | None = None
    if r.records is not None:  # in memory (the aligner's traces, run_calibration's suite)
        suite, source = r.records, r.records.name
    elif r.from_mlflow:
        from verifirst.judge.traces import load_trace_suite

        uri = r.tracking_uri or Tracker(workdir, enabled=False).uri
        check_store_has(uri, f"MLflow experiment {r.from_mlflow!r}", "--from-mlflow",
                        "an experiment with labelled traces")
        suite, trace_stats = load_trace_suite(r.from_mlflow, uri, label=r.label, limit=r.limit, rule=rule,
                                              labellers=labels is not None)
        source = f"mlflow:{r.from_mlflow}"
    elif r.outcomes is None:
        raise InputError("no records to calibrate on", field="--outcomes",
                         expected="--outcomes FILE or --from-mlflow EXPERIMENT")
    else:
        suite, source = load_outcome_suite(r.outcomes, r.limit, r.snippets, rule if rule.given else None,
                                           require_label=labels is None), str(r.outcomes)
    agreement = None
    if labels is not None:  # several labellers: their agreement said before fitting, the policy's labels kept
        agreement = apply_label_policy(suite, labels, rule, echo)
    start = resolve_start_prompt(r.prompt, workdir, r.tracking_uri, r.name) if r.prompt else None
    if start is not None:
        prompt = start.text
    if view is None and not template_variables(prompt or "") and suite.meta.get("default_view"):
        # traces: the judge reads the keys of their inputs/outputs, not the same text twice as JSON
        view = ",".join(suite.meta["default_view"])
    if r.program is None:
        make_judge_program(judge, suite, prompt, view)  # a variable no field fills stops here, before any LM call
    base = resolve_baseline(r.baseline, workdir, r.tracking_uri, judge, suite, view) if r.baseline is not None else None
    manifest = r.manifest if r.manifest is not None else make_splits(
        suite.items, key=lambda it: it.id, group=lambda it: it.group_key, ratios=parse_ratios(splits, r.no_test),
        seed=r.seed, stratify=lambda it: it.gold["label"], source=source, lines=suite.meta.get("lines"), **split_by)
    check_verifiers([LabelVerifier()])  # before any model loads or any LM call
    if r.models is None:
        judge_lm = make_lm(r.model, role="judge", timeout_s=r.timeout_s)
        teacher_lm = make_lm(r.teacher or r.model, role="teacher", timeout_s=r.timeout_s)
        proposer_lm = make_lm(r.proposer or r.teacher or r.model, role="reflection", timeout_s=r.timeout_s)
    else:
        judge_lm, teacher_lm, proposer_lm = r.models["judge"], r.models["teacher"], r.models["reflection"]
    if r.manifest is None and r.run_dir is not None and (Path(r.run_dir) / "split_manifest.json").exists():
        check_resumed_manifest(Path(r.run_dir), manifest)  # a time split does not resume a random one
    source_line = None
    if trace_stats is not None:
        source_line = (f"{r.from_mlflow}: {trace_stats['n_traces']} traces, {trace_stats['n_labelled']} labelled "
                       f"by {r.label!r}, {trace_stats['skipped_unlabelled']} skipped without that label")
    extra: dict[str, Any] = {"labels": {"rule": rule.describe(), "pass_at": rule.pass_at, "label_map": rule.label_map,
                                        **({"agreement": agreement} if agreement is not None else {})}}
    if trace_stats is not None:
        extra["from_mlflow"] = {"experiment": r.from_mlflow, "label": r.label, **trace_stats}
    settings = CalibrationSettings(judge=judge, max_iters=r.max_iters, threads=Pool(r.threads), view=view,
                                   repeats=r.repeats, model=r.model, workdir=workdir, experiment=r.experiment,
                                   start=start, promote_alias=r.promote_alias, promote_rule=parse_rule(r.promote_rule),
                                   aligners=parse_anchor(r.anchor), anchor_engine=anchor_engine, extra=extra,
                                   budget=r.budget, baseline=base, robustness=r.robustness, n_boot=r.n_boot,
                                   cache=r.cache)
    from verifirst.tracking.callback import MLflowCallback

    mlflow = MLflowCallback(workdir, uri=r.tracking_uri, experiment=r.experiment, traces=r.trace, offline=r.offline,
                            register_prompt=False) if r.tracking and not r.dry_run else None
    config = r.config
    if config is None and r.records is None:
        config = {"judge": judge, "max_iters": r.max_iters, "splits": str(splits), "split_by": split_by["by"],
                  "outcomes": source, "prompt": r.prompt or "", "view": view or "", "repeats": r.repeats}
    options = dict(r.autorefine or {})
    if r.repeats > 1:
        options = {"repeats": r.repeats, "temperature": DEFAULT_TEMPERATURE, **options}
    res = calibrate_suite(suite, manifest, settings, {"judge": judge_lm, "teacher": teacher_lm,
                                                      "reflection": proposer_lm},
                          prompt=prompt, run_dir=Path(r.run_dir) if r.run_dir else None, tracking=mlflow,
                          echo=echo, source_line=source_line, config=config, engine_options=options or None,
                          program=r.program, name=r.run_name, eval_splits=r.eval_splits or SPLITS,
                          dry_run=r.dry_run, confirm=confirm)
    if r.dry_run:
        if r.tracking:  # the promotion step (it needs the tracker, which a dry run does not start)
            estimate_promotion(res, settings, manifest)
        return res
    return CalibrationRun(res, manifest, res.run_dir)


def cli_calibrate(request: Any, confirm: Callable[[Any], bool] | None = None) -> int:
    """`verifirst calibrate`: `vf.calibrate(request)`, its report (or with --dry-run the estimate) printed.

    Args:
        request: the CalibrateRequest built from the flags.
        confirm: asked with the estimate when it exceeds --max-usd (see `vf.optimize`).
    """
    if request.dry_run:
        est = calibrate(request)
        print(json.dumps(est.as_dict(), indent=2) if request.as_json else est.render(),
              end="\n" if request.as_json else "")
        return 0
    rep = calibrate(request, echo=None if request.as_json else print, confirm=confirm).report
    if request.as_json:
        from verifirst.report import report_json

        print(report_json(rep))
    else:
        print_calibration(rep)
    return 0


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
              baseline: str | Path | None = None, dry_run: bool = False, robustness: Any = None,
              labels: str | None = None, confirm: Callable[[Any], bool] | None = None) -> Any:
    """Calibrate an LLM judge on recorded outcomes with AutoRefine, through the one driver.

    The same experiment as `verifirst calibrate`: the judge program is scored before and after
    on every split against the recorded labels, AutoRefine sees train and validation only, and
    the test split is scored once, after selection. The report is `optimize`'s report plus a
    `judge` section (Scott's π against the uncalibrated judge with a paired bootstrap interval,
    FAIL recall/precision, PASS recall, McNemar, the teacher's keep/correct/abstain).

    Args:
        outcomes: a JSONL/CSV file of outcome records: `id`, `label` (PASS/FAIL or words such as
            merged/rejected), the view fields the judge reads, optionally `group` and metadata; or a
            verifirst.judge.requests.CalibrateRequest, run as it is (the other arguments are then unused).
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
        labels: records labelled by several people (a `labels` object {labeller: label} each): the label
            policy, majority, unanimous or a labeller's name; Krippendorff's α among the labellers with its
            interval is said before fitting and kept in report["labels"]["agreement"].
        confirm: asked with the spend estimate when it exceeds a max_usd limit; False: not started.

    Returns:
        A Result like `optimize`'s: the calibrated judge program, the report, the split
        manifest, the run directory and the driver's before/after evaluations; with dry_run the
        SpendEstimate (verifirst.loop.estimate).
    """
    from verifirst.judge.requests import API_NAMES, CalibrateRequest

    if isinstance(outcomes, CalibrateRequest):  # vf.calibrate(request): built elsewhere, passed whole
        request = outcomes
    else:
        kind, judge_text = _judge_prompt(str(judge), kind)
        request = CalibrateRequest.build(dict(
            outcomes=outcomes, judge=kind, prompt_text=judge_text, max_iters=max_iters, splits=splits,
            workdir=workdir or DEFAULT_WORKDIR, limit=limit, seed=seed, threads=threads, run_dir=run_dir,
            anchor=anchor, tracking=tracking is not None, tracking_uri=tracking.uri if tracking else None,
            trace=bool(tracking and tracking.traces),
            experiment=(tracking.experiment if tracking and tracking.experiment else "verifirst-calibrate"),
            prompt=prompt, view=view, name=name, promote_alias=promote, from_mlflow=from_mlflow, label=label,
            repeats=repeats, no_test=no_test, pass_at=pass_at, label_map=label_map, promote_rule=promote_rule,
            budget=budget, baseline=str(baseline) if baseline is not None else None, dry_run=dry_run,
            robustness=robustness, labels=labels), names=API_NAMES)
        request = request.model_copy(update={"models": _calibration_models(models)})  # after the checks
    out = calibrate_run(request, echo=echo or (lambda line: None), confirm=confirm)
    return out if request.dry_run else out.result


# -- end to end without MLflow ---------------------------------------------------------------
def run_calibration(suite, manifest, judge_kind: str = "passfail", teacher_lm=None, proposer_lm=None,
                    judge_lm=None, max_iters: int = 5, run_dir: str | Path = "runs/calibrate", *,
                    prompt: str | None = None, target_pi: float = DEFAULT_TARGET_PI,
                    length_cap: int = DEFAULT_LENGTH_CAP, use_teacher: bool = True, threads: int = 1,
                    batch_size: int = 6, n_boot: int = 2000, view: str | None = None, repeats: int = 1,
                    temperature: float = DEFAULT_TEMPERATURE) -> dict:
    """The calibration experiment on records and splits in memory, without tracking: its report.

    `vf.calibrate` with a CalibrateRequest of these records, this manifest and these LMs: judge
    program, label verifier, AutoRefine engine on the one run loop; the report is the loop's plus `judge`.
    Writes the report files, calibrated_prompt.txt, the loop checkpoint and the evaluations into
    run_dir; the test-reuse ledger is the one of the workdir run_dir lives in. `view` maps record
    fields to the prompt's template variables; `repeats` > 1 runs the judge that many times per
    validation item (see `refine_judge`).
    """
    from verifirst.judge.requests import CalibrateRequest
    from verifirst.loop.ledger import ledger_for_run_dir

    run_dir = Path(run_dir)
    request = CalibrateRequest.build(dict(
        records=suite, manifest=manifest, judge=judge_kind, prompt_text=prompt, max_iters=max_iters, run_dir=run_dir,
        workdir=ledger_for_run_dir(run_dir).path.parent, threads=threads, view=view, repeats=repeats, n_boot=n_boot,
        cache=False, tracking=False, models={"judge": judge_lm, "teacher": teacher_lm, "reflection": proposer_lm},
        autorefine={"target_pi": target_pi, "length_cap": length_cap, "use_teacher": use_teacher,
                    "batch_size": batch_size, "repeats": repeats, "temperature": temperature}))
    return calibrate(request).report
