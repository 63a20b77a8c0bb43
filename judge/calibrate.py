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
from verifirst.judge.options import (CALIBRATION_ROLES, JUDGE_KINDS, check_calibrate_options, check_record_source,
                                     load_outcome_suite, parse_ratios)
from verifirst.judge.printing import print_calibration
from verifirst.judge.prompts import check_store_has, make_judge_program, resolve_start_prompt
from verifirst.judge.steps import CalibrationSettings, CalibrationSteps, estimate_promotion, estimate_report_steps
from verifirst.judge.autorefine import DEFAULT_LENGTH_CAP, DEFAULT_TARGET_PI, AutoRefineEngine
from verifirst.judge.label_verifier import LabelVerifier
from verifirst.judge.labellers import apply_label_policy


# The judge's evaluations stop as `verifirst run`'s do (evaluate.py): when the first requests all
# failed, and once 10 items are done above this share of LM errors (AutoRefine's own passes' limit).
MAX_ERROR_RATE = 0.5


def _budget(s: CalibrationSettings) -> Budget:
    """The loop's budget: AutoRefine's iterations and threads, with the caller's spend limits."""
    import dataclasses

    if s.budget is None:
        return Budget(max_iters=s.max_iters, num_threads=s.threads)
    return dataclasses.replace(s.budget, max_iters=s.max_iters, num_threads=s.threads)


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
                   tracking=tracking, callbacks=[steps, *_progress_lines(echo)], output_field="verdict", threads=s.threads,
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


