"""Outcome labels as a verifier: a judge's verdict against the recorded PASS/FAIL outcome."""
from __future__ import annotations

from typing import Any

from verifirst.core.task import Item
from verifirst.core.verdicts import LABELS, normalize_label  # noqa: F401 - LABELS re-exported

from verifirst.core.verdicts import Verdict, VerifierError


class LabelVerifier:
    """score 1 when the candidate verdict equals item.gold[label_field]."""

    name = "label"

    def __init__(self, label_field: str = "label"):
        self.label_field = label_field

    def verify(self, item: Item, candidate: Any) -> Verdict:
        gold = normalize_label(item.gold.get(self.label_field))
        got = normalize_label(candidate)
        if got is None:
            return Verdict(0.0, False, "UNPARSED", [VerifierError("UNPARSED", f"verdict {candidate!r} is not PASS/FAIL")],
                           feedback=f"The verdict {candidate!r} is neither PASS nor FAIL.", backend=self.name,
                           details={"expected": gold, "got": None})
        ok = got == gold
        fb = (f"Correct: the outcome was {gold}." if ok else
              f"Wrong: the judge said {got} but the recorded outcome was {gold}.")
        return Verdict(1.0 if ok else 0.0, ok, "PASS" if ok else "MISMATCH",
                       [] if ok else [VerifierError("MISMATCH", fb)], feedback=fb, backend=self.name,
                       details={"expected": gold, "got": got})
