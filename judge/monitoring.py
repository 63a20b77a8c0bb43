"""Keep a judge current: score the deployed judge on new labelled outcomes, window by window.

`vf.monitor` (and `verifirst monitor`) runs the judge prompt (a file, prompts:/NAME/VERSION or
prompts:/NAME@ALIAS) on outcome records cut into time windows (verifirst.loop.timesplit) and
reports per window: n, Scott's π with a 95% bootstrap interval, FAIL recall/precision, the share
of records the judge could not judge (LM errors, counted apart: never PASS, never FAIL), and the
abstention rate of the informed teacher AutoRefine uses, run on the window's records with their
labels (SKIP: the outcome cannot be explained from what the judge sees).

The drift rule (`DriftRule`), per window (each part needs at least `min_n` records: judged ones for
π, ones the teacher reviewed for abstention; a window with fewer decides nothing):

- **π drift**: the upper bound of the window's π interval lies below the baseline π, the
  champion's validation π (the `val_pi` tag calibration registers on the prompt version, or
  `baseline_pi` / `--baseline-pi`);
- **abstention drift**: the teacher abstains on more than `max_abstention` (default 0.3) of the
  window's records it reviewed.

Any drifting window makes the run drift: exit code 1 (0 when none drifts; 2 for bad input). When
no window had enough records to decide either part (every window empty or under `min_n`), the
run has no evidence either way: exit code 3, verdict NO EVIDENCE, never "ok" (a cron gate must not
pass on nothing). The
action it recommends: "give the judge better inputs" when abstention rose (the outcomes depend on
something the judge cannot see; a better prompt cannot help), else "recalibrate" when π dropped
with abstention normal.

A window the judge or the teacher could not decide because their model failed (LM errors on more
than half its records, or on enough of them to leave fewer than `min_n` answered) is no result:
the run is an LM failure, exit code 1 as a calibration whose model failed (never "ok"), with the
first LM error in the report and the MLflow run marked FAILED. A window with fewer than `min_n`
records decides nothing, as before.
"""
from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import dspy

from verifirst.api import DEFAULT_WORKDIR, MLflow
from verifirst.core import atomic
from verifirst.core.errors import InputError, RunFailed
from verifirst.core.stats import FAIL, PASS, judge_metrics
from verifirst.lm import FastJSONAdapter, configure_cache, make_lm
from verifirst.report.monitor_view import html_page, markdown, print_monitor, verdict  # noqa: F401  (vf.monitor's names)

RECALIBRATE = "recalibrate"
BETTER_INPUTS = "give the judge better inputs"
DEFAULT_MAX_ABSTENTION = 0.3
DEFAULT_MIN_N = 5
EXIT_OK, EXIT_DRIFT, EXIT_NO_EVIDENCE = 0, 1, 3
EXIT_LM_FAILURE = RunFailed.exit_code  # as a calibration whose model gave no usable answers
# A window is no result when more than this share of its records are LM errors (calibration's limit).
MAX_LM_ERROR_RATE = 0.5
BASELINE_TAG = "val_pi"  # the prompt version's tag holding the champion's validation π (calibration sets it)


