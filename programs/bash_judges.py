"""Reference-less judges for NL->Bash (S0), as DSPy modules over (task, command).

- `FunctionalityMatchJudge` (bidirectional functionality matching): extract the functionalities
  the task requires, describe everything the command does, then check both directions: the
  command covers every requirement, and every thing the command does is asked for.
- `LogicRepresentationJudge`: translate the command into pseudocode-like logic and check that
  the logic covers the required functionalities (syntax no longer gets in the way).
- `CombinedJudge`: both, sharing one requirement extraction; verdict by `mode` ("and"/"or").
- `IceScoreJudge` (baseline, ICE-Score): functional correctness 0-4 without a reference;
  verdict = score >= threshold.

Every judge returns dspy.Prediction(verdict: bool, score, reasoning, feedback, details).
An LM failure or an unusable answer raises `BashJudgeError`: an LM error is not a FAIL.
"""
from __future__ import annotations

import re
from typing import Any

import dspy

from verifirst.core.verdicts import Verdict


class BashJudgeError(RuntimeError):
    """The judge's LM failed or gave no usable verdict."""


# ---- prompts (S0 Algorithms 1 and 2, ICE-Score's functional-correctness prompt) ----------

REQUIREMENTS_PROMPT = (
    "Read the problem carefully and list the functionalities a correct Bash solution must "
    "implement: every action, input, output, file and condition the problem states. "
    "One short, checkable functionality per entry; do not invent requirements.")

DESCRIBE_PROMPT = (
    "Describe comprehensively what the given Bash code does, step by step: every command, "
    "option, pipe, redirection, file it reads or changes, and what it prints. Describe the "
    "code as it is written, not what it was meant to do. One functionality per entry.")

MATCH_PROMPT = (
    "Compare the functionalities the problem requires with the functionality description of "
    "the code. Direction 1: does the code's functionality satisfy and cover ALL required "
    "functionalities? Direction 2: vice versa, is every functionality of the code required by "
    "the problem (no extra actions, outputs or side effects that change the result)? The code "
    "is correct only if both directions hold. In feedback, name each missing or extra "
    "functionality and how to fix the code; write 'none' if it is correct.")

LOGIC_PROMPT = (
    "Translate the given Bash code into a pseudocode-like logic representation: numbered "
    "steps that state precisely what is computed, read, written and printed, independent of "
    "Bash syntax. Follow the code exactly, including its mistakes.")

LOGIC_CHECK_PROMPT = (
    "Check whether the logic representation of the code fully covers every required "
    "functionality of the problem, with nothing wrong or missing, and does nothing the "
    "problem does not ask for. In feedback, name each uncovered or wrong functionality and how "
    "to fix the code; write 'none' if it is correct.")

ICE_PROMPT = (
    "You will be given the code snippet for a problem. Your task is to rate the code snippet "
    "only on one metric.\n"
    "Evaluation Criteria:\n"
    "Functional Correctness (0-4) - Execution-based quality of the code snippet combined with "
    "the problem. The correctness is measured by all possible unit tests.\n"
    "- A score of 0 (failing all possible tests) means that the code snippet is totally "
    "incorrect and meaningless.\n"
    "- A score of 4 (passing all possible tests) means that the code snippet is totally correct "
    "and can handle all cases.\n"
    "Evaluation Steps:\n"
    "1. Read the problem carefully and identify required functionalities of the implementation.\n"
    "2. Read the code snippet and compare it to the problem. Check if the code snippet covers "
    "all required functionalities of the problem.\n"
    "3. Assign a score for functional correctness on a scale of 0 to 4, where 0 is the lowest "
    "and 4 is the highest based on the Evaluation Criteria.")


def _sig(fields: dict, instructions: str) -> type[dspy.Signature]:
    return dspy.Signature(fields, instructions)


_TASK = (str, dspy.InputField(desc="the problem, in natural language"))
_CODE = (str, dspy.InputField(desc="the Bash code under evaluation"))
_REQS = (str, dspy.InputField(desc="the functionalities the problem requires"))

RequirementsSig = _sig({"task": _TASK, "requirements": (list[str], dspy.OutputField(
    desc="required functionalities, one per entry"))}, REQUIREMENTS_PROMPT)
DescribeSig = _sig({"command": _CODE, "functionality": (list[str], dspy.OutputField(
    desc="what the code does, one functionality per entry"))}, DESCRIBE_PROMPT)
