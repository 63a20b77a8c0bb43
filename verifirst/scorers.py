"""Verifiers outside a verifirst run: as MLflow GenAI scorers and as DSPy metrics.

    verifier = ExactMatch()  # any verifier: the bash or terraform one, or your own
    scorer = vf.mlflow_scorer(verifier, gold={"command": "answer"})
    mlflow.genai.evaluate(data=rows, predict_fn=predict, scorers=[scorer])
    metric = vf.dspy_metric(verifier, "answer", gold={"command": "answer"})
    dspy.Evaluate(devset=examples, metric=metric)(program)

`gold` maps each gold field the verifier reads (the bash verifier's `command` and `fixture`) to
the field that holds it: a key of MLflow's `expectations`, or a field of the dspy.Example. A
mapped field that is missing is an InputError naming both names.

The value is the verdict's `passed`, never its score: a verifier's partial credit (FEH scores a
non-equivalent command up to its similarity) would otherwise count a failure as most of a pass.
A verdict that decided nothing (INCONCLUSIVE, a verifier ERROR, `passed` None) is never a pass:
MLflow gets an error Feedback (left out of the aggregated pass rate; `EvaluationResult.passed`
is False), a DSPy metric answers False / score 0.0 and counts it in `counts()["not_judged"]`.
"""
from __future__ import annotations

import threading
from typing import Any, Mapping

from verifirst.core.data import content_id
from verifirst.core.errors import InputError
from verifirst.core.task import ERROR, INCONCLUSIVE, ITEM_ID, Item
from verifirst.core.verdicts import UNDECIDED, VERIFIER_ERROR

# MLflow's own pass/fail convention: a "yes"/"no" rating aggregates to a pass rate and counts in
# EvaluationResult.passed; "PASS"/"FAIL" strings would be left out of both.
YES, NO = "yes", "no"
NOT_JUDGED_STAGES = frozenset(UNDECIDED)  # INCONCLUSIVE, ERROR, VERIFIER_ERROR
_ID_KEYS = (ITEM_ID, "id", "group")


def decided(verdict: Any) -> bool | None:
    """True or False when the verdict judged the candidate; None when it decided nothing.

    Args:
        verdict: a Verdict (or anything with stage, passed and optionally inconclusive).
    """
    if getattr(verdict, "stage", None) in NOT_JUDGED_STAGES or getattr(verdict, "inconclusive", None):
        return None
    passed = getattr(verdict, "passed", None)
    return None if passed is None else bool(passed)


def _why_not_judged(verdict: Any) -> str:
    return str(getattr(verdict, "inconclusive", None) or getattr(verdict, "feedback", "")
               or f"the verdict's stage is {getattr(verdict, 'stage', None)}")


def _check_gold_map(gold: Mapping[str, str] | None) -> dict[str, str] | None:
    if gold is None:
        return None
    if not isinstance(gold, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in gold.items()):
        raise InputError(f"gold is {gold!r}", field="gold",
                         expected='{"verifier gold field": "your field"}, e.g. {"command": "answer"}')
    return dict(gold)


def _gold_from(source: Mapping[str, Any], gold: dict[str, str] | None, where: str, skip: set[str]) -> dict:
    """The verifier's gold fields read from `source` through the mapping (all of it when None)."""
    if gold is None:
        return {k: v for k, v in source.items() if k not in skip and k not in _ID_KEYS}
    out = {}
    for theirs, ours in gold.items():
        if ours not in source:
            raise InputError(f"{where} has no field {ours!r} (the verifier's gold field {theirs!r} maps to it); "
                             f"it has {sorted(source) or 'no fields'}", field=f"gold.{theirs}",
                             expected=f"a field {ours!r} in every {where}, or another mapping")
        out[theirs] = source[ours]
    return out


def _item(inputs: dict, gold: dict, given_id: Any) -> Item:
    iid = str(given_id) if given_id not in (None, "") else content_id({**inputs, **gold})
    return Item(iid, inputs, gold)