@dataclass(frozen=True)
class DriftRule:
    """When a window drifts (see the module docstring).

    Args:
        baseline_pi: the champion's validation π (None: the prompt version's `val_pi` tag).
        max_abstention: a teacher abstention rate above it is drift (the judge needs better inputs).
        min_n: windows with fewer judged records decide nothing (too few to tell).
    """

    baseline_pi: float | None = None
    max_abstention: float = DEFAULT_MAX_ABSTENTION
    min_n: int = DEFAULT_MIN_N

    @classmethod
    def of(cls, spec: Any, prefix: str = "") -> "DriftRule":
        """A checked rule from a DriftRule, a dict of its fields, or None (defaults)."""
        if spec is None:
            return cls()
        if isinstance(spec, DriftRule):
            rule = spec
        elif isinstance(spec, dict):
            unknown = sorted(set(spec) - {"baseline_pi", "max_abstention", "min_n"})
            if unknown:
                raise InputError(f"unknown drift setting {unknown[0]!r}", field=f"{prefix}drift",
                                 expected="baseline_pi, max_abstention, min_n")
            rule = cls(**{k: v for k, v in spec.items() if v is not None})
        else:
            raise InputError(f"a {type(spec).__name__} is not a drift rule", field=f"{prefix}drift",
                             expected="vf.DriftRule(...) or a dict of baseline_pi, max_abstention, min_n")
        return rule._checked(prefix)

    def _checked(self, prefix: str) -> "DriftRule":
        from verifirst.config import check_number

        dash = prefix == "--"
        if self.baseline_pi is not None:
            check_number(self.baseline_pi, -1.0, 1.0, "--baseline-pi" if dash else "baseline_pi")
        check_number(self.max_abstention, 0.0, 1.0, "--max-abstention" if dash else "max_abstention")
        check_number(self.min_n, 1, None, "--min-n" if dash else "min_n", integer=True)
        return self

    def describe(self, baseline: float | None) -> str:
        """The rule in words, with the baseline it compares against."""
        base = "n/a" if baseline is None else f"{baseline:.3f}"
        return (f"a window with at least {self.min_n} judged records drifts when its π 95% interval lies "
                f"below the baseline π {base}, or when the informed teacher abstains on more than "
                f"{self.max_abstention:.0%} of it")


@dataclass
class MonitorResult:
    """What `vf.monitor` returns: the report, its run directory and the verdict for a scheduler."""

    report: dict
    run_dir: Path
    drift: bool
    exit_code: int  # 0 ok, 1 drift or LM failure, 3 no evidence (bad input raises InputError: exit 2)
    recommendation: str | None
    windows: list = field(default_factory=list)
    lm_failure: dict | None = None  # {"windows", "first_error", ...} when a model left windows undecided


def _models(models: Any) -> tuple[Any, Any]:
    """(judge LM, teacher LM): model strings, dicts or dspy.LM objects; the teacher defaults to the judge."""
    given = {k: v for k, v in dict(models or {}).items() if v is not None}
    unknown = sorted(set(given) - {"judge", "teacher"})
    if unknown:
        raise InputError(f"unknown role {unknown[0]!r}", field="models", expected="roles judge, teacher")
    judge = given.get("judge")
    if judge is None:
        judge = dspy.settings.lm
    if judge is None:
        raise InputError("no judge LM: pass models={'judge': ...} or dspy.configure(lm=...)", field="models.judge")
    teacher = given.get("teacher", judge)

    def build(spec, role):
        return make_lm(spec, role=role) if isinstance(spec, (str, list)) else spec

    return build(judge, "judge"), build(teacher, "teacher")


def _load_records(outcomes, from_mlflow, label, rule, workdir: Path, tracking_uri: str | None, time_field: str):
    """(suite, source, record lines) from the outcomes file or an MLflow experiment's labelled traces.
    A trace's time is its request time (meta `request_time`) unless it carries `time_field`."""
    from verifirst.judge.options import load_outcome_suite
    from verifirst.judge.prompts import check_store_has

    if from_mlflow:
        from verifirst.tracking import Tracker
        from verifirst.judge.traces import load_trace_suite

        uri = tracking_uri or Tracker(workdir, enabled=False).uri
        check_store_has(uri, f"MLflow experiment {from_mlflow!r}", "--from-mlflow", "an experiment with labelled traces")
        suite, _ = load_trace_suite(from_mlflow, uri, label=label, rule=rule)
        _trace_times(suite, uri, time_field)
        return suite, f"mlflow:{from_mlflow}", {}
    if outcomes is None:
        raise InputError("no records to monitor", field="--outcomes",
                         expected="--outcomes FILE or --from-mlflow EXPERIMENT")
    path = Path(outcomes)
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".json", ".csv") and path.exists():
        raise InputError(f"unknown outcomes format {path.suffix!r}", path=str(path), expected="a .jsonl or .csv file")
    suite = load_outcome_suite(path, labels=rule if rule.given else None)
    return suite, str(path), suite.meta.get("lines") or {}


