"""The judge domain's verbs: `verifirst calibrate`, `verifirst judge` and `verifirst monitor`.

verifirst/cli.py, the composition root, mounts them (`mount(app)`); what they run is imported
when a verb runs, so `verifirst --help` and the other verbs pay nothing for them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from verifirst.cli_common import DEMO_DIR, confirm_spend, fail, spend_budget, tracking_uri_option
from verifirst.cli_run import library_levels_again
from verifirst.core.errors import VerifirstError
from verifirst.loop.splits import DEFAULT_RATIOS


def calibrate(outcomes: Optional[Path] = typer.Option(None, help="outcome records: .jsonl or .csv (id, label, view "
                                                                "fields); or use --from-mlflow"),
              judge: str = typer.Option("passfail", help="passfail | rubric"),
              prompt: Optional[str] = typer.Option(None, help="your judge prompt: a file, prompts:/NAME@ALIAS or "
                                                              "prompts:/NAME/VERSION ({{ variable }} slots allowed)"),
              view: Optional[str] = typer.Option(None, help="record fields for the prompt's variables: "
                                                            "title,diff (same names) or diff=patch (FIELD=VARIABLE)"),
              name: Optional[str] = typer.Option(None, help="registry name for a prompt file's calibrated versions "
                                                            "(default: the file's stem)"),
              promote: Optional[str] = typer.Option(None, "--promote", metavar="ALIAS",
                                                    help="move ALIAS to the new version on --promote-rule's "
                                                         "validation evidence against its current one (never on test)"),
              from_mlflow: Optional[str] = typer.Option(None, "--from-mlflow", metavar="EXPERIMENT",
                                                        help="read records from this experiment's labelled traces"),
              label: str = typer.Option("label", help="--from-mlflow: the assessment (feedback or expectation) "
                                                      "holding the label"),
              pass_at: Optional[float] = typer.Option(None, "--pass-at", help="numeric ratings at or above it are "
                                                                              "PASS (e.g. 4 on a 1-5 scale)"),
              label_map: Optional[str] = typer.Option(None, "--label-map", help="categorical labels: "
                                                      "excellent=PASS,good=PASS,poor=FAIL"),
              promote_rule: str = typer.Option("significant", "--promote-rule",
                                               help="significant (validation Δπ interval above 0) | better | "
                                                    "noninferior:MARGIN"),
              repeats: int = typer.Option(1, help="judge runs per validation item (temperature > 0 above 1): "
                                                  "π spread, flip rates; edits must beat that noise"),
              model: str = typer.Option("local", help="judge model: 'local' or a LiteLLM model string"),
              teacher: Optional[str] = typer.Option(None, help="informed-teacher model (default: --model)"),
              proposer: Optional[str] = typer.Option(None, help="model proposing prompt edits (default: teacher)"),
              max_iters: int = typer.Option(5, help="loop iterations at most"),
              timeout_s: Optional[float] = typer.Option(None, "--timeout-s",
                                                        help="seconds one request to a served model may take "
                                                             "(default 60; each attempt, retries too)"),
              splits: str = typer.Option(",".join(map(str, DEFAULT_RATIOS)),
                                         help="train,val,test fractions (grouped, stratified)"),
              no_test: bool = typer.Option(False, "--no-test", help="allow a test fraction of 0 (--splits 0.5,0.5,0): "
                                                                    "no held-out number is reported"),
              split_by: str = typer.Option("random", "--split-by", help="random (seeded, stratified) | time "
                                           "(train oldest, test newest; needs --time-field)"),
              time_field: Optional[str] = typer.Option(None, "--time-field", help="record field holding its time "
                                                       "(ISO 8601, naive = UTC; a date; or epoch seconds)"),
              windows: Optional[str] = typer.Option(None, "--windows", help="time split: evaluation windows, "
                                                    "a duration (7d, 12h) or a count of equal windows (4)"),
              workdir: Path = typer.Option(DEMO_DIR, help="cache, runs and the local MLflow store"),
              run_dir: Optional[Path] = typer.Option(None, help="run directory; an unfinished one resumes"),
              limit: Optional[int] = typer.Option(None, help="use the first N records (ICE-Score: N problems)"),
              snippets: Optional[int] = typer.Option(None, help="ICE-Score: snippets per problem"),
              seed: int = typer.Option(0), threads: int = typer.Option(1),
              tracking_uri: Optional[str] = tracking_uri_option(),
              offline: bool = typer.Option(False, help="log to the local sqlite store even if a server is configured"),
              trace: bool = typer.Option(False, help="trace every judge and teacher call in MLflow (slower)"),
              anchor: Optional[str] = typer.Option(None, metavar="ALIGNERS",
                                                   help="also run MLflow make_judge + align() on the same split and "
                                                        "compare: simba, gepa, memalign, a comma list or all "
                                                        "(the flag takes a value)"),
              baseline: Optional[str] = typer.Option(None, "--baseline", metavar="PROMPT",
                                                     help="the judge deployed now (prompts:/NAME@champion or a "
                                                          "file): scored beside the new one per time window"),
              as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
              max_usd: Optional[float] = typer.Option(None, "--max-usd", help="hard cap in USD, every role"),
              max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="hard cap on tokens"),
              max_lm_calls: Optional[int] = typer.Option(None, "--max-lm-calls", help="hard cap on model requests"),
              max_wall_s: Optional[float] = typer.Option(None, "--max-wall-s", help="hard cap on wall seconds"),
              dry_run: bool = typer.Option(False, "--dry-run", help="print the spend estimate (calls, tokens, USD "
                                                                     "per role and phase) and exit: no model is "
                                                                     "called, nothing is written"),
              yes: bool = typer.Option(False, "--yes", help="start even when the spend estimate exceeds "
                                                             "--max-usd"),
              robustness: Optional[str] = typer.Option(None, "--robustness", metavar="PERTURBATIONS",
                                                       help="gate promotion on perturbed validation items: builtin "
                                                            "(instruction, padding, reorder, comment) or a comma "
                                                            "list of those; refused when the calibrated judge flips "
                                                            "significantly more often than the champion"),
              labels: Optional[str] = typer.Option(None, "--labels", metavar="POLICY",
                                                   help="records labelled by several people (a labels object "
                                                        "{labeller: label}): majority | unanimous | a labeller's "
                                                        "name; Krippendorff's alpha is reported before fitting")):
    """Calibrate a judge prompt on workflow outcomes with the AutoRefine informed-teacher loop.

    Example: verifirst calibrate --outcomes outcomes.jsonl --prompt judge.md --view title,diff,test_plan
    Prints the held-out report (π with paired bootstrap CI vs the uncalibrated judge, FAIL/PASS
    recall, McNemar), writes the review queue and registers the prompt in MLflow's prompt registry.
    """
    try:
        from verifirst.judge.calibrate import cli_calibrate
        from verifirst.judge.requests import CALIBRATE_FLAGS, CalibrateRequest

        library_levels_again()  # after the heavy imports (dspy resets its logger)

        flags = dict(outcomes=outcomes, judge=judge, model=model, teacher=teacher, proposer=proposer,
                     max_iters=max_iters, splits=splits, split_by=split_by, time_field=time_field, windows=windows,
                     workdir=workdir, run_dir=run_dir, limit=limit, snippets=snippets, seed=seed, threads=threads,
                     tracking_uri=tracking_uri, offline=offline, trace=trace, anchor=anchor or False,
                     as_json=as_json, prompt=prompt, view=view, name=name, promote_alias=promote,
                     from_mlflow=from_mlflow, label=label, repeats=repeats, timeout_s=timeout_s, no_test=no_test,
                     pass_at=pass_at, label_map=label_map, promote_rule=promote_rule, baseline=baseline,
                     dry_run=dry_run, budget=spend_budget(max_usd, max_tokens, max_lm_calls, max_wall_s),
                     robustness=True if robustness in ("builtin", "all") else robustness, labels=labels)
        request = CalibrateRequest.build(flags, names=CALIBRATE_FLAGS)  # every flag checked before any read
        raise typer.Exit(cli_calibrate(request, confirm=None if dry_run else confirm_spend(yes)))
    except VerifirstError as e:
        fail(e)


def judge_cmd(prompt: str = typer.Option(..., help="prompt file, prompts:/NAME/VERSION or prompts:/NAME@champion"),
              input: Path = typer.Option(..., "--input", help="records to judge (.jsonl/.csv; label optional)"),
              kind: Optional[str] = typer.Option(None, help="passfail | rubric (default: the prompt's tag, else "
                                                            "passfail; one that conflicts with the tag is refused)"),
              model: str = typer.Option("local"), workdir: Path = typer.Option(DEMO_DIR),
              threshold: Optional[float] = typer.Option(None, help="rubric threshold (default: the registered one)"),
              view: Optional[str] = typer.Option(None, help="record fields for the prompt's variables (default: the "
                                                            "view it was calibrated with)"),
              tracking_uri: Optional[str] = tracking_uri_option(
                  "MLflow tracking URI holding the prompt registry (default: MLFLOW_TRACKING_URI, else sqlite "
                  "in --workdir)"),
              limit: Optional[int] = typer.Option(None, "--limit", help="judge only the first N records (one "
                                                                       "model call each)")):
    """Apply a (registered) judge prompt to records; prints one JSON verdict per line.

    Example: verifirst judge --prompt prompts:/verifirst-passfail-judge@champion --input new.jsonl
    A record the model could not judge gets verdict null and its LM error; exit 0 when some record
    was judged, 1 when none was (the first LM error is shown), 2 bad input.
    """
    try:
        from verifirst.judge.apply import cli_judge
        from verifirst.judge.requests import JUDGE_FLAGS, JudgeRequest

        library_levels_again()  # after the heavy imports (dspy resets its logger)

        request = JudgeRequest.build(dict(prompt=prompt, input=input, kind=kind, model=model, workdir=workdir,
                                          threshold=threshold, view=view, tracking_uri=tracking_uri, limit=limit),
                                     names=JUDGE_FLAGS)
        raise typer.Exit(cli_judge(**request.apply_kwargs()))
    except VerifirstError as e:
        fail(e)


def monitor_cmd(prompt: str = typer.Option(..., help="the deployed judge: prompts:/NAME@champion, "
                                                     "prompts:/NAME/VERSION or a prompt file"),
                outcomes: Optional[Path] = typer.Option(None, help="labelled outcome records (.jsonl/.csv), each "
                                                                  "with a time; or use --from-mlflow"),
                from_mlflow: Optional[str] = typer.Option(None, "--from-mlflow", metavar="EXPERIMENT",
                                                          help="read records from this experiment's labelled traces "
                                                               "(a trace's time: its request time)"),
                label: str = typer.Option("label", help="--from-mlflow: the assessment holding the label"),
                windows: str = typer.Option("7d", "--windows", help="a duration (7d, 12h, 2w) or a count of "
                                                                     "equal windows (4)"),
                time_field: str = typer.Option("created_at", "--time-field", help="record field holding its time "
                                               "(ISO 8601, naive = UTC; a date; or epoch seconds)"),
                baseline_pi: Optional[float] = typer.Option(None, "--baseline-pi",
                                                            help="the champion's validation π (default: the prompt "
                                                                 "version's val_pi tag)"),
                max_abstention: float = typer.Option(0.3, "--max-abstention",
                                                     help="teacher abstention rate above which a window drifts"),
                min_n: int = typer.Option(5, "--min-n", help="judged records a window needs to decide drift"),
                kind: Optional[str] = typer.Option(None, help="passfail | rubric (default: the prompt's tag)"),
                view: Optional[str] = typer.Option(None, help="record fields the judge reads (default: the view it "
                                                              "was calibrated with)"),
                pass_at: Optional[float] = typer.Option(None, "--pass-at", help="numeric ratings at or above it "
                                                                                "are PASS"),
                label_map: Optional[str] = typer.Option(None, "--label-map", help="categorical labels: "
                                                        "excellent=PASS,good=PASS,poor=FAIL"),
                model: str = typer.Option("local", help="judge model: 'local' or a LiteLLM model string"),
                teacher: Optional[str] = typer.Option(None, help="informed-teacher model (default: --model)"),
                threads: int = typer.Option(1), workdir: Path = typer.Option(DEMO_DIR),
                run_dir: Optional[Path] = typer.Option(None, help="where report.json/md go (default: "
                                                                  "WORKDIR/runs/monitor-TIME)"),
                tracking_uri: Optional[str] = tracking_uri_option(),
                offline: bool = typer.Option(False, help="log to the local sqlite store even if a server is "
                                                         "configured"),
                no_tracking: bool = typer.Option(False, "--no-tracking", help="log nothing to MLflow"),
                limit: Optional[int] = typer.Option(None, "--limit", help="judge only the N newest records (a "
                                                    "judge and a teacher call each)"),
                recorded: Optional[str] = typer.Option(None, "--recorded", metavar="ASSESSMENT", help="with "
                                                       "--from-mlflow: the deployed judge's verdicts logged under this "
                                                       "assessment, joined to --label assessments or --outcomes; no "
                                                       "judge call"),
                state: Optional[Path] = typer.Option(None, help="--recorded: what earlier runs read (default "
                                                     "WORKDIR/monitor-state/EXPERIMENT.ASSESSMENT.json)"),
                join_key: Optional[str] = typer.Option(None, "--join-key", help="--recorded --outcomes: the field "
                                                       "naming each outcome's trace (default trace_id; else a trace "
                                                       "tag, metadata or root input of that name)"),
                teacher_abstention: bool = typer.Option(False, "--teacher-abstention", help="--recorded: also ask "
                                                        "the informed teacher (one call per new record)"),
                max_wait: Optional[str] = typer.Option(None, "--max-wait", help="--recorded: stop waiting for an "
                                                       "outcome after this long (30d)"),
                dry_run: bool = typer.Option(False, "--dry-run", help="--recorded: what a run would read and the "
                                             "teacher calls it would cost; nothing written"),
                as_json: bool = typer.Option(False, "--json", help="print the report as JSON")):
    """Score the deployed judge on new labelled outcomes per time window; exit 1 on drift.

    Example: verifirst monitor --prompt prompts:/NAME@champion --outcomes new.jsonl --windows 7d
    A window drifts when its π interval lies below the champion's validation π or the informed
    teacher abstains on more than --max-abstention of it. Exit 0 ok, 1 drift (recommends
    "recalibrate" or "give the judge better inputs") or an LM failure (a window the judge or
    teacher model left undecided; the first LM error is shown), 2 bad input, 3 no evidence (no
    window had --min-n judged records: nothing was decided either way).
    """
    try:
        from verifirst.judge.monitoring import cli_monitor
        from verifirst.judge.requests import MONITOR_FLAGS, MonitorRequest

        library_levels_again()  # after the heavy imports (dspy resets its logger)

        request = MonitorRequest.build(dict(
            prompt=prompt, outcomes=outcomes, from_mlflow=from_mlflow, label=label, windows=windows,
            time_field=time_field, baseline_pi=baseline_pi, max_abstention=max_abstention, min_n=min_n, kind=kind,
            view=view, pass_at=pass_at, label_map=label_map, model=model, teacher=teacher, threads=threads,
            workdir=workdir, run_dir=run_dir, tracking_uri=tracking_uri, offline=offline, no_tracking=no_tracking,
            limit=limit, as_json=as_json, recorded=recorded, state=state, join_key=join_key,
            teacher_abstention=teacher_abstention, max_wait=max_wait, dry_run=dry_run),
            names=MONITOR_FLAGS)  # every flag checked before any read
        if request.from_recorded:
            from verifirst.judge.recorded_verdicts import cli_monitor_recorded

            raise typer.Exit(cli_monitor_recorded(request, recorded=request.recorded, state=request.state,
                                                  join_key=request.join_key,
                                                  teacher_abstention=request.teacher_abstention,
                                                  max_wait=request.max_wait, dry_run=request.dry_run))
        raise typer.Exit(cli_monitor(**request.monitor_kwargs()))
    except VerifirstError as e:
        fail(e)


def mount(app: typer.Typer) -> None:
    """Add the judge verbs to the `verifirst` app.

    Args:
        app: the command line's Typer app.
    """
    app.command()(calibrate)
    app.command("judge")(judge_cmd)
    app.command("monitor")(monitor_cmd)