def _field_of(obj: Any, name: str, where: str) -> Any:
    """obj[name] for a dict, obj.name for a Prediction; InputError naming the field when absent."""
    if isinstance(obj, Mapping):
        if name in obj:
            return obj[name]
        have = sorted(obj)
    elif hasattr(obj, "keys") and name in obj.keys():
        return obj[name]
    else:
        have = sorted(obj.keys()) if hasattr(obj, "keys") else f"a {type(obj).__name__}"
    raise InputError(f"{where} has no field {name!r}; it has {have}", field=f"candidate.{name}",
                     expected=f"the {where} field the verifier checks")


# -- MLflow ----------------------------------------------------------------------------------

def _feedback(verdict: Any, verifier_name: str):
    from mlflow.entities import AssessmentError, AssessmentSource, Feedback

    meta = {"stage": str(verdict.stage), "error_classes": ",".join(getattr(verdict, "error_classes", []) or []),
            "score": str(getattr(verdict, "score", "")), "verifier": verifier_name}
    source = AssessmentSource(source_type="CODE", source_id=f"verifirst:{verifier_name}")
    ok = decided(verdict)
    if ok is None:
        code = INCONCLUSIVE if verdict.stage == INCONCLUSIVE or getattr(verdict, "inconclusive", None) else ERROR
        return Feedback(error=AssessmentError(error_code=code, error_message=_why_not_judged(verdict)),
                        rationale=verdict.feedback or None, metadata=meta, source=source)
    return Feedback(value=YES if ok else NO, rationale=verdict.feedback or None, metadata=meta, source=source)


def mlflow_scorer(verifier: Any, candidate: str | None = None, *, gold: Mapping[str, str] | None = None,
                  name: str | None = None):
    """The verifier as an MLflow GenAI scorer for `mlflow.genai.evaluate` and `optimize_prompts`.

    Each row's verdict becomes a Feedback: value "yes"/"no" (the verdict's `passed`; MLflow
    aggregates it to a pass rate), rationale = the verifier's feedback, metadata = stage, error
    classes, score and verifier name. A verdict that decided nothing is an error Feedback
    (error_code INCONCLUSIVE or ERROR), never a pass; a verifier that raises gives an ERROR one.

    Args:
        verifier: anything with verify(item, candidate) -> Verdict.
        candidate: the key of the row's `outputs` dict the verifier checks; None: `outputs` as is.
        gold: {verifier gold field: expectations key}, e.g. {"command": "expected_response"};
            None hands the verifier `expectations` under their own names.
        name: the scorer's (and metric's) name (default: the verifier's name).

    Returns:
        An mlflow.genai.scorers.Scorer.
    """
    from mlflow.genai.scorers import scorer

    gold_map = _check_gold_map(gold)
    vname = str(getattr(verifier, "name", type(verifier).__name__))
    if not callable(getattr(verifier, "verify", None)):
        raise InputError(f"{type(verifier).__name__} has no verify(item, candidate)", field="verifier",
                         expected="a verifirst verifier")

    def score(inputs: Any = None, outputs: Any = None, expectations: Any = None):
        ins = dict(inputs) if isinstance(inputs, Mapping) else ({} if inputs is None else {"inputs": inputs})
        exp = expectations if isinstance(expectations, Mapping) else {}
        item = _item(ins, _gold_from(exp, gold_map, "the row's expectations", set()), exp.get(ITEM_ID))
        cand = outputs if candidate is None else _field_of(outputs, candidate, "the row's outputs")
        try:
            verdict = verifier.verify(item, cand)
        except InputError:
            raise  # bad data is the caller's to fix, not a verdict
        except Exception as e:  # the verifier failed: nothing was judged
            from mlflow.entities import AssessmentError, Feedback

            return Feedback(error=AssessmentError(error_code=ERROR, error_message=f"{type(e).__name__}: {e}"[:2000]),
                            metadata={"stage": VERIFIER_ERROR, "verifier": vname})
        return _feedback(verdict, vname)

    score.__name__ = name or vname.replace("-", "_")
    return scorer(score, name=name or vname)


