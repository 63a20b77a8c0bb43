"""The Verifier protocol for domain code and users: item + candidate -> Verdict.

The protocol is the kernel's (`verifirst.core.verdicts`, where its contract is written); this
module re-exports it, so `from verifirst.verifiers.base import Verdict, Verifier, VerifierError`
keeps working.
"""
from __future__ import annotations

from verifirst.core.verdicts import (ERROR, FAIL, INCONCLUSIVE, PASS, UNDECIDED, VERIFIER_ERROR, Verdict,
                                     Verifier, VerifierError)

__all__ = ["PASS", "FAIL", "INCONCLUSIVE", "ERROR", "VERIFIER_ERROR", "UNDECIDED", "Verdict", "VerifierError",
           "Verifier"]
