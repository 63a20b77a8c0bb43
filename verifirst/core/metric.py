"""One metric path for evaluation and every optimizer.

`Metric` wraps either a Verifier (anything with verify(item, candidate) -> Verdict, the protocol
in `verifirst.core.verdicts`) or a plain DSPy metric `(example, pred, trace=None[, pred_name,
pred_trace])` returning bool, float or `dspy.Prediction(score=, feedback=)`; a plain metric's answer
becomes the same `Verdict`. Evaluation calls it as metric(item, prediction) -> a Verdict; `Metric.for_optimizer(items, manifest)` gives the DSPy-callable form every optimizer
uses (GEPA's five-argument feedback form, the two/three-argument form of SIMBA, dspy.Evaluate
and teleprompters), which records every item it scores in the split manifest, refuses test
items, memoises verdicts and counts the items it could not judge.

No verdict without an observation: a plain metric returning None is INCONCLUSIVE; one that
raises is a verifier ERROR in evaluation; neither is PASS or FAIL.

Under an executor other than threads (`vf.Ray`) the driver hands evaluation and the optimizer a
Metric whose verifier is the executor's proxy (`executor.metric(metric)`): every verify call,
GEPA's threaded metric calls included, then runs on the executor's workers.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import threading
from typing import Any, Callable

from verifirst.core.errors import ConfigError, InputError, LeakageError
from verifirst.core.task import FAIL, ITEM_ID, PASS, Item
from verifirst.core.verdicts import VERIFIER_ERROR, Verdict

__all__ = ["VERIFIER_ERROR", "Metric", "OptimizerMetric"]  # VERIFIER_ERROR: re-exported from core.verdicts


def _verifier_error(feedback: str) -> Verdict:
    """The optimizer metric's verdict on an item the verifier could not judge: score 0.0, no verdict."""
    return Verdict(0.0, None, VERIFIER_ERROR, feedback=feedback)