def pass_rate_objective(scores: Mapping[str, Any]) -> float:
    """An `aggregation` for mlflow.genai.optimize_prompts: the share of scorers that said yes.

    An optimizer needs a number for every row; a row a verifier could not judge (an error
    Feedback, which MLflow's default aggregation refuses) counts 0 here, as in verifirst's own
    optimizer metric.

    Args:
        scores: {scorer name: Feedback or value} for one row.
    """
    def one(v: Any) -> float:
        v = getattr(v, "value", v)
        if isinstance(v, str):
            return float(v.strip().lower() == YES)
        return 0.0 if v is None else float(v)

    return sum(one(v) for v in scores.values()) / len(scores) if scores else 0.0


# -- DSPy ------------------------------------------------------------------------------------

class VerifierDSPyMetric:
    """metric(example, pred, trace=None, pred_name=None, pred_trace=None), from a verifier.

    Answers the verdict's `passed` as a bool, or with feedback=True a dspy.Prediction(score=1.0
    or 0.0, feedback=the verifier's feedback) as GEPA reads it. An undecided verdict answers
    False / 0.0 (never a pass) and is counted in counts()["not_judged"]; a verifier that raises
    propagates, so dspy.Evaluate counts it as an error.
    """

    def __init__(self, verifier: Any, candidate: str, gold: Mapping[str, str] | None = None, *,
                 feedback: bool = False):
        if not callable(getattr(verifier, "verify", None)):
            raise InputError(f"{type(verifier).__name__} has no verify(item, candidate)", field="verifier",
                             expected="a verifirst verifier")
        if not isinstance(candidate, str) or not candidate:
            raise InputError(f"candidate is {candidate!r}", field="candidate",
                             expected="the name of the prediction field the verifier checks")
        self.verifier, self.candidate, self.gold = verifier, candidate, _check_gold_map(gold)
        self.feedback = bool(feedback)
        self.__name__ = str(getattr(verifier, "name", type(verifier).__name__)).replace("-", "_")
        self._counts = {"calls": 0, "passed": 0, "failed": 0, "not_judged": 0}
        self._lock = threading.Lock()

    def item(self, example: Any) -> Item:
        """The Item the verifier sees for a dspy.Example: its inputs, and gold through the mapping.

        Args:
            example: a dspy.Example (or a dict; then every field not mapped as gold is an input).
        """
        data = example.toDict() if hasattr(example, "toDict") else dict(example)
        input_keys = set(getattr(example, "_input_keys", None) or ())
        gold = _gold_from(data, self.gold, "the example", input_keys)
        inputs = {k: data[k] for k in input_keys} if input_keys else {
            k: v for k, v in data.items() if k not in _ID_KEYS and k not in (self.gold or {}).values()}
        return _item(inputs, gold, data.get(ITEM_ID) or data.get("id"))

    def counts(self) -> dict:
        """Calls, passes, failures and items the verifier could not judge."""
        with self._lock:
            return dict(self._counts)

    def __call__(self, example, pred, trace=None, pred_name=None, pred_trace=None):
        item = self.item(example)
        cand = pred if isinstance(pred, str) else _field_of(pred, self.candidate, "the prediction")
        verdict = self.verifier.verify(item, cand)
        ok = decided(verdict)
        with self._lock:
            self._counts["calls"] += 1
            self._counts["not_judged" if ok is None else "passed" if ok else "failed"] += 1
        if not self.feedback:
            return bool(ok)
        import dspy

        text = verdict.feedback or ("passed" if ok else f"failed at {verdict.stage}")
        if ok is None:
            text = f"not judged ({_why_not_judged(verdict)}): {text}"
        return dspy.Prediction(score=1.0 if ok else 0.0, feedback=text)


def dspy_metric(verifier: Any, candidate: str, *, gold: Mapping[str, str] | None = None,
                feedback: bool = False) -> VerifierDSPyMetric:
    """The verifier as a DSPy metric for dspy.Evaluate, teleprompters and dspy.GEPA.

    Args:
        verifier: anything with verify(item, candidate) -> Verdict.
        candidate: the prediction field the verifier checks (e.g. "command").
        gold: {verifier gold field: example field}, e.g. {"command": "answer"}; None hands the
            verifier the example's non-input fields under their own names.
        feedback: answer dspy.Prediction(score, feedback) for GEPA instead of a bool.

    Returns:
        A callable metric(example, pred, trace=None, pred_name=None, pred_trace=None).
    """
    return VerifierDSPyMetric(verifier, candidate, gold, feedback=feedback)
