"""Turn any Verifier into DSPy metrics: GEPA's five-argument feedback form and the
two/three-argument form of SIMBA and dspy.Evaluate."""
from __future__ import annotations

import threading
from typing import Any

import dspy

from verifirst.task import ITEM_ID, Item


class VerifierMetric:
    """metric(gold, pred, trace=None, pred_name=None, pred_trace=None).

    Returns a float for program-level calls (SIMBA, Evaluate, GEPA's full evaluations)
    and dspy.Prediction(score, feedback) when GEPA asks for one predictor's feedback.
    Verdicts are memoised per (item, candidate): GEPA scores the same output more than once.
    A verifier may offer `explain(item, candidate, verdict) -> str` for costlier feedback;
    it runs only when pred_name is given.
    """

    def __init__(self, verifier: Any, output_field: str, items: list[Item] | dict[str, Item]):
        self.verifier = verifier
        self.output_field = output_field
        self.items = items if isinstance(items, dict) else {it.id: it for it in items}
        self._memo: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self.calls = 0

    def _item(self, gold) -> Item:
        iid = gold.get(ITEM_ID) if hasattr(gold, "get") else getattr(gold, ITEM_ID, None)
        if iid is None or iid not in self.items:
            raise KeyError(f"example has no known {ITEM_ID}: {iid!r}")
        return self.items[iid]

    def verdict(self, gold, pred):
        item = self._item(gold)
        cand = pred.get(self.output_field) if isinstance(pred, dict) else getattr(pred, self.output_field, None)
        key = (item.id, repr(cand))
        with self._lock:
            self.calls += 1
            hit = self._memo.get(key)
        if hit is not None:
            return item, cand, hit
        v = self.verifier.verify(item, cand)
        with self._lock:
            self._memo[key] = v
        return item, cand, v

    def __call__(self, gold, pred, trace=None, pred_name=None, pred_trace=None):
        item, cand, v = self.verdict(gold, pred)
        if pred_name is None:
            return float(v.score)
        feedback = v.feedback or ("passed" if v.passed else f"failed at {v.stage}")
        if pred_name is not None and hasattr(self.verifier, "explain"):
            feedback = self.verifier.explain(item, cand, v) or feedback
        return dspy.Prediction(score=float(v.score), feedback=feedback)