def _trace_times(suite, uri: str, time_field: str) -> None:
    """Each trace item's request time into its meta (as `time_field` when the trace lacks one)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    for it in suite.items:
        if it.meta.get(time_field) not in (None, "") or not it.meta.get("trace_id"):
            continue
        try:
            info = client.get_trace_info(it.meta["trace_id"]) if hasattr(client, "get_trace_info") \
                else client.get_trace(it.meta["trace_id"]).info
        except Exception:  # the item then has no time and is refused by name
            continue
        ms = getattr(info, "request_time", None) or getattr(info, "timestamp_ms", None)
        if ms:
            it.meta[time_field] = float(ms) / 1000.0


def _judge_lm_errors(run: dict) -> dict[str, str]:
    """Record id -> the judge's LM error, for each record the judge gave no verdict on."""
    return {i: r["error"] for i, r in run.items() if r.get("verdict") is None and r.get("error")}


def _undecided_by_errors(n: int, errors: int, answered: int, min_n: int) -> bool:
    """Whether LM errors, not the window's size, keep a role from deciding a window of n records."""
    return errors / n > MAX_LM_ERROR_RATE or answered < min_n <= n


def _window_lm_failure(ids: list, judged: int, judge_errors: dict, teacher: dict, reviewed: int,
                       rule: DriftRule) -> dict | None:
    """Per role (judge, teacher) whose model failed on this window: its error count and first error;
    None when both answered enough to decide (a few errors are counted apart, not a failure)."""
    errors = {"judge": [judge_errors[i] for i in ids if i in judge_errors],
              "teacher": [teacher[i].get("error") or "no decision" for i in ids
                          if i in teacher and teacher[i]["decision"] == "ERROR"]}
    answered = {"judge": judged, "teacher": reviewed}
    failed = {role: {"errors": len(errs), "first_error": str(errs[0])} for role, errs in errors.items()
              if errs and _undecided_by_errors(len(ids), len(errs), answered[role], rule.min_n)}
    return failed or None


def _lm_failure_status(failure: dict, n: int) -> str:
    """A window's status when a model failed on it, e.g. "LM errors: judge 20 of 20"."""
    return "LM errors: " + ", ".join(f"{role} {f['errors']} of {n}" for role, f in failure.items())


def _window_row(index: int, w, labels: dict, verdicts: dict, teacher: dict, rule: DriftRule,
                baseline: float | None, n_boot: int, judge_errors: dict | None = None) -> dict:
    ids = [it.id for it in w.items]
    judged = [i for i in ids if verdicts.get(i) in (PASS, FAIL)]
    errors = len(ids) - len(judged)
    row: dict[str, Any] = {"index": index, "window": w.label, "start": w.start.isoformat().replace("+00:00", "Z"),
                           "end": w.end.isoformat().replace("+00:00", "Z"), "n": len(ids), "judged": len(judged),
                           "judge_errors": errors, "unjudged_rate": errors / len(ids) if ids else None,
                           "label_counts": {l: sum(labels[i] == l for i in ids) for l in (PASS, FAIL)},
                           "pi": None, "pi_ci95": None, "accuracy": None, "fail_recall": None,
                           "fail_precision": None, "pass_recall": None}
    if judged:
        m = judge_metrics([labels[i] for i in judged], [verdicts[i] for i in judged], n_boot=n_boot)
        row.update({k: m[k] for k in ("pi", "accuracy", "fail_recall", "fail_precision", "pass_recall")})
        row["pi_ci95"] = m.get("pi_ci95")
    decided = [teacher[i] for i in ids if i in teacher and teacher[i]["decision"] != "ERROR"]
    counts = {d: sum(t["decision"] == d for t in (teacher.get(i) for i in ids) if t) for d in
              ("KEEP", "CORRECT", "SKIP", "ERROR")}
    row["teacher"] = {"reviewed": len(decided), **{k.lower(): v for k, v in counts.items()},
                      "abstention_rate": counts["SKIP"] / len(decided) if decided else None}
    enough = len(judged) >= rule.min_n
    pi_drift = bool(enough and baseline is not None and row["pi_ci95"] is not None and row["pi_ci95"][1] < baseline)
    ab = row["teacher"]["abstention_rate"]
    abstain_drift = bool(len(decided) >= rule.min_n and ab is not None and ab > rule.max_abstention)
    row["drift"] = {"pi": pi_drift, "abstention": abstain_drift}
    row["decided"] = enough or len(decided) >= rule.min_n  # enough records for either part of the rule
    row["recommendation"] = BETTER_INPUTS if abstain_drift else RECALIBRATE if pi_drift else None
    row["lm_failure"] = _window_lm_failure(ids, len(judged), judge_errors or {}, teacher, len(decided), rule) \
        if ids else None
    if not ids:
        row["status"] = "no records"
    elif row["lm_failure"] and not (pi_drift or abstain_drift):
        row["status"] = _lm_failure_status(row["lm_failure"], len(ids))
    elif not enough and not abstain_drift:
        row["status"] = f"too few judged records (< {rule.min_n})"
    else:
        why = [f"π interval [{row['pi_ci95'][0]:+.3f}, {row['pi_ci95'][1]:+.3f}] below baseline {baseline:.3f}"
               if pi_drift else "", f"teacher abstains on {ab:.0%} (> {rule.max_abstention:.0%})" if abstain_drift else ""]
        why = [w for w in why if w]
        if row["lm_failure"]:  # a drift seen on what was answered, beside the failure
            why.append(_lm_failure_status(row["lm_failure"], len(ids)))
        row["status"] = ("drift: " + "; ".join(why)) if why else "ok"
    return row