def calibrate_outcomes(outcomes: Path, *args: Any, **kwargs: Any) -> dict:
    """`verifirst calibrate`: the report dict (the driver's report plus `judge`).

    Args:
        outcomes: the outcomes file; every other argument is calibrate_run's.
    """
    return calibrate_run(outcomes, *args, **kwargs).report


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
                  confirm: Callable[[Any], bool] | None = None, labels: str | None = None) -> Any:
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
        pass_at: numeric ratings at or above it are PASS (--pass-at; see verifirst.judge.labels).
        label_map: categorical labels to PASS/FAIL ("excellent=PASS,poor=FAIL" or a dict).
        promote_rule: significant | better | noninferior:MARGIN (see verifirst.judge.promotion).
        budget: a vf.Budget whose spend limits hold for the run (`--max-usd`, ...).
        baseline: the deployed judge prompt to compare with (`--baseline`): a file,
            prompts:/NAME@ALIAS or prompts:/NAME/VERSION; scored with the run's judge LM on the test
            split and on each older time window (report["baseline"]); it decides nothing.
        dry_run: return the spend estimate instead of running (`verifirst calibrate --dry-run`): no
            model is called and nothing is written (no run directory, no MLflow run).
        robustness: a perturbation suite (True: the built-in one) gating promotion against the champion.
        confirm: asked with the estimate when it exceeds a max_usd limit (see `vf.optimize`).
        labels: the label policy for records labelled by several people (`labels`: {labeller: label}):
            majority, unanimous or a labeller's name; their agreement (Krippendorff's α) is said first.

    Returns:
        The CalibrationRun, or with dry_run the SpendEstimate.
    """
    from verifirst.judge.labels import LabelRule
    from verifirst.judge.promotion import parse_rule

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
        from verifirst.judge.traces import load_trace_suite

        uri = tracking_uri or Tracker(workdir, enabled=False).uri
        check_store_has(uri, f"MLflow experiment {from_mlflow!r}", "--from-mlflow", "an experiment with labelled traces")
        suite, trace_stats = load_trace_suite(from_mlflow, uri, label=label, limit=limit, rule=rule,
                                              labellers=labels is not None)
        source = f"mlflow:{from_mlflow}"
    elif outcomes is None:
        raise InputError("no records to calibrate on", field="--outcomes", expected="--outcomes FILE or --from-mlflow EXPERIMENT")
    else:
        suite, source = load_outcome_suite(outcomes, limit, snippets, rule if rule.given else None,
                                           require_label=labels is None), str(outcomes)
    agreement = None
    if labels is not None:  # several labellers: their agreement said before fitting, the policy's labels kept
        agreement = apply_label_policy(suite, labels, rule, echo)
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
    check_verifiers([LabelVerifier()])  # before any model loads or any LM call
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
    extra: dict[str, Any] = {"labels": {"rule": rule.describe(), "pass_at": rule.pass_at, "label_map": rule.label_map,
                                        **({"agreement": agreement} if agreement is not None else {})}}
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
            estimate_promotion(res, settings, manifest)
        return res
    return CalibrationRun(res, manifest, res.run_dir)


def cli_calibrate(request: Any, confirm: Callable[[Any], bool] | None = None) -> int:
    """`verifirst calibrate`: the checked request run, its report (or with --dry-run the estimate) printed.

    Args:
        request: the CalibrateRequest built from the flags.
        confirm: asked with the estimate when it exceeds --max-usd (see `vf.optimize`).
    """
    kw = request.run_kwargs()
    outcomes = kw.pop("outcomes")
    if request.dry_run:
        est = calibrate_run(outcomes, echo=lambda m: None, **kw)
        print(json.dumps(est.as_dict(), indent=2) if request.as_json else est.render(),
              end="\n" if request.as_json else "")
        return 0
    rep = calibrate_run(outcomes, echo=(lambda m: None) if request.as_json else print, confirm=confirm, **kw).report
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
              labels: str | None = None) -> Any:
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
    kw = request.run_kwargs()
    if kw.get("models") is None:
        kw["models"] = _calibration_models(models)
    out = calibrate_run(kw.pop("outcomes"), echo=echo or (lambda line: None), **kw)
    dry_run = request.dry_run
    return out if dry_run else out.result


# -- end to end without MLflow ---------------------------------------------------------------
def run_calibration(suite, manifest, judge_kind: str = "passfail", teacher_lm=None, proposer_lm=None,
                    judge_lm=None, max_iters: int = 5, run_dir: str | Path = "runs/calibrate", *,
                    prompt: str | None = None, target_pi: float = DEFAULT_TARGET_PI,
                    length_cap: int = DEFAULT_LENGTH_CAP, use_teacher: bool = True, num_threads: int = 1,
                    batch_size: int = 6, n_boot: int = 2000, log_metrics: Callable[[dict, int], None] | None = None,
                    view: str | None = None, repeats: int = 1, temperature: float = 0.7) -> dict:
    """The calibration experiment through the one run loop (`vf.optimize`), without tracking: its report.

    The same composition as `verifirst calibrate` (calibrate_suite): judge
    program, label verifier, AutoRefine engine; the report is the loop's plus `judge`.
    Writes the report files, calibrated_prompt.txt, the loop checkpoint and the evaluations into
    run_dir; the test-reuse ledger is the one of the workdir run_dir lives in. `view` maps record
    fields to the prompt's template variables; `repeats` > 1 runs the judge that many times per
    validation item (see `refine_judge`).
    """
    from verifirst.loop.ledger import ledger_for_run_dir

    run_dir = Path(run_dir)
    settings = CalibrationSettings(judge=judge_kind, max_iters=max_iters, threads=num_threads, view=view,
                                   repeats=repeats, workdir=ledger_for_run_dir(run_dir).path.parent, n_boot=n_boot,
                                   cache=False)
    res = calibrate_suite(suite, manifest, settings, {"judge": judge_lm, "teacher": teacher_lm,
                                                      "reflection": proposer_lm},
                          prompt=prompt, run_dir=run_dir, echo=lambda line: None, log_metrics=log_metrics,
                          engine_options={"target_pi": target_pi, "length_cap": length_cap,
                                          "use_teacher": use_teacher, "batch_size": batch_size,
                                          "repeats": repeats, "temperature": temperature})
    return res.report