MatchSig = _sig({
    "task": _TASK, "requirements": _REQS,
    "functionality": (str, dspy.InputField(desc="the functionality description of the code")),
    "reasoning": (str, dspy.OutputField(desc="the comparison, in both directions")),
    "covers_required": (bool, dspy.OutputField(desc="true if the code covers every required functionality")),
    "only_required": (bool, dspy.OutputField(desc="true if the code does nothing the problem does not ask")),
    "feedback": (str, dspy.OutputField(desc="missing or extra functionalities and how to fix them, or 'none'")),
}, MATCH_PROMPT)
LogicSig = _sig({"command": _CODE, "logic": (str, dspy.OutputField(
    desc="numbered pseudocode steps of what the code does"))}, LOGIC_PROMPT)
LogicCheckSig = _sig({
    "task": _TASK, "requirements": _REQS,
    "logic": (str, dspy.InputField(desc="the logic representation of the code")),
    "reasoning": (str, dspy.OutputField(desc="requirement by requirement, whether the logic covers it")),
    "covers": (bool, dspy.OutputField(desc="true if the logic covers every requirement correctly")),
    "feedback": (str, dspy.OutputField(desc="uncovered or wrong functionalities and how to fix them, or 'none'")),
}, LOGIC_CHECK_PROMPT)
IceSig = _sig({
    "task": _TASK, "command": _CODE,
    "reasoning": (str, dspy.OutputField(desc="the evaluation steps, briefly")),
    "score": (str, dspy.OutputField(desc="functional correctness, an integer from 0 to 4")),
}, ICE_PROMPT)


# ---- parsing ------------------------------------------------------------------------------

_TRUE = {"true", "yes", "y", "1", "correct", "pass", "passed", "equivalent", "covered"}
_FALSE = {"false", "no", "n", "0", "incorrect", "fail", "failed", "not equivalent", "not covered"}


def parse_bool(value: Any, field: str = "verdict") -> bool:
    if isinstance(value, bool):
        return value
    text = str(value if value is not None else "").strip().lower().strip(".'\"`*! ")
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise BashJudgeError(f"{field}: answered {value!r}, not true/false")