def _run_lm_failure(rows: list[dict]) -> dict | None:
    """The run's LM failure from its windows': which windows, how many errors, the first error."""
    failed = [r for r in rows if r.get("lm_failure")]
    if not failed:
        return None
    roles = [role for role in ("judge", "teacher") if any(role in r["lm_failure"] for r in failed)]
    first_role = roles[0]
    first = next(r["lm_failure"][first_role]["first_error"] for r in failed if first_role in r["lm_failure"])
    return {"windows": [r["index"] for r in failed], "roles": roles,
            "errors": {role: sum(r["lm_failure"].get(role, {}).get("errors", 0) for r in failed) for role in roles},
            "first_error": f"{first_role}: {first}"}


def _failure_reason(failure: dict) -> str:
    """Why an LM failure is no result, naming the windows and the first LM error."""
    models = " and ".join(f"the {role} model" for role in failure["roles"])
    windows = ", ".join(str(i) for i in failure["windows"])
    return (f"{models} gave no usable answer on window(s) {windows}: no verdict there (LM errors are never "
            f"PASS or FAIL); fix the endpoint and run again. First LM error: {failure['first_error']}")


def _time_outliers(wins: list, times: dict) -> dict | None:
    """When most windows are empty, the records whose times lie far from the rest (the oldest and the
    newest, one window's width from any other record): a record at epoch 0 among this year's cuts
    hundreds of empty windows, said here instead of silently."""
    empty = sum(not w.items for w in wins)
    if len(wins) < 3 or empty * 2 <= len(wins):
        return None
    order = sorted(times, key=times.get)
    width = wins[0].end - wins[0].start
    far = [i for i, j in ((order[0], order[1]), (order[-1], order[-2])) if abs(times[i] - times[j]) > width]
    far = list(dict.fromkeys(far))
    text = (f"{empty} of {len(wins)} windows are empty" + (
        f"; record(s) {', '.join(map(repr, far))} lie far from the others "
        f"({', '.join(times[i].isoformat().replace('+00:00', 'Z') for i in far)})" if far else ""))
    return {"empty_windows": empty, "windows": len(wins), "records": far, "text": text}


def _baseline(rule: DriftRule, tags: dict, source: str) -> tuple[float, str]:
    if rule.baseline_pi is not None:
        return float(rule.baseline_pi), "given (--baseline-pi)"
    raw = tags.get(BASELINE_TAG)
    try:
        value = float(raw) if raw not in (None, "") else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if math.isnan(value):
        raise InputError(f"no baseline π for {source}: the prompt version has no {BASELINE_TAG!r} tag (calibration "
                         f"registers one)", field="--baseline-pi",
                         expected="--baseline-pi X (baseline_pi=X): the champion's validation π")
    return value, f"the prompt version's {BASELINE_TAG!r} tag"


