"""`verifirst judge`: a (registered) judge prompt applied to records, one verdict row per record."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import dspy


from verifirst.core.errors import RunFailed
from verifirst.lm import FastJSONAdapter, configure_cache, make_lm
from verifirst.judge.options import check_calibrate_options
from verifirst.judge.prompts import judge_kind, judge_threshold, load_prompt_text, make_judge_program
from verifirst.judge.autorefine import run_judge, verdicts_at
from verifirst.judge.outcomes import load_outcomes


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
    text, tags = load_prompt_text(prompt, workdir, tracking_uri)
    judge = judge_kind(judge, tags, prompt)
    th = judge_threshold(judge, threshold, tags)  # before any record is read or judged
    suite = load_outcomes(input_path, require_label=False)
    suite.items = suite.items[:limit] if limit is not None else suite.items
    j = make_judge_program(judge, suite, text, view or tags.get("view") or None)
    lm = make_lm(model, role="judge")
    configure_cache(Path(workdir) / "cache")
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        run = run_judge(j, suite.items, lm, fail_fast=True)
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