def _positional_arity(fn: Callable) -> int:
    """How many positional arguments fn takes (99 with *args)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 3
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 99
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _check_signature(fn: Callable, name: str) -> None:
    """Refuse a plain metric that cannot be called as metric(example, pred[, trace, pred_name,
    pred_trace]), before the run: `lambda pred: 1.0` would otherwise score every item."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return  # a builtin without a signature: its first call tells
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    keyword_only = [p.name for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    var_pos = any(p.kind == p.VAR_POSITIONAL for p in params)
    sig = f"{name}({', '.join(p.name for p in params)})"
    expected = "metric(example, pred, trace=None) or GEPA's metric(gold, pred, trace, pred_name, pred_trace)"
    if len(positional) < 2 and not var_pos:
        raise ConfigError(f"metric {sig} takes {len(positional)} positional argument(s); it is called with "
                          f"(example, pred)", field="metric", expected=expected)
    if len(required) > 5 or keyword_only:
        raise ConfigError(f"metric {sig} requires arguments the optimizers never pass "
                          f"({', '.join(keyword_only) or 'more than five'})", field="metric", expected=expected)


def check_threshold(threshold: Any) -> float:
    """A plain metric's PASS threshold as a float, refused unless it is a number in (0, 1].

    A plain metric scores on DSPy's 0..1 scale (a bool counts as 0 or 1): at 0 or below every item
    would pass, above 1 none would.

    Args:
        threshold: the threshold given.

    Raises:
        InputError: naming `threshold` and what it expects.
    """
    expected = "a number in (0, 1]: the score (on the metric's 0..1 scale) at or above which an item passes"
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not math.isfinite(threshold):
        raise InputError(f"{threshold!r} is not a threshold", field="threshold", expected=expected)
    if not 0 < threshold <= 1:
        raise InputError(f"threshold {threshold} would make every item {'pass' if threshold <= 0 else 'fail'}",
                         field="threshold", expected=expected)
    return float(threshold)


class Metric:
    """A verifier or a plain DSPy metric, for evaluation and optimizers alike."""

    def __init__(self, metric: Any, output_field: str | None = None, *, threshold: float | None = None,
                 name: str | None = None):
        """Args:
            metric: a Verifier (has verify(item, candidate)) or a DSPy metric function.
            output_field: the prediction field a verifier checks; a plain metric gets the whole
                prediction (None).
            threshold: a plain metric's score at or above which an item counts as PASS, in (0, 1]
                (default 1.0). A verifier's verdict says PASS itself.
            name: the name in reports (default: the verifier's name or the function's).
        """
        if isinstance(metric, Metric):
            metric = metric.metric
        self.metric = metric
        self.is_verifier = callable(getattr(metric, "verify", None))
        if not self.is_verifier and not callable(metric):
            raise InputError(f"metric {type(metric).__name__} is neither a verifier nor a function", field="metric",
                             expected="verify(item, candidate) -> Verdict, or metric(example, pred, trace=None)")
        if self.is_verifier and not output_field:
            raise InputError("a verifier needs the program's output field to check", field="output_field",
                             expected="the name of the program's output (or a program with `output_field`)")
        self.output_field = output_field
        self.threshold = 1.0 if threshold is None else check_threshold(threshold)
        self.threshold_given = threshold is not None  # else bootstrapping keeps DSPy's rule (truthy value)
        self.name = name or getattr(metric, "name", None) or getattr(metric, "__name__", type(metric).__name__)
        self._arity = 0 if self.is_verifier else _positional_arity(metric)
        if not self.is_verifier:
            _check_signature(metric, self.name)

    # Scorer's names: evaluation reads `verifier` and `candidate`.
    @property
    def verifier(self) -> Any:
        return self.metric

    def candidate(self, pred: Any) -> Any:
        """What the verifier checks (and the row keeps): one output field, or the whole prediction."""
        if self.output_field is None:
            if hasattr(pred, "toDict"):
                return pred.toDict()
            return pred
        if isinstance(pred, str):
            return pred
        return pred.get(self.output_field) if isinstance(pred, dict) else getattr(pred, self.output_field, None)

    def __call__(self, item: Item, pred: Any):
        """The verdict on one prediction (evaluation); raises when the metric crashes."""
        if self.is_verifier:
            return self.metric.verify(item, self.candidate(pred))
        return self.plain(item.example(), pred)

    def plain(self, example: Any, pred: Any, trace: Any = None, pred_name: str | None = None,
              pred_trace: Any = None) -> Verdict:
        """A plain metric's answer as a Verdict (score >= threshold is PASS).

        Args:
            example: the dspy.Example (or the gold an optimizer handed over).
            pred: the program's prediction.
            trace, pred_name, pred_trace: as an optimizer passes them (GEPA's five-argument form
                when pred_name is given).

        Returns:
            PASS or FAIL with the metric's score and feedback; INCONCLUSIVE when it returned no
            score. Raises InputError for an answer that is no score (a str, a dict, NaN).
        """
        args = [example, pred, trace, pred_name, pred_trace][: min(self._arity, 5)] if pred_name is not None \
            else [example, pred, trace][: min(self._arity, 3)]
        out = self.metric(*args)
        if out is None:
            return Verdict.undecided("the metric returned no score")
        feedback = ""
        if hasattr(out, "score") and not isinstance(out, (bool, int, float)):
            feedback = str(getattr(out, "feedback", "") or "")
            out = out.score
            if out is None:
                return Verdict.undecided("the metric returned no score", feedback=feedback)
        # a str ("0.5", "FAIL"), a dict or NaN is a metric bug: an ERROR row, never a score
        try:
            if isinstance(out, (str, bytes, dict, list, tuple, set)) or isinstance(out, numbers.Complex) \
                    and not isinstance(out, numbers.Real):
                raise TypeError
            score = float(out)
        except (TypeError, ValueError):
            raise InputError(f"metric {self.name} returned {type(out).__name__} {out!r:.80}, not a score",
                             field="metric", expected="bool, int, float or dspy.Prediction(score=, feedback=)") \
                from None
        if not math.isfinite(score):
            raise InputError(f"metric {self.name} returned {score}, not a finite score", field="metric",
                             expected="a finite number, or None when the item cannot be judged")
        if not 0.0 <= score <= 1.0:  # on another scale every score >= 1 would read as PASS, in silence
            raise InputError(f"metric {self.name} returned {score:g}, outside [0, 1]", field="metric",
                             expected="a score in [0, 1], higher is better (PASS at >= threshold, default 1.0): "
                                      "scale it, e.g. score / 10 for marks out of 10")
        passed = bool(out) if isinstance(out, bool) else score >= self.threshold
        return Verdict(score, passed, PASS if passed else FAIL, feedback=feedback)

    def for_optimizer(self, items: list[Item] | dict[str, Item], manifest: Any = None) -> "OptimizerMetric":
        """The DSPy-callable form handed to an optimizer.

        Args:
            items: the train + val items the optimizer may score (by id).
            manifest: the run's SplitManifest; every scored id is recorded there, a test id is refused.
        """
        return OptimizerMetric(self, items, manifest)


class OptimizerMetric:
    """metric(gold, pred, trace=None, pred_name=None, pred_trace=None), for any optimizer.

    Returns a float for program-level calls (SIMBA, Evaluate, teleprompters, GEPA's full
    evaluations) and dspy.Prediction(score, feedback) when GEPA asks for one predictor's
    feedback. Verdicts are memoised per (item, candidate): GEPA scores the same output more than
    once. A verifier may offer `explain(item, candidate, verdict) -> str` for costlier feedback;
    it runs only when pred_name is given. A plain metric taking pred_name gets GEPA's call as is.

    DSPy needs a number for every call, so an item the metric could not judge (it raised, or its
    verdict is inconclusive or has no score) scores 0.0 with feedback saying why, and is counted
    in `verifier_errors` / `inconclusive` so the report keeps it apart from real failures.
    """

    def __init__(self, metric: Metric, items: list[Item] | dict[str, Item], manifest: Any = None):
        self.base = metric
        self.verifier = metric.metric
        self.output_field = metric.output_field
        if not isinstance(items, dict) and not all(isinstance(it, Item) for it in items):
            from verifirst.core.data import to_suite  # dspy.Examples or records, with ids as vf.optimize gives them

            recs = list(items)
            given = [r.get(ITEM_ID) if hasattr(r, "get") else None for r in recs]
            items = [it if i is None else dataclasses.replace(it, id=str(i))
                     for it, i in zip(to_suite(recs, name="items").items, given)]
        self.items = items if isinstance(items, dict) else {it.id: it for it in items}
        self._by_content: dict[str, list[str]] | None = None
        self.manifest = manifest
        self._memo: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self.calls = 0
        self.verifier_errors = 0
        self.inconclusive = 0

    def _item(self, gold) -> Item:
        iid = gold.get(ITEM_ID) if hasattr(gold, "get") else getattr(gold, ITEM_ID, None)
        if iid is None:
            iid = self._id_by_content(gold)
        if iid is None:
            raise LeakageError(f"the metric was handed an example without {ITEM_ID} whose content is not one "
                               f"of the {len(self.items)} train and validation items it was built with: "
                               f"cannot prove it is not a held-out item")
        if self.manifest is not None:
            self.manifest.touch(iid, who="the optimizer's metric")  # raises on a test id
        if iid not in self.items:
            raise LeakageError(f"the metric was handed item {iid!r}, which is not among the train and "
                               f"validation items it was built with; cannot prove it is not held out")
        return self.items[iid]

    def _judge(self, item: Item, gold: Any, pred: Any, trace: Any = None, pred_name: str | None = None,
               pred_trace: Any = None):
        """The verdict, or a 0.0 verdict naming why nothing was observed."""
        try:
            if self.base.is_verifier:
                v = self.verifier.verify(item, self.base.candidate(pred))
            else:
                v = self.base.plain(gold, pred, trace, pred_name, pred_trace)
        except Exception as e:  # one item's crash must not end the optimization
            with self._lock:
                self.verifier_errors += 1
            return _verifier_error(f"verifier error: {type(e).__name__}: {e}"[:2000])
        reason = getattr(v, "inconclusive", None)
        if getattr(v, "passed", False) is None and not reason:  # an ERROR verdict: the verifier could not judge
            with self._lock:
                self.verifier_errors += 1
            return _verifier_error(v.feedback or f"verifier error: {v.stage}")
        if reason or v.score is None:
            with self._lock:
                self.inconclusive += 1
            why = reason or "the verifier gave no score"
            fb = v.feedback or f"inconclusive: {why}"
            if dataclasses.is_dataclass(v):
                return dataclasses.replace(v, score=0.0, passed=None, feedback=fb, inconclusive=why)
            return Verdict.undecided(why, feedback=fb)
        return v

    def _id_by_content(self, gold) -> str | None:
        """The id of the one allowed item with this plain example's content (safe: it is that item)."""
        from verifirst.core.data import content_id

        if not hasattr(gold, "toDict"):
            return None
        if self._by_content is None:
            index: dict[str, list[str]] = {}
            for it in self.items.values():
                index.setdefault(content_id({**it.inputs, **it.gold}), []).append(it.id)
            self._by_content = index
        rec = {k: v for k, v in gold.toDict().items() if k not in (ITEM_ID, "id", "group")}
        ids = self._by_content.get(content_id(rec), [])
        return ids[0] if len(ids) == 1 else None

    def counts(self) -> dict:
        """Calls and the items it could not judge, for the run report."""
        return {"calls": self.calls, "verifier_errors": self.verifier_errors, "inconclusive": self.inconclusive}

    def verdict(self, gold, pred, trace=None, pred_name=None, pred_trace=None):
        """(item, candidate, verdict) for one call, memoised per item and candidate."""
        item = self._item(gold)
        cand = self.base.candidate(pred)
        # a plain metric may read the trace (bootstrapping) or the predictor (GEPA): key on both
        # a candidate may carry more than its text for the verifier (a repair's first draft: `draft`)
        key = ((item.id, repr(cand), repr(getattr(cand, "draft", None))) if self.base.is_verifier
               else (item.id, repr(cand), trace is None, pred_name))
        with self._lock:
            self.calls += 1
            hit = self._memo.get(key)
        if hit is not None:
            return item, cand, hit
        v = self._judge(item, gold, pred, trace, pred_name, pred_trace)
        with self._lock:
            self._memo[key] = v
        return item, cand, v

    def __call__(self, gold, pred, trace=None, pred_name=None, pred_trace=None):
        import dspy

        item, cand, v = self.verdict(gold, pred, trace, pred_name, pred_trace)
        if pred_name is None:
            # a teleprompter keeps a bootstrapped demo on a truthy answer. A verifier's verdict and a
            # given threshold decide by PASS (partial credit is no pass); a plain metric without a
            # threshold is its own, as in DSPy (0.8 keeps the demo)
            if trace is not None and (self.base.is_verifier or self.base.threshold_given):
                return v.passed is True
            return float(v.score)
        feedback = v.feedback or ("passed" if v.passed is True else f"failed at {v.stage}")
        if hasattr(self.verifier, "explain") and v.stage != VERIFIER_ERROR and not getattr(v, "inconclusive", None):
            feedback = self.verifier.explain(item, cand, v) or feedback
        return dspy.Prediction(score=float(v.score), feedback=feedback)
