"""A verifirst plugin: registers the `demo-contains` verifier by entry point.

An experiment file names it like any built-in verifier:

    [verifier]
    name = "demo-contains"
    options = { gold_field = "command" }
"""
from __future__ import annotations

from typing import Any

from verifirst.verifiers.base import Verdict, VerifierError


class ContainsVerifier:
    """PASS when the candidate contains the item's gold text (case-sensitive, spaces collapsed)."""

    name = "demo-contains"
    stages = ("MISSING", "PASS")  # the order report tables list the stages in

    def __init__(self, gold_field: str = "command"):
        self.gold_field = gold_field

    def verify(self, item: Any, candidate: Any) -> Verdict:
        gold = " ".join(str(item.gold.get(self.gold_field, "")).split())
        got = " ".join(str(candidate or "").split())
        if not gold:  # nothing to look for: no observation decides
            return Verdict.undecided(f"item has no {self.gold_field!r} gold text", backend=self.name)
        if gold in got:
            return Verdict(1.0, True, "PASS", feedback=f"contains `{gold}`", backend=self.name)
        fb = f"The answer should contain `{gold}`; it was `{got}`."
        return Verdict(0.0, False, "MISSING", [VerifierError("MISSING", fb)], feedback=fb, backend=self.name)


def register(registry) -> None:
    """Called once by verifirst with its plugin registrar.

    Args:
        registry: verifirst.core.registry.Registrar; `add(kind, name, target, help)` adds a component.
    """
    registry.add("verifier", "demo-contains", ContainsVerifier,
                 "PASS when the candidate contains the gold text (demo plugin)")
