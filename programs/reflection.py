"""Reflection agents for NL->Bash (S0): self-reflection, and reflection driven by a judge.

`SelfReflectionAgent`: the model critiques its own command and rewrites it until it calls the
command correct or `max_attempts` commands have been produced.
`EvaluatorReflectionAgent`: a dedicated evaluator (any bash judge) decides; its verdict stops
the loop, its feedback drives the next rewrite, at most `max_attempts` commands in all.

Rewrites arrive as mixed text; `_extract.extract_command` pulls the command out. An
unusable rewrite keeps the previous command and is counted (prediction `extraction_failures`,
agent `extraction` stats), so the extraction step is measured, not done by hand.
Both take `initial=` to start from an existing command (paired experiments share one draft).
"""
from __future__ import annotations

from typing import Any

import dspy

from ._extract import Extraction, ExtractionStats, extract_command
from .bash import BashGenerator
from .bash_judges import BashJudgeError


class SelfReflect(dspy.Signature):
    """Review your Bash command for the task. Check every requirement of the task, the exact
    output format, quoting, options and side effects. Say whether it is correct; if it is not,
    write the corrected command."""

    task: str = dspy.InputField(desc="what the command must do")
    command: str = dspy.InputField(desc="your current bash command")
    critique: str = dspy.OutputField(desc="what is wrong with the command, or why it is right")
    correct: bool = dspy.OutputField(desc="true if the command already does exactly what is asked")
    revised_command: str = dspy.OutputField(desc="the corrected bash command (the same one if correct)")


class ReviseWithFeedback(dspy.Signature):
    """An evaluator rejected your Bash command for the task. Fix every problem its feedback
    names and return the corrected command only."""

    task: str = dspy.InputField(desc="what the command must do")
    command: str = dspy.InputField(desc="the rejected bash command")
    feedback: str = dspy.InputField(desc="the evaluator's reasons for rejecting it")
    revised_command: str = dspy.OutputField(desc="the corrected bash command")


class _Stats(ExtractionStats):
    def __deepcopy__(self, memo):  # module copies (GEPA, deepcopy) get fresh counters
        return _Stats()


class _ReflectionBase(dspy.Module):
    output_field = "command"

    def __init__(self, generator: dspy.Module | None, max_attempts: int):
        super().__init__()
        if int(max_attempts) < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts!r}")
        self.generator = generator if generator is not None else BashGenerator("predict")
        self.max_attempts = int(max_attempts)
        self.extraction = _Stats()

    def _extract(self, raw: Any) -> Extraction:
        ex = extract_command(None if raw is None else str(raw))
        self.extraction.add(ex)
        return ex

    def _draft(self, task: str, initial: str | None) -> dict:
        if initial is not None:
            return {"command": initial, "raw": initial, "method": "given", "extracted": True}
        raw = self.generator(task=task).command
        ex = self._extract(raw)
        # nothing earlier to fall back on: the raw draft is what gets run
        cmd = ex.command if ex.ok else str(raw or "").strip()
        return {"command": cmd, "raw": raw, "method": ex.method, "extracted": ex.ok}

    def _revision(self, raw: Any, previous: str) -> dict:
        ex = self._extract(raw)
        return {"command": ex.command if ex.ok else previous, "raw": raw, "method": ex.method, "extracted": ex.ok}

    @staticmethod
    def _result(attempts: list[dict], accepted: bool | None, stop: str) -> dspy.Prediction:
        return dspy.Prediction(command=attempts[-1]["command"], attempts=attempts, n_attempts=len(attempts),
                               accepted=accepted, stop_reason=stop,
                               extraction_failures=sum(1 for a in attempts if not a["extracted"]))


class SelfReflectionAgent(_ReflectionBase):
    """Generate, then self-critique and rewrite until the model calls it correct."""

    def __init__(self, generator: dspy.Module | None = None, max_attempts: int = 2):
        super().__init__(generator, max_attempts)
        self.reflect = dspy.Predict(SelfReflect)

    def forward(self, task: str, initial: str | None = None) -> dspy.Prediction:
        attempts = [self._draft(task, initial)]
        while len(attempts) < self.max_attempts:
            out = self.reflect(task=task, command=attempts[-1]["command"])
            attempts[-1]["critique"] = str(out.critique or "")
            if bool(out.correct):
                return self._result(attempts, True, "self_accepted")
            attempts.append(self._revision(out.revised_command, attempts[-1]["command"]))
        return self._result(attempts, None, "max_attempts")


class EvaluatorReflectionAgent(_ReflectionBase):
    """Generate; a judge accepts (stop) or rejects with feedback that drives a rewrite."""

    def __init__(self, judge: dspy.Module, generator: dspy.Module | None = None, max_attempts: int = 3):
        super().__init__(generator, max_attempts)
        self.judge = judge
        self.revise = dspy.Predict(ReviseWithFeedback)

    def forward(self, task: str, initial: str | None = None) -> dspy.Prediction:
        attempts = [self._draft(task, initial)]
        verdict = None
        while True:
            cur = attempts[-1]
            if verdict is None or cur["extracted"]:  # an unusable rewrite keeps the command: same verdict
                try:
                    verdict = self.judge(task=task, command=cur["command"])
                except BashJudgeError as e:
                    cur["judge_error"] = str(e)
                    return self._result(attempts, None, "judge_error")
            cur["verdict"], cur["feedback"] = bool(verdict.verdict), str(verdict.feedback or "")
            if verdict.verdict:
                return self._result(attempts, True, "judge_accepted")
            if len(attempts) >= self.max_attempts:
                return self._result(attempts, False, "max_attempts")
            feedback = cur["feedback"] or "the evaluator judged the command incorrect for the task"
            out = self.revise(task=task, command=cur["command"], feedback=feedback)
            attempts.append(self._revision(out.revised_command, cur["command"]))
