"""Turn any Verifier into DSPy metrics: GEPA's five-argument feedback form and the
two/three-argument form of SIMBA and dspy.Evaluate."""
from __future__ import annotations

import dataclasses
import threading
from typing import Any

import dspy

from verifirst.errors import LeakageError
from verifirst.task import ITEM_ID, Item
from verifirst.verifiers.base import Verdict

VERIFIER_ERROR = "VERIFIER_ERROR"


class VerifierMetric:
    """metric(gold, pred, trace=None, pred_name=None, pred_trace=None).

    Returns a float for program-level calls (SIMBA, Evaluate, GEPA's full evaluations)
    and dspy.Prediction(score, feedback) when GEPA asks for one predictor's feedback.
    Verdicts are memoised per (item, candidate): GEPA scores the same output more than once.
    A verifier may offer `explain(item, candidate, verdict) -> str` for costlier feedback;
    it runs only when pred_name is given.

    DSPy needs a number for every call, so an item the verifier could not judge (it raised, or
    its verdict is inconclusive or has no score) scores 0.0 with feedback saying why, and is
    counted in `verifier_errors` / `inconclusive` (once per item and candidate) so the report
    keeps it apart from real failures.
    """

    def __init__(self, verifier: Any, output_field: str, items: list[Item] | dict[str, Item],
                 manifest: Any = None):
        """Args:
            verifier: anything with verify(item, candidate) -> Verdict.
            output_field: the prediction field handed to the verifier.
            items: the train + val items the engine may score (by id).
            manifest: the run's SplitManifest; every scored id is recorded there (touch), and a
                test id is refused as leakage.
        """
        self.verifier = verifier
        self.output_field = output_field
        self.items = items if isinstance(items, dict) else {it.id: it for it in items}
        self.manifest = manifest
        self._memo: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self.calls = 0
        self.verifier_errors = 0
        self.inconclusive = 0

    def _item(self, gold) -> Item:
        iid = gold.get(ITEM_ID) if hasattr(gold, "get") else getattr(gold, ITEM_ID, None)
        if iid is None:
            raise LeakageError(f"the metric was handed an example without {ITEM_ID}: cannot prove it "
                               f"is not a held-out item")
        if self.manifest is not None:
            self.manifest.touch(iid, who="the optimizer's metric")  # raises on a test id
        if iid not in self.items:
            raise LeakageError(f"the metric was handed item {iid!r}, which is not among the train and "
                               f"validation items it was built with; cannot prove it is not held out")
        return self.items[iid]

    def _judge(self, item: Item, cand: Any) -> Verdict:
        """The verifier's verdict, or a 0.0 verdict naming why nothing was observed."""
        try:
            v = self.verifier.verify(item, cand)
        except Exception as e:  # one item's crash must not end the optimization
            with self._lock:
                self.verifier_errors += 1
            return Verdict(0.0, False, VERIFIER_ERROR, feedback=f"verifier error: {type(e).__name__}: {e}"[:2000])
        reason = getattr(v, "inconclusive", None)
        if reason or v.score is None:
            with self._lock:
                self.inconclusive += 1
            why = reason or "the verifier gave no score"
            fb = v.feedback or f"inconclusive: {why}"
            if dataclasses.is_dataclass(v):
                return dataclasses.replace(v, score=0.0, passed=False, feedback=fb)
            return Verdict.undecided(why, feedback=fb)
        return v

    def counts(self) -> dict:
        """Calls and the items it could not judge, for the run report."""
        return {"calls": self.calls, "verifier_errors": self.verifier_errors, "inconclusive": self.inconclusive}

    def verdict(self, gold, pred):
        item = self._item(gold)
        cand = pred.get(self.output_field) if isinstance(pred, dict) else getattr(pred, self.output_field, None)
        key = (item.id, repr(cand))
        with self._lock:
            self.calls += 1
            hit = self._memo.get(key)
        if hit is not None:
            return item, cand, hit
        v = self._judge(item, cand)
        with self._lock:
            self._memo[key] = v
        return item, cand, v

    def __call__(self, gold, pred, trace=None, pred_name=None, pred_trace=None):
        item, cand, v = self.verdict(gold, pred)
        if pred_name is None:
            return float(v.score)
        feedback = v.feedback or ("passed" if v.passed else f"failed at {v.stage}")
        if hasattr(self.verifier, "explain") and v.stage != VERIFIER_ERROR and not getattr(v, "inconclusive", None):
            feedback = self.verifier.explain(item, cand, v) or feedback
        return dspy.Prediction(score=float(v.score), feedback=feedback)
