"""The outcomes of an evaluated item and the one reading of a PASS/FAIL label.

Recorded outcomes (outcome files, MLflow feedback), judge answers and label verifiers all read
labels through `normalize_label`, so "merged", "Pass." and True mean the same everywhere.
"""
from __future__ import annotations

from typing import Any

from verifirst.core.task import ERROR, FAIL, INCONCLUSIVE, PASS, VERDICTS

__all__ = ["PASS", "FAIL", "ERROR", "INCONCLUSIVE", "VERDICTS", "LABELS", "PASS_WORDS", "FAIL_WORDS",
           "normalize_label"]

LABELS = VERDICTS  # the two labels an outcome or a judge can give: PASS, FAIL
# Words a workflow records for an accepted / a rejected change (compared upper-cased).
PASS_WORDS = frozenset({"PASS", "PASSED", "TRUE", "YES", "Y", "OK", "1", "LANDED", "MERGED"})
FAIL_WORDS = frozenset({"FAIL", "FAILED", "FALSE", "NO", "N", "0", "ABANDONED", "REJECTED"})
_DECOR = ".'\"`*: \t\n"  # what an LM wraps a one-word answer in: quotes, markdown, a full stop


def normalize_label(value: Any, *, threshold: float | None = None, prefix: bool = False) -> str | None:
    """PASS, FAIL, or None when the value says neither (the caller decides if that is an error).

    Args:
        value: a bool, a number, or text such as "pass", "Merged", " `FAIL`.".
        threshold: numbers (not bools) at or above it read PASS, below it FAIL; None reads a
            number as its text ("1" PASS, "0" FAIL, anything else neither).
        prefix: also read text that starts with PASS or FAIL ("PASS - the code is fine"), as a
            judge LM may answer.
    """
    if isinstance(value, bool):
        return PASS if value else FAIL
    if value is None:
        return None
    if threshold is not None and isinstance(value, (int, float)):
        return PASS if value >= threshold else FAIL
    text = str(value).strip().strip(_DECOR).upper()
    if text in PASS_WORDS:
        return PASS
    if text in FAIL_WORDS:
        return FAIL
    if prefix:
        for label in (PASS, FAIL):
            if text.startswith(label):
                return label
    return None
