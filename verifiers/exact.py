"""Exact match after whitespace normalisation: the cheapest verifier, and a baseline."""
from __future__ import annotations

from typing import Any

from verifirst.core.task import Item

from .base import Verdict, VerifierError


class ExactMatch:
    name = "exact"

    def __init__(self, gold_field: str = "command"):
        self.gold_field = gold_field

    def verify(self, item: Item, candidate: Any) -> Verdict:
        gold = " ".join(str(item.gold.get(self.gold_field, "")).split())
        got = " ".join(str(candidate or "").split())
        if got == gold:
            return Verdict(1.0, True, "PASS", backend=self.name, feedback="matches the reference exactly")
        fb = f"Expected exactly `{gold}` but got `{got}`."
        return Verdict(0.0, False, "MISMATCH", [VerifierError("MISMATCH", fb)], feedback=fb, backend=self.name)