def verdict_fields(rows: list[dict], rule: DriftRule, lm_failure: dict | None, outliers: dict | None) -> dict:
    """The run's verdict from its window rows: drift, recommendation, reason, exit code, no evidence.

    Args:
        rows: _window_row's rows.
        rule: the drift rule.
        lm_failure: _run_lm_failure(rows).
        outliers: _time_outliers' note, or None.
    """
    drifting = [r for r in rows if r["drift"]["pi"] or r["drift"]["abstention"]]
    recommendation = None
    if any(r["drift"]["abstention"] for r in drifting):
        recommendation = BETTER_INPUTS
    elif drifting:
        recommendation = RECALIBRATE
    no_evidence = not drifting and not lm_failure and not any(r["decided"] for r in rows)
    exit_code = EXIT_DRIFT if drifting else EXIT_LM_FAILURE if lm_failure else \
        EXIT_NO_EVIDENCE if no_evidence else EXIT_OK
    undecided = sum(not r["decided"] for r in rows)
    if no_evidence:
        reason = (f"no evidence: none of the {len(rows)} window(s) had {rule.min_n} judged records (--min-n), so "
                  f"none could show drift or its absence; use longer windows or fewer of them, or more records")
    elif not drifting:
        reason = "no window drifted" + (f" ({undecided} of {len(rows)} window(s) had too few records to decide)"
                                        if undecided else "")
    elif recommendation == BETTER_INPUTS:
        reason = ("the informed teacher abstained on too many outcomes: they depend on something the judge "
                  "cannot see; a better prompt will not fix that, give the judge better inputs (view fields)")
    else:
        reason = ("π dropped below the champion's validation π while the teacher's abstention stayed normal: "
                  "the outcomes are still explained by what the judge sees; recalibrate on the recent outcomes "
                  "(verifirst calibrate --split-by time)")
    if lm_failure:
        reason = _failure_reason(lm_failure) if not drifting else f"{reason}. Also: {_failure_reason(lm_failure)}"
    if outliers:
        reason = f"{reason}. Note: {outliers['text']}"
    return {"drift": bool(drifting), "drifting_windows": [r["index"] for r in drifting],
            "first_drift_window": drifting[0]["index"] if drifting else None,
            "recommendation": recommendation, "reason": reason, "exit_code": exit_code,
            "no_evidence": no_evidence, "undecided_windows": undecided}