def parse_score(value: Any, lo: int = 0, hi: int = 4) -> float:
    """First number in the answer ('3', 'Score: 3', '3/4', '3.5'), which must lie in [lo, hi]."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        num = float(value)
    else:
        m = re.search(r"-?\d+(?:\.\d+)?", str(value or ""))
        if not m:
            raise BashJudgeError(f"score: answered {value!r}, no number")
        num = float(m.group(0))
    if not lo <= num <= hi:
        raise BashJudgeError(f"score: {num:g} is outside {lo}-{hi}")
    return num


def _lines(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "\n".join(f"- {str(v).strip()}" for v in value if str(v).strip())
    return str(value or "").strip()


def _feedback(value: Any) -> str:
    text = str(value or "").strip()
    return "" if text.lower().strip(". ") in ("", "none", "n/a", "no issues") else text


# ---- judges -------------------------------------------------------------------------------

class _BashJudge(dspy.Module):
    name = "judge"

    def _run(self, predictor, **kw):
        try:
            return predictor(**kw)
        except BashJudgeError:
            raise
        except Exception as e:  # adapter parse failures, provider errors
            raise BashJudgeError(f"{self.name}: {type(e).__name__}: {e}") from e

    def requirements_for(self, task: str) -> str:
        return _lines(self._run(self.extract, task=task).requirements)


class FunctionalityMatchJudge(_BashJudge):
    """Bidirectional functionality matching (S0 Algorithm 1)."""

    name = "bfm"

    def __init__(self):
        super().__init__()
        self.extract = dspy.Predict(RequirementsSig)
        self.describe = dspy.Predict(DescribeSig)
        self.match = dspy.Predict(MatchSig)

    def forward(self, task: str, command: str, requirements: str | None = None) -> dspy.Prediction:
        reqs = requirements if requirements is not None else self.requirements_for(task)
        func = _lines(self._run(self.describe, command=command).functionality)
        out = self._run(self.match, task=task, requirements=reqs, functionality=func)
        covers = parse_bool(out.covers_required, "covers_required")
        only = parse_bool(out.only_required, "only_required")
        verdict = covers and only
        fb = _feedback(out.feedback)
        if not verdict and not fb:
            fb = ("the command misses required functionality" if not covers else
                  "the command does more than the task asks")
        return dspy.Prediction(verdict=verdict, score=float(verdict), reasoning=str(out.reasoning or ""),
                               feedback=fb, details={"requirements": reqs, "functionality": func,
                                                     "covers_required": covers, "only_required": only})


class LogicRepresentationJudge(_BashJudge):
    """Logic representation (S0 Algorithm 2)."""

    name = "logic"

    def __init__(self):
        super().__init__()
        self.extract = dspy.Predict(RequirementsSig)
        self.translate = dspy.Predict(LogicSig)
        self.check = dspy.Predict(LogicCheckSig)

    def forward(self, task: str, command: str, requirements: str | None = None) -> dspy.Prediction:
        reqs = requirements if requirements is not None else self.requirements_for(task)
        logic = str(self._run(self.translate, command=command).logic or "").strip()
        out = self._run(self.check, task=task, requirements=reqs, logic=logic)
        verdict = parse_bool(out.covers, "covers")
        fb = _feedback(out.feedback)
        if not verdict and not fb:
            fb = "the command's logic does not cover what the task requires"
        return dspy.Prediction(verdict=verdict, score=float(verdict), reasoning=str(out.reasoning or ""),
                               feedback=fb, details={"requirements": reqs, "logic": logic})


class CombinedJudge(_BashJudge):
    """Both metrics on one requirement list; mode "and" accepts only when both accept."""

    name = "combined"

    def __init__(self, mode: str = "and"):
        super().__init__()
        if mode not in ("and", "or"):
            raise ValueError(f"mode must be 'and' or 'or', got {mode!r}")
        self.mode = mode
        self.extract = dspy.Predict(RequirementsSig)
        self.bfm = FunctionalityMatchJudge()
        self.logic = LogicRepresentationJudge()

    def forward(self, task: str, command: str) -> dspy.Prediction:
        reqs = self.requirements_for(task)
        a = self.bfm(task=task, command=command, requirements=reqs)
        b = self.logic(task=task, command=command, requirements=reqs)
        verdict = (a.verdict and b.verdict) if self.mode == "and" else (a.verdict or b.verdict)
        fb = "\n".join(f"[{n}] {p.feedback}" for n, p in (("functionality", a), ("logic", b))
                       if not p.verdict and p.feedback)
        return dspy.Prediction(verdict=verdict, score=(float(a.verdict) + float(b.verdict)) / 2,
                               reasoning=f"functionality matching: {a.reasoning}\nlogic representation: {b.reasoning}",
                               feedback=fb if not verdict else "",
                               details={"requirements": reqs, "bfm": a.verdict, "logic": b.verdict,
                                        "functionality": a.details["functionality"], "logic_repr": b.details["logic"]})


class IceScoreJudge(_BashJudge):
    """ICE-Score functional correctness 0-4, reference-free; verdict = score >= threshold."""

    name = "ice"

    def __init__(self, threshold: float = 3.0):
        super().__init__()
        if not 0 <= threshold <= 4:
            raise ValueError(f"threshold must be within 0-4, got {threshold!r}")
        self.threshold = float(threshold)
        self.rate = dspy.Predict(IceSig)

    def forward(self, task: str, command: str) -> dspy.Prediction:
        out = self._run(self.rate, task=task, command=command)
        score = parse_score(out.score)
        verdict = score >= self.threshold
        reasoning = str(out.reasoning or "")
        fb = "" if verdict else f"functional correctness {score:g}/4: {reasoning}".strip()
        return dspy.Prediction(verdict=verdict, score=score, reasoning=reasoning, feedback=fb,
                               details={"score": score, "threshold": self.threshold})


JUDGES = {"bfm": FunctionalityMatchJudge, "logic": LogicRepresentationJudge,
          "combined": CombinedJudge, "ice": IceScoreJudge}


def make_bash_judge(name: str, **kw) -> _BashJudge:
    try:
        return JUDGES[name](**kw)
    except KeyError:
        raise ValueError(f"unknown bash judge {name!r}; one of {', '.join(JUDGES)}") from None


def all_judges(ice_threshold: float = 3.0) -> dict[str, _BashJudge]:
    return {"bfm": FunctionalityMatchJudge(), "logic": LogicRepresentationJudge(),
            "combined": CombinedJudge(), "ice": IceScoreJudge(threshold=ice_threshold)}


class JudgeVerifier:
    """A judge as a Verifier (item.inputs['task'], candidate command) -> Verdict, for loops and GEPA."""

    def __init__(self, judge: _BashJudge):
        self.judge = judge
        self.name = f"judge-{judge.name}"

    def verify(self, item, candidate) -> Verdict:
        cmd = candidate if isinstance(candidate, str) else getattr(candidate, "command", candidate)
        p = self.judge(task=item.inputs["task"], command=str(cmd or ""))
        return Verdict(score=float(p.verdict), passed=bool(p.verdict), stage="PASS" if p.verdict else "JUDGE",
                       feedback=p.feedback, backend=self.name,
                       details={"judge_score": p.score, "reasoning": p.reasoning})
