"""A run's failures are told apart by where they came from: an exception the program's own code
raised is a program error (not retried, counted apart, its type, message and place kept in the
row), an LM call that failed or gave an unparseable reply is an LM error (retried, as before), and
a run with no verdict says which cause dominated, its first error, and the advice that fits it."""
from __future__ import annotations

import dspy
import pytest

import verifirst as vf
from verifirst.core.errors import RunFailed
from verifirst.core.task import ERROR, Item
from verifirst.core.verdicts import Verdict
from verifirst.lm import FastJSONAdapter
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.loop import evaluation as ev
from verifirst.loop.evaluation import evaluate

DATA = [{"id": f"q{i}", "question": f"What is {i}+{4 - i}?", "answer": "4"} for i in range(10)]


@pytest.fixture
def sleeps(monkeypatch):
    """The evaluation's backoff waits, recorded instead of slept."""
    waited: list[float] = []
    monkeypatch.setattr(ev, "_sleep", waited.append)
    return waited


def answer_or_fault(messages) -> str:
    """Fails the request for `down`, replies garbage for `garbage`, else answers 4."""
    text = messages[-1]["content"]
    if "down" in text:
        raise ConnectionError("endpoint unreachable")
    if "garbage" in text:
        return "not json at all"
    return json_answer(answer="4")


class Buggy(dspy.Module):
    """Raises its own KeyError on `bug`; on `wrapped` turns the LM's failure into its own error."""

    def __init__(self):
        super().__init__()
        self.ask = dspy.Predict("question -> answer")

    def forward(self, question):
        if question == "bug":
            raise KeyError("my bug")
        if question == "wrapped":
            try:
                return self.ask(question="down")
            except Exception as e:
                raise ValueError("could not ask") from e
        return self.ask(question=question)


def right_answer(item, pred) -> Verdict:
    ok = pred.answer == "4"
    return Verdict(float(ok), ok, "PASS" if ok else "OUTPUT")


def evaluate_buggy(questions: list[str], retries: int = 2):
    items = [Item(id=q, inputs={"question": q}) for q in questions]
    with dspy.context(lm=scripted_lm(answer_or_fault), adapter=FastJSONAdapter()):
        return evaluate(Buggy(), items, right_answer, split="val", retries=retries, progress=False)


def test_a_bug_in_the_program_is_a_program_error_and_not_retried(sleeps):
    res = evaluate_buggy(["bug"])
    row = res.rows[0]
    assert (row.status, row.score, row.passed, row.error_kind, row.attempts) == (ERROR, None, False, "program", 1)
    assert row.error.startswith("KeyError: 'my bug' (at test_program_errors.py:")
    assert row.error.endswith("in forward)")
    assert sleeps == []  # no backoff: asking the model again would not fix the program
    s = res.summary()
    assert (s["errors"], s["lm_errors"], s["program_errors"], s["verifier_errors"]) == (1, 0, 1, 0)


def test_lm_failures_are_still_lm_errors_and_retried(sleeps):
    res = evaluate_buggy(["down", "garbage", "wrapped", "bug", "ok"], retries=1)
    by = res.by_id()
    assert {i: (r.error_kind, r.attempts) for i, r in by.items() if r.status == ERROR} == {
        "down": ("lm", 2), "garbage": ("lm", 2), "wrapped": ("lm", 2), "bug": ("program", 1)}
    assert "endpoint unreachable" in by["down"].error
    assert by["wrapped"].error == "ValueError: could not ask"  # raised from an LM error: still the LM's
    assert by["ok"].passed
    assert len(sleeps) == 3  # one backoff per LM-error item, none for the program's bug
    s = res.summary()
    assert (s["lm_errors"], s["program_errors"], s["pass"]) == (3, 1, 1)


def test_is_lm_error_tells_lm_exceptions_from_the_programs():
    from dspy.utils.exceptions import AdapterParseError, LMTimeoutError

    from verifirst.lm import is_lm_error, mark_lm_error

    assert not is_lm_error(KeyError("x"))
    assert is_lm_error(mark_lm_error(KeyError("raised inside an LM call")))
    assert is_lm_error(LMTimeoutError("slow"))
    assert is_lm_error(AdapterParseError(adapter_name="JSONAdapter", signature=dspy.Signature("q -> a"),
                                         lm_response="?"))


def run_api(tmp_path, **kw):
    args = dict(program=dspy.Predict("question -> answer"), data=DATA, metric=lambda ex, pred, trace=None: True,
                optimizer="none", models={"task": scripted_lm(answer_or_fault)}, workdir=str(tmp_path))
    args.update(kw)
    return vf.optimize(args.pop("program"), args.pop("data"), args.pop("metric"), **args)


def test_a_metric_that_always_raises_is_named_with_its_error(tmp_path, sleeps):
    def broken(example, pred, trace=None):
        raise ValueError("metric bug")

    with pytest.raises(RunFailed) as failed:
        run_api(tmp_path, metric=broken)
    msg = str(failed.value)
    assert "All verifier errors: the metric or verifier raised (first, item q" in msg
    assert ": ValueError: metric bug); fix it, then rerun on the same run directory" in msg
    assert "model endpoint" not in msg


def test_a_program_that_always_raises_is_named_with_its_error(tmp_path, sleeps):
    class AlwaysBroken(dspy.Module):
        def forward(self, question):
            return {}["answer"]

    with pytest.raises(RunFailed) as failed:
        run_api(tmp_path, program=AlwaysBroken())
    msg = str(failed.value)
    assert "(0 LM errors, 0 verifier errors, 5 program errors, 0 inconclusive)" in msg
    assert "All program errors: the program raised (first, item q" in msg
    assert ": KeyError: 'answer' (at test_program_errors.py:" in msg and "in forward)); fix it" in msg
    assert "model endpoint" not in msg
    assert sleeps == []



def test_the_report_and_mlflow_count_program_errors_apart():
    """A program error is no 'LM output missing' in the report's totals, and MLflow gets its count."""
    from verifirst.report import footer_lines
    from verifirst.tracking.callback import unscored_metrics

    summary = {"n": 3, "errors": 2, "lm_errors": 1, "verifier_errors": 0, "program_errors": 1, "inconclusive": 0}
    report = {"splits": {"test": {"before": summary, "after": summary}}}
    line = next(ln for ln in footer_lines(report) if ln.startswith("Items without a verdict"))
    assert "before: 1 with no LM output, 0 verifier errors, 0 inconclusive, 1 program errors" in line
    metrics = unscored_metrics(report)
    assert (metrics["items_lm_error_before"], metrics["items_program_error_after"]) == (1, 1)
    clean = {**summary, "errors": 1, "program_errors": 0}
    assert "program" not in next(ln for ln in footer_lines({"splits": {"test": {"before": clean, "after": clean}}})
                                 if ln.startswith("Items without a verdict"))