def monitor(prompt: str, outcomes: str | Path | None = None, *, from_mlflow: str | None = None,
            label: str = "label", models: Any = None, windows: str | int = "7d", time_field: str = "created_at",
            view: str | None = None, pass_at: float | None = None, label_map: Any = None,
            workdir: str | Path | None = None, tracking: MLflow | None = None, drift: Any = None,
            baseline_pi: float | None = None, kind: str | None = None, threshold: float | None = None,
            threads: int = 1, n_boot: int = 2000, run_dir: str | Path | None = None, limit: int | None = None,
            echo: Callable[[str], None] | None = None,
            progress: Callable[[str], None] | None = None) -> MonitorResult:
    """Score the deployed judge on labelled outcomes per time window and say whether it drifted.

    Per window: n, Scott's π with a 95% bootstrap interval, FAIL recall/precision, the share the
    judge could not judge (LM errors, counted apart), and the informed teacher's abstention rate
    on the window's records. A window drifts when its π interval lies below the baseline π or
    the teacher abstains on more than `max_abstention` of it (see `DriftRule`); any drifting
    window makes the result drift (exit code 1). The recommendation: "give the judge better
    inputs" when abstention rose, else "recalibrate" when π dropped. A window the judge or teacher
    model left undecided with LM errors makes the result an LM failure (exit code 1, never ok;
    `lm_failure` names the windows and the first error; the MLflow run ends FAILED).

    Args:
        prompt: the deployed judge prompt: a file, prompts:/NAME/VERSION or prompts:/NAME@ALIAS
            (its tags give the judge kind, view, threshold and the baseline `val_pi`).
        outcomes: a JSONL/CSV file of labelled outcome records, each with a time in `time_field`.
        from_mlflow: read the records from this MLflow experiment's labelled traces instead
            (a trace's time: its request time).
        label: the assessment name holding a trace's label (with from_mlflow).
        models: {"judge": ..., "teacher": ...} model strings or dspy.LM objects; the teacher
            defaults to the judge; None uses the LM configured in DSPy.
        windows: a duration ("7d", "12h", "2w") or a count of equal windows.
        time_field: the record field holding its time (ISO 8601, a date or epoch seconds).
        view: which record fields the judge reads (default: the prompt version's `view` tag).
        pass_at: numeric ratings at or above it are PASS.
        label_map: categorical labels to PASS/FAIL ("excellent=PASS,poor=FAIL" or a dict).
        workdir: cache, runs and the local MLflow store (default .verifirst).
        tracking: vf.MLflow(...) logs the windows' metrics as a time series (step = window index)
            and the verdict as tags; None tracks nothing.
        drift: a DriftRule or a dict of baseline_pi, max_abstention, min_n.
        baseline_pi: the champion's validation π (overrides the rule's and the prompt's tag).
        kind: the judge kind, passfail or rubric (default: the prompt's `judge` tag, else passfail;
            one that conflicts with the tag is refused).
        threshold: a rubric judge's threshold (default: the prompt's `threshold` tag).
        threads: judge and teacher threads.
        n_boot: bootstrap resamples for π's interval.
        run_dir: where report.json/md go (default: a new WORKDIR/runs/monitor-TIME).
        limit: judge only the newest `limit` records (each record costs a judge and a teacher call;
            the report's `limit` says how many were left out). None: all.
        echo: a callable for progress lines (default: none).
        progress: where the judge's and teacher's per-tenth lines go when stdout is not a terminal
            (default: echo; `-q` silences them).

    Returns:
        A MonitorResult: report (windows, drift rule, verdict), run_dir, drift, exit_code,
        recommendation, lm_failure.
    """
    from verifirst.judge.autorefine import run_judge, verdicts_at
    from verifirst.judge.options import check_record_source
    from verifirst.judge.prompts import judge_kind, judge_threshold, make_judge_program, resolve_start_prompt
    from verifirst.config import RUN_DIR_EXPECTED, check_number, check_workdir
    from verifirst.judge.template import template_variables
    from verifirst.judge.labels import LabelRule
    from verifirst.judge.passes import Passes
    from verifirst.judge.teacher import review_items
    from verifirst.loop.timesplit import item_times, parse_windows, time_windows

    echo = echo or (lambda line: None)
    workdir = Path(workdir or DEFAULT_WORKDIR)
    check_workdir(workdir, "workdir")  # as calibrate: before the store, the cache or a report is written
    if run_dir is not None:
        check_workdir(run_dir, "run_dir", expected=RUN_DIR_EXPECTED)
    check_record_source(outcomes, from_mlflow)
    rule = DriftRule.of(drift)
    if baseline_pi is not None:
        rule = DriftRule(baseline_pi, rule.max_abstention, rule.min_n)._checked("")
    parse_windows(windows)
    check_number(threads, 1, None, "threads", integer=True)
    if limit is not None:
        check_number(limit, 1, None, "limit", integer=True)
    labels_rule = LabelRule.of(pass_at, label_map)
    spec = str(prompt)
    if not spec.strip().startswith("prompts:/") and not Path(spec).exists():
        raise InputError("prompt file not found", path=spec, field="--prompt",
                         expected="a prompt file, prompts:/NAME/VERSION or prompts:/NAME@ALIAS")
    uri = tracking.uri if tracking is not None else None
    start = resolve_start_prompt(spec, workdir, uri)
    tags = dict(start.tags or {})
    kind = judge_kind(kind, tags, spec)
    threshold = judge_threshold(kind, threshold, tags, "threshold")
    baseline, baseline_source = _baseline(rule, tags, spec)
    suite, source, lines = _load_records(outcomes, from_mlflow, label, labels_rule, workdir, uri, time_field)
    times = item_times(suite.items, time_field, lambda it: it.id, source=source if not from_mlflow else None,
                       lines=lines)
    limited = None
    if limit is not None and len(suite.items) > limit:  # the newest: drift is about recent records
        keep = {it.id for it in sorted(suite.items, key=lambda it: (times[it.id], it.id))[-limit:]}
        limited = {"limit": limit, "records": len(suite.items), "left_out": len(suite.items) - limit}
        suite.items = [it for it in suite.items if it.id in keep]
    view = view or tags.get("view") or None
    if view is None and not template_variables(start.text) and suite.meta.get("default_view"):
        view = ",".join(suite.meta["default_view"])  # traces: each field once, as calibration reads them
    program = make_judge_program(kind, suite, start.text, view)
    wins = time_windows(suite.items, time_field, windows, key=lambda it: it.id, source=source)
    outliers = _time_outliers(wins, {it.id: times[it.id] for it in suite.items})
    if outliers:
        echo(f"note: {outliers['text']}")
    judge_lm, teacher_lm = _models(models)

    configure_cache(workdir / "cache")
    echo(f"{source}: {len(suite.items)} records in {len(wins)} window(s) of {windows} on {time_field}; "
         f"judge {spec}" + (f"; the {limit} newest of {limited['records']} (--limit)" if limited else ""))
    passes = Passes(progress or echo, len(suite.items))  # a line per tenth of the records when stdout is no terminal
    with dspy.context(lm=judge_lm, adapter=FastJSONAdapter()), passes.judge() as on_item:
        run = run_judge(program, suite.items, judge_lm, threads, fail_fast=True, on_item=on_item)
    verdicts = verdicts_at(run, threshold)
    with dspy.context(lm=teacher_lm, adapter=FastJSONAdapter()), passes.teacher() as on_item:
        teacher = review_items(list(program.view_fields), suite.items, teacher_lm, threads, fail_fast=True,
                               on_item=on_item)
    labels = {it.id: it.gold["label"] for it in suite.items}
    judge_errors = _judge_lm_errors(run)
    rows = [_window_row(k, w, labels, verdicts, teacher, rule, baseline, n_boot, judge_errors)
            for k, w in enumerate(wins)]
    lm_failure = _run_lm_failure(rows)

    v = verdict_fields(rows, rule, lm_failure, outliers)
    report: dict[str, Any] = {
        "kind": "monitor", "name": "monitor",
        "prompt": {"source": spec, "name": start.name, "version": start.version, "alias": start.alias,
                   "judge": kind, "threshold": threshold, "view": view},
        "source": source, "n_records": len(suite.items), "time_field": time_field, "windows_spec": str(windows),
        "labels": {"rule": labels_rule.describe()},
        "drift_rule": {**asdict(rule), "baseline_pi": baseline, "baseline_source": baseline_source,
                       "text": rule.describe(baseline)},
        "windows": rows, "drift": v["drift"], "drifting_windows": v["drifting_windows"],
        "first_drift_window": v["first_drift_window"],
        "recommendation": v["recommendation"], "reason": v["reason"], "exit_code": v["exit_code"],
        "judge_errors": sum(r["judge_errors"] for r in rows), "lm_failure": lm_failure,
        "no_evidence": v["no_evidence"], "undecided_windows": v["undecided_windows"], "limit": limited,
        "time_outliers": outliers,
    }
    out_dir = save(report, workdir, tracking, run_dir)
    return MonitorResult(report, out_dir, v["drift"], v["exit_code"], v["recommendation"], rows, lm_failure)


