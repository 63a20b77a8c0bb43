"""Pass/fail and rubric judges: prompt editing, verdict parsing, weighted scores."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy
import pytest
from dspy.utils import DummyLM

from verifirst.judge.programs import (DEFAULT_RUBRIC_PROMPT, Check, JudgeError, PassFailJudge,
                                       RubricJudge, make_judge, normalize_verdict, parse_checks,
                                       weighted_score)


def last_system(lm) -> str:
    msgs = lm.history[-1]["messages"]
    return next(m["content"] for m in msgs if m["role"] == "system")


def test_passfail_prompt_is_what_the_lm_sees_and_is_settable():
    judge = PassFailJudge(["title", "diff"])
    lm = DummyLM([{"reasoning": "r1", "verdict": "FAIL"}, {"reasoning": "r2", "verdict": "PASS"}])
    with dspy.context(lm=lm):
        out = judge(title="t", diff="+eval(x)")
        assert out.verdict == "FAIL" and out.reasoning == "r1"
        assert judge.prompt.split()[0] in last_system(lm)
        judge.prompt = "Fail every diff that calls eval."
        assert judge(title="t", diff="+x").verdict == "PASS"
        assert "Fail every diff that calls eval." in last_system(lm)


def test_prompt_edits_through_the_predictor_are_seen_by_prompt():
    # GEPA rewrites predictor signature instructions; judge.prompt must reflect that
    judge = PassFailJudge(["code"])
    for _, pred in judge.named_predictors():
        pred.signature = pred.signature.with_instructions("Edited elsewhere.")
    assert judge.prompt == "Edited elsewhere."
    copy = judge.copy_with_prompt("Another.")
    assert copy.prompt == "Another." and judge.prompt == "Edited elsewhere."


def test_missing_view_field_and_lm_error_are_distinct_from_fail():
    judge = PassFailJudge(["code"])
    with pytest.raises(ValueError, match="lacks field"):
        judge(diff="x")
    with dspy.context(lm=DummyLM([{"reasoning": "?", "verdict": "MAYBE"}] * 4)):
        with pytest.raises(JudgeError):
            judge(code="x")


@pytest.mark.parametrize("raw,want", [("PASS", "PASS"), ("fail.", "FAIL"), (" `Pass` ", "PASS")])
def test_normalize_verdict(raw, want):
    assert normalize_verdict(raw) == want


def test_normalize_verdict_rejects():
    with pytest.raises(JudgeError):
        normalize_verdict("unsure")


def test_parse_checks_and_weighted_score():
    checks = parse_checks(DEFAULT_RUBRIC_PROMPT)
    assert [c.name for c in checks] == ["correct", "complete", "safe", "clear"]
    assert [c.weight for c in checks] == [3, 2, 1, 1]
    s = weighted_score(checks, {"correct": 1, "complete": 1, "safe": 0, "clear": "bad"})
    assert s == pytest.approx(5 / 7)
    assert weighted_score([Check("a", 1, ""), Check("b", 3, "")], {"a": 2.0, "b": -1}) == pytest.approx(0.25)
    with pytest.raises(JudgeError):
        weighted_score([], {})


def test_rubric_verdict_follows_threshold_and_prompt_checks():
    judge = RubricJudge(["code"], threshold=0.8)
    lm = DummyLM([{"reasoning": "r", "check_scores": {"correct": 1, "complete": 1, "safe": 0, "clear": 0}}] * 2)
    with dspy.context(lm=lm):
        out = judge(code="x")
    assert out.score == pytest.approx(5 / 7) and out.verdict == "FAIL"
    assert judge.verdict_at(out.score, 0.7) == "PASS"
    judge.prompt = judge.prompt + "\n- [w=7] tested: ships a test"
    assert [c.name for c in judge.checks][-1] == "tested"
    judge.prompt = "No checks here."
    with pytest.raises(JudgeError, match="no checks"):
        judge(code="x")


def test_make_judge():
    assert isinstance(make_judge("passfail", ["code"]), PassFailJudge)
    assert make_judge("rubric", ["code"], threshold=0.3).threshold == 0.3
    with pytest.raises(ValueError):
        make_judge("vibes", ["code"])


def rubric_answer(check_scores) -> str:
    import json

    return json.dumps({"reasoning": "scored", "check_scores": check_scores})


@pytest.mark.parametrize("raw", [[0.5, 1, 1, 0], {}, {"overall": 0.9}, {"correct": "high", "safe": 1}],
                         ids=["list", "empty", "no-check-named", "not-a-number"])
def test_rubric_answer_that_does_not_parse_is_an_error_not_a_fail(raw):
    from verifirst.lm import FastJSONAdapter
    from verifirst.lm.testing import scripted_lm

    judge = RubricJudge(["code"])
    with dspy.context(lm=scripted_lm(lambda m: rubric_answer(raw)), adapter=FastJSONAdapter()):
        with pytest.raises(JudgeError):
            judge(code="x = 1")


def test_rubric_answer_that_parses_is_scored():
    from verifirst.lm import FastJSONAdapter
    from verifirst.lm.testing import scripted_lm

    judge = RubricJudge(["code"], threshold=0.5)
    answer = rubric_answer({"correct": 1, "complete": 0.5, "safe": 1})  # `clear` unscored counts 0
    with dspy.context(lm=scripted_lm(lambda m: answer), adapter=FastJSONAdapter()):
        out = judge(code="x = 1")
    assert out.score == pytest.approx((3 + 1 + 1) / 7) and out.verdict == "PASS"
