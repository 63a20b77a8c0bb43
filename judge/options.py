"""The calibration's options read and checked before anything is read or written: the record source,
the outcome file, the split ratios, the judge kind and whole-number options; the report's judge section."""
from __future__ import annotations

from pathlib import Path
from typing import Any



from verifirst.core.errors import InputError
from verifirst.core.task import Suite
from verifirst.judge.outcomes import load_ice_score, load_outcomes


REVIEW_QUEUE_FILE = "review_queue.jsonl"


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


def load_outcome_suite(path: Path, limit: int | None = None, snippets: int | None = None, labels=None,
                       require_label: bool = True) -> Suite:
    """Outcome records (JSONL/CSV), or ICE-Score execution grades, as a suite.

    Args:
        path: the outcomes file.
        limit: keep the first `limit` records (problems for ICE-Score).
        snippets: ICE-Score snippets per problem.
        labels: a verifirst.judge.labels.LabelRule (--pass-at, --label-map), or None for PASS/FAIL words.
        require_label: every record has one `label` (False: several labellers' `labels`, --labels).
    """
    path = Path(path)
    if not path.exists():
        raise InputError("outcomes file not found", path=str(path), expected="a .jsonl or .csv file")
    if is_ice_score(path):  # ICE-Score HumanEval grades (an execution oracle)
        if not require_label:
            raise InputError("--labels needs records labelled by several people; an ICE-Score grades file holds "
                             "one execution grade per snippet", path=str(path), field="--labels",
                             expected="--outcomes records with labels: {labeller: label}, or --from-mlflow "
                                      "traces with several human assessments; or no --labels")
        return load_ice_score(path, problems=limit, snippets=snippets)
    if not require_label:
        suite = load_outcomes(path, require_label=False)
    else:
        suite = load_outcomes(path, labels=labels) if labels is not None else load_outcomes(path)
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


def held_out_pi(report: dict) -> float | None:
    j = judge_section(report).get("test", {}).get("judges", {}).get("calibrated")
    return None if j is None else float(j["pi"])


def lm_spec(lm, given: str | None) -> str | None:
    return getattr(lm, "spec", None) or getattr(lm, "model", None) or given


def val_pi_of(rep: dict) -> float:
    pi = (judge_section(rep).get("validation") or {}).get("pi")
    return float("nan") if pi is None else float(pi)


JUDGE_KINDS = ("passfail", "rubric")


CALIBRATION_ROLES = ("judge", "task", "teacher", "reflection")