def save(report: dict, workdir: Path, tracking: MLflow | None, run_dir: Path | str | None) -> Path:
    """Write a monitor report into its run directory (a new one under `workdir` unless given) and
    log it to MLflow where tracking is on; returns the directory.

    Args:
        report: the monitor's report; gets its "run_dir" (and "run_id" when tracked).
        workdir: the store's folder.
        tracking: MLflow, or None.
        run_dir: the run directory, or None for a new one.
    """
    from verifirst.loop.rundir import new_run_dir

    out_dir = Path(run_dir) if run_dir else new_run_dir(workdir, "monitor")
    report["run_dir"] = str(out_dir)
    if tracking is not None:
        _track(report, workdir, tracking, out_dir)
    _write(report, out_dir)
    if tracking is not None and report.get("run_id"):
        _log_files(report, workdir, tracking, out_dir)
    return out_dir


def _tracker(workdir: Path, tracking: MLflow):
    from verifirst.tracking import Tracker

    return Tracker(workdir, uri=tracking.uri, experiment=tracking.experiment or "verifirst-monitor",
                   offline=tracking.offline, autolog=False)


def _track(report: dict, workdir: Path, tracking: MLflow, run_dir: Path) -> None:
    """The windows' metrics as a time series (step = window index), the verdict as tags."""
    tr = _tracker(workdir, tracking)
    p = report["prompt"]
    rid = tr.start(f"monitor-{p['name']}", params={"prompt": p["source"], "time_field": report["time_field"],
                                                   "windows": report["windows_spec"], "source": report["source"],
                                                   "baseline_pi": report["drift_rule"]["baseline_pi"],
                                                   "max_abstention": report["drift_rule"]["max_abstention"],
                                                   "min_n": report["drift_rule"]["min_n"]},
                   tags={"verifirst.kind": "monitor"})
    try:
        for r in report["windows"]:
            ci = r["pi_ci95"] or [None, None]
            tr.log_metrics({k: v for k, v in {
                "n": r["n"], "judged": r["judged"], "pi": r["pi"], "pi_ci95_lo": ci[0], "pi_ci95_hi": ci[1],
                "fail_recall": r["fail_recall"], "fail_precision": r["fail_precision"],
                "unjudged_rate": r["unjudged_rate"], "abstention_rate": r["teacher"]["abstention_rate"],
                "drift": float(r["drift"]["pi"] or r["drift"]["abstention"])}.items() if v is not None},
                step=r["index"])
        tr.set_tags({"drift": str(report["drift"]).lower(), "recommendation": report["recommendation"] or "none",
                     "lm_failure": str(bool(report["lm_failure"])).lower(),
                     "no_evidence": str(bool(report.get("no_evidence"))).lower(),
                     "prompt": p["source"], "prompt_version": str(p["version"] or ""),
                     "first_drift_window": str(report["first_drift_window"] if report["drift"] else ""),
                     "run_dir": str(run_dir)})
        report["run_id"], report["tracking_uri"] = rid, tr.uri
    finally:
        tr.finish("FAILED" if report["lm_failure"] else "FINISHED")  # a failed model is no finished result


