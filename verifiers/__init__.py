"""Verifiers: item + candidate -> Verdict (score, stage, error classes, feedback)."""
from .base import PASS, Verdict, Verifier, VerifierError

__all__ = ["PASS", "Verdict", "Verifier", "VerifierError"]
