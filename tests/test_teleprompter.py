"""verifirst.AutoRefine as a dspy.Teleprompter on a plain DSPy judge, with one scripted LM that
judges by the `FAIL if the code contains `X`` rules in its instructions and plays teacher,
proposer and applier by their signatures: validation π only rises if the loop wrote the rule."""
from __future__ import annotations

import json
import re

import dspy
import pytest

from verifirst.core.errors import InputError
from verifirst.lm.testing import scripted_lm

FIELD_RE = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## \w+ ## \]\]|\n\nRespond with|\Z)", re.S)
FAIL_RULE = re.compile(r"FAIL if the code contains `([^`]+)`")
PASS_RULE = re.compile(r"PASS if the code contains `([^`]+)`")
START = "Judge whether the code is safe to accept."


def _format(messages, **out) -> str:
    if "JSON" in messages[-1]["content"] or "[[ ## completed ## ]]" not in messages[0]["content"]:
        return json.dumps(out)
    return "\n\n".join(f"[[ ## {k} ## ]]\n{v if isinstance(v, str) else json.dumps(v)}"
                       for k, v in out.items()) + "\n\n[[ ## completed ## ]]"


def answer(messages) -> str:
    system, user = messages[0]["content"], messages[-1]["content"]
    f = {m.group(1): m.group(2).strip() for m in FIELD_RE.finditer(user)}
    if "`new_prompt`" in system:
        edits = json.loads(f["edits"])
        return _format(messages, new_prompt=f["judge_prompt"] + "".join(f"\n- {e['rule']}" for e in edits))
    if "`edits`" in system:
        if "`eval(`" in f.get("judge_prompt", "") or "return eval(" not in f.get("disagreements", ""):
            return _format(messages, edits=[])
        return _format(messages, edits=[
            {"op": "add", "direction": "FAIL", "rule": "FAIL if the code contains `eval(`"},
            {"op": "add", "direction": "PASS", "rule": "PASS if the code contains `literal_eval(`"}])
    if "`decision`" in system:
        unsafe = "eval(" in f["code"].replace("literal_eval(", "")
        ok = unsafe == (f["outcome_label"] == "FAIL")
        return _format(messages, justification="the code calls `eval(`" if unsafe else "nothing unsafe is visible",
                       decision="KEEP" if ok else "SKIP")
    code = f.get("code", "")
    instr = system.split("your objective is:", 1)[-1]
    passes = [t for t in PASS_RULE.findall(instr) if t in code]
    fails = [t for t in FAIL_RULE.findall(instr) if t in code]
    return _format(messages, reasoning=f"rules: {passes or fails}", verdict="PASS" if passes or not fails else "FAIL")


def examples(n: int, start: int = 0) -> list:
    bodies = ["return sorted(xs)", "return eval(s)", "return ast.literal_eval(s)", "return eval(s.strip())"]
    out = []
    for i in range(start, start + n):
        body = bodies[i % 4]
        label = "FAIL" if "eval(" in body.replace("literal_eval(", "") else "PASS"
        out.append(dspy.Example(code=f"def f{i}(s, xs):\n    {body}\n", label=label).with_inputs("code"))
    return out


class Safety(dspy.Signature):
    code: str = dspy.InputField()
    verdict: str = dspy.OutputField(desc="PASS or FAIL")


@pytest.fixture(scope="module")
def compiled():
    import verifirst

    lm = scripted_lm(answer, name="teleprompter-rules")
    student = dspy.ChainOfThought(Safety.with_instructions(START))
    tp = verifirst.AutoRefine(teacher=lm, proposer=lm, max_iters=3)
    with dspy.context(lm=lm):
        out = tp.compile(student, trainset=examples(16), valset=examples(8, start=100))
    return student, out, tp, lm


def test_compile_returns_a_copy_with_calibrated_instructions(compiled):
    student, out, tp, _ = compiled
    assert isinstance(out, dspy.ChainOfThought) and out is not student
    assert student.predict.signature.instructions == START  # the student is left as it was
    instr = out.predict.signature.instructions
    assert instr.startswith(START) and "FAIL if the code contains `eval(`" in instr
    d = out.autorefine
    assert d is tp.details and d["calibrated_prompt"] == instr
    assert d["validation_pi"] > d["initial_validation_pi"] and d["validation_pi"] == pytest.approx(1.0)
    assert d["teacher"]["keep"] == 16 and d["n_val"] == 8 and d["validation_held_out"] is None
    assert [it["iteration"] for it in d["iterations"]] == [0, 1]


def test_compiled_judge_judges_unseen_code(compiled):
    _, out, _, lm = compiled
    with dspy.context(lm=lm):
        assert out(code="def g(s):\n    return eval(s)\n").verdict == "FAIL"
        assert out(code="def g(s):\n    return ast.literal_eval(s)\n").verdict == "PASS"


def test_without_valset_a_seeded_share_of_trainset_validates():
    import verifirst

    lm = scripted_lm(answer, name="teleprompter-rules")
    tp = verifirst.AutoRefine(teacher=lm, proposer=lm, max_iters=2, use_teacher=False)
    with dspy.context(lm=lm):
        out = tp.compile(dspy.Predict(Safety.with_instructions(START)), trainset=examples(20))
    d = out.autorefine
    assert d["validation_held_out"]["n"] == d["n_val"] > 0 and d["n_train"] + d["n_val"] == 20
    assert d["teacher"]["used"] is False and "`eval(`" in out.signature.instructions


def test_bad_examples_are_input_errors_naming_the_field():
    import verifirst

    tp = verifirst.AutoRefine(max_iters=1)
    bad = [dspy.Example(code="x", label="maybe").with_inputs("code")]
    with pytest.raises(InputError, match=r"trainset\[0\]\.label"):
        tp.compile(dspy.Predict(Safety), trainset=bad, valset=examples(2))
    with pytest.raises(InputError, match=r"valset\[0\] lacks"):
        tp.compile(dspy.Predict(Safety), trainset=examples(2), valset=[dspy.Example(label="PASS")])