def _log_files(report: dict, workdir: Path, tracking: MLflow, run_dir: Path) -> None:
    tr = _tracker(workdir, tracking)
    for f in ("report.json", "report.md", "report.html", "plots/monitor.png"):
        if (run_dir / f).exists():
            tr.log_artifact(run_dir / f, "report", run_id=report["run_id"])


def _write(report: dict, run_dir: Path) -> None:
    from verifirst.report import report_json

    run_dir.mkdir(parents=True, exist_ok=True)
    atomic.write_text(run_dir / "report.json", report_json(report) + "\n")
    atomic.write_text(run_dir / "report.md", markdown(report))
    atomic.write_text(run_dir / "report.html", html_page(report, run_dir))


def cli_monitor(as_json: bool = False, **kw) -> int:
    """`verifirst monitor`: the table (or the JSON report); the exit code (0 ok, 1 drift or LM failure,
    3 no evidence).
    An LM failure's first error also goes to stderr, as `error: ...`, with --json too."""
    res = monitor(**kw, progress=None if as_json else print)  # lines only where stdout is no terminal
    if as_json:
        from verifirst.report import report_json

        print(report_json(res.report))
    else:
        print_monitor(res.report)
    if res.lm_failure:
        from verifirst.core.redaction import redact_text

        print(f"error: {redact_text(_failure_reason(res.lm_failure))}", file=sys.stderr)
    elif res.report.get("no_evidence"):  # with --json too: stdout may go to a file, the reason must not
        print(f"error: {res.report['reason']}", file=sys.stderr)
    return res.exit_code
