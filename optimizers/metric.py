"""Any Verifier as DSPy metrics: the kernel's one metric path (`verifirst.core.metric`) under the
name this package has always exported."""
from __future__ import annotations

from typing import Any

from verifirst.core.metric import VERIFIER_ERROR, Metric, OptimizerMetric
from verifirst.core.task import Item

__all__ = ["VERIFIER_ERROR", "VerifierMetric"]


class VerifierMetric(OptimizerMetric):
    """metric(gold, pred, trace=None, pred_name=None, pred_trace=None) over a verifier."""

    def __init__(self, verifier: Any, output_field: str, items: list[Item] | dict[str, Item],
                 manifest: Any = None):
        """Args:
            verifier: anything with verify(item, candidate) -> Verdict.
            output_field: the prediction field handed to the verifier.
            items: the train + val items the engine may score (by id).
            manifest: the run's SplitManifest; every scored id is recorded there (touch), and a
                test id is refused as leakage.
        """
        super().__init__(Metric(verifier, output_field), items, manifest)
