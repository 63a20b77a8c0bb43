"""The evaluator's error (shared by _hcl_eval and the ceilings of limits.py)."""
from __future__ import annotations


class EvalError(Exception):
    """An expression that cannot be evaluated, with terraform's summary and detail.

    Args:
        summary: terraform's diagnostic summary.
        detail: its detail.
        line: where, when known.
        cls: the error class (iac_taxonomy).
    """

    def __init__(self, summary: str, detail: str = "", line: int = 0, cls: str = "OTHER"):
        self.summary, self.detail, self.line, self.cls = summary, detail, line, cls
        super().__init__(f"{summary}: {detail}" if detail else summary)
