"""Code judges as DSPy modules: a pass/fail judge and a weighted-rubric judge.

Both read a view `x` (a dict of text fields, e.g. title/summary/diff or task/code) and
return a verdict PASS/FAIL with reasoning. The judge prompt is the predictor's signature
instructions; `judge.prompt` reads and sets it, so a calibration loop (or GEPA, which edits
the same instructions) changes what the judge does.

An LM that returns no parseable verdict raises `JudgeError`: an LM error is not a FAIL.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Sequence

import dspy

from verifirst.judge.template import bind_view, missing_variables, parse_view, render, template_variables
from verifirst.core.verdicts import FAIL, PASS, normalize_label

DEFAULT_PASSFAIL_PROMPT = (
    "You review a proposed code change or generated code before it is accepted. Read every "
    "field of the view. Answer PASS if the code does what the task asks and is safe to accept, "
    "FAIL if it is wrong, incomplete or unsafe. Explain your reasoning, then give the verdict."
)

DEFAULT_RUBRIC_PROMPT = (
    "You review a proposed code change or generated code against a rubric. For each check, "
    "give a score from 0 (not met) to 1 (fully met), keyed by the check name.\n"
    "Checks:\n"
    "- [w=3] correct: the code does what the task asks, including edge cases\n"
    "- [w=2] complete: nothing required is missing or left as a placeholder\n"
    "- [w=1] safe: no unsafe operations on untrusted input\n"
    "- [w=1] clear: the code is readable and consistent with the task's interface"
)

_CHECK_RE = re.compile(r"^\s*[-*]\s*\[w\s*=\s*([0-9]*\.?[0-9]+)\]\s*([A-Za-z0-9_\-]+)\s*:\s*(.+?)\s*$")


class JudgeError(RuntimeError):
    """The judge's LM failed or answered without a usable verdict."""


def normalize_verdict(value) -> str:
    """A judge's answer as PASS or FAIL; an answer that is neither raises JudgeError (an LM
    error, never a FAIL)."""
    label = normalize_label(value, prefix=True)
    if label is None:
        raise JudgeError(f"judge answered {value!r}, not PASS or FAIL")
    return label


def _signature(view_fields: Sequence[str], outputs: dict, instructions: str) -> type[dspy.Signature]:
    fields: dict = {}
    for name in view_fields:
        fields[name] = (str, dspy.InputField(desc=f"the {name.replace('_', ' ')} under review"))
    fields.update(outputs)
    return dspy.Signature(fields, instructions)


class _PromptedJudge(dspy.Module):
    """Shared prompt plumbing: the prompt lives in the predictor's signature instructions."""

    kind = "judge"

    def __init__(self, view_fields: Sequence[str], outputs: dict, prompt: str):
        super().__init__()
        if not view_fields:
            raise ValueError("a judge needs at least one view field")
        self.view_fields = list(view_fields)
        self.predict = dspy.Predict(_signature(self.view_fields, outputs, prompt))

    @property
    def prompt(self) -> str:
        return self.predict.signature.instructions

    @prompt.setter
    def prompt(self, text: str) -> None:
        self.predict.signature = self.predict.signature.with_instructions(str(text))

    def _call(self, view: dict):
        missing = [f for f in self.view_fields if f not in view]
        if missing:
            raise ValueError(f"view lacks field(s) {missing}; judge reads {self.view_fields}")
        try:
            return self.predict(**{f: str(view[f]) for f in self.view_fields})
        except JudgeError:
            raise
        except Exception as e:  # adapter parse failures, provider errors
            raise JudgeError(f"{type(e).__name__}: {e}") from e


class PassFailJudge(_PromptedJudge):
    """view -> reasoning, verdict (PASS | FAIL)."""

    kind = "passfail"

    def __init__(self, view_fields: Sequence[str], prompt: str = DEFAULT_PASSFAIL_PROMPT):
        outputs = {
            "reasoning": (str, dspy.OutputField(desc="why the code should pass or fail, citing the view")),
            "verdict": (Literal["PASS", "FAIL"], dspy.OutputField(desc="PASS or FAIL")),
        }
        super().__init__(view_fields, outputs, prompt)

    def forward(self, **view) -> dspy.Prediction:
        out = self._call(view)
        return dspy.Prediction(verdict=normalize_verdict(out.verdict), reasoning=str(out.reasoning or ""),
                               score=None)

    def copy_with_prompt(self, prompt: str) -> "PassFailJudge":
        new = self.deepcopy()
        new.prompt = prompt
        return new


@dataclass(frozen=True)
class Check:
    name: str
    weight: float
    description: str


def parse_checks(prompt: str) -> list[Check]:
    """Checks are prompt lines `- [w=2] name: description`; edits to the prompt edit them."""
    out, seen = [], set()
    for line in prompt.splitlines():
        m = _CHECK_RE.match(line)
        if m and m.group(2) not in seen:
            seen.add(m.group(2))
            out.append(Check(m.group(2), float(m.group(1)), m.group(3)))
    return out


def parse_check_scores(checks: Sequence[Check], raw) -> dict[str, float]:
    """The judge's per-check scores as numbers; an answer that is no such mapping is a JudgeError.

    Not a mapping, a score that is not a number, or none of the rubric's checks scored: the judge
    said nothing we can weigh, which is an LM error (counted apart), never a FAIL.

    Args:
        checks: the rubric's checks (from the prompt).
        raw: the `check_scores` output field as the adapter parsed it.
    """
    if not isinstance(raw, dict):
        raise JudgeError(f"rubric judge answered check_scores={raw!r:.200}, not a mapping of check name to score")
    scores: dict[str, float] = {}
    for name, value in raw.items():
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise JudgeError(f"rubric judge scored check {name!r} with {value!r:.80}, not a number") from None
        if v != v:  # NaN
            raise JudgeError(f"rubric judge scored check {name!r} with NaN")
        scores[str(name)] = v
    if checks and not any(c.name in scores for c in checks):
        raise JudgeError(f"rubric judge scored none of the checks {[c.name for c in checks]} "
                         f"(answered keys {sorted(scores)[:8]})")
    return scores


def weighted_score(checks: Sequence[Check], scores: dict) -> float:
    """Weighted mean of per-check scores clipped to [0, 1]; an unscored check counts 0."""
    total = sum(c.weight for c in checks)
    if total <= 0:
        raise JudgeError("rubric has no weighted checks (lines like `- [w=1] name: description`)")
    got = 0.0
    for c in checks:
        try:
            v = float((scores or {}).get(c.name, 0.0))
        except (TypeError, ValueError):
            v = 0.0
        got += c.weight * min(1.0, max(0.0, v))
    return got / total


class RubricJudge(_PromptedJudge):
    """view -> reasoning, per-check scores -> weighted score -> verdict at `threshold`."""

    kind = "rubric"

    def __init__(self, view_fields: Sequence[str], prompt: str = DEFAULT_RUBRIC_PROMPT,
                 threshold: float = 0.5):
        outputs = {
            "reasoning": (str, dspy.OutputField(desc="how the code meets or misses each check")),
            "check_scores": (dict[str, float], dspy.OutputField(desc="check name -> score in [0, 1]")),
        }
        super().__init__(view_fields, outputs, prompt)
        self.threshold = float(threshold)

    @property
    def checks(self) -> list[Check]:
        return parse_checks(self.prompt)

    def forward(self, **view) -> dspy.Prediction:
        checks = self.checks
        if not checks:
            raise JudgeError("rubric prompt lists no checks (lines like `- [w=1] name: description`)")
        out = self._call(view)
        scores = parse_check_scores(checks, out.check_scores)
        score = weighted_score(checks, scores)
        return dspy.Prediction(verdict=PASS if score >= self.threshold else FAIL,
                               reasoning=str(out.reasoning or ""), score=score, check_scores=scores)

    def dump_state(self, json_mode=True):
        # the threshold is chosen with the prompt (on train): a saved judge keeps both
        return {**super().dump_state(json_mode=json_mode), "threshold": self.threshold}

    def load_state(self, state, **kwargs):
        super().load_state(state, **kwargs)
        if "threshold" in state:
            self.threshold = float(state["threshold"])
        return self

    def verdict_at(self, score: float, threshold: float | None = None) -> str:
        return PASS if score >= (self.threshold if threshold is None else threshold) else FAIL

    def copy_with_prompt(self, prompt: str) -> "RubricJudge":
        new = self.deepcopy()
        new.prompt = prompt
        return new


# A template judge's own instructions: what to do with the rendered template (which holds the user's prompt).
TEMPLATE_INSTRUCTIONS = (
    "The request below is a code reviewer's instructions with the material under review filled in. "
    "Follow its instructions exactly: explain your reasoning, then give the verdict it asks for.")


class _TemplateJudgeMixin:
    """A judge whose prompt is the user's template: each call renders it with the record's fields.

    The predictor's signature instructions hold the template (variables kept as `{{ name }}`), so
    saving, hashing and diffing the program, and any optimizer that edits instructions, see the
    user's prompt. Each call sends the rendered template as the `request` input under short fixed
    instructions (the template is sent once, filled in). An edit that drops a variable is refused.
    """

    def _init_template(self, template: str, binding: dict[str, list[str]]) -> None:
        self.binding = {v: list(fs) for v, fs in binding.items()}
        self.template_variables = list(self.binding)
        self.view_fields = sorted({f for fs in self.binding.values() for f in fs})
        self.predict.signature = self.predict.signature.with_instructions(str(template))

    @property
    def template(self) -> str:
        return self.predict.signature.instructions

    @property
    def prompt(self) -> str:
        return self.predict.signature.instructions

    @prompt.setter
    def prompt(self, text: str) -> None:
        lost = missing_variables(str(text), self.template_variables)
        if lost:
            raise ValueError(f"the new prompt lost template variable(s) {lost}")
        self.predict.signature = self.predict.signature.with_instructions(str(text))

    def render(self, view: dict) -> str:
        return render(self.template, self.binding, view)

    def _call(self, view: dict):
        missing = [f for f in self.view_fields if f not in view]
        if missing:
            raise ValueError(f"view lacks field(s) {missing}; judge reads {self.view_fields}")
        try:
            call_signature = self.predict.signature.with_instructions(TEMPLATE_INSTRUCTIONS)
            return self.predict(signature=call_signature, request=self.render(view))
        except JudgeError:
            raise
        except Exception as e:  # adapter parse failures, provider errors
            raise JudgeError(f"{type(e).__name__}: {e}") from e

    def dump_state(self, json_mode=True):
        # the template is in the signature's instructions; a saved judge also keeps its field binding
        return {**super().dump_state(json_mode=json_mode), "binding": self.binding}

    def load_state(self, state, **kwargs):
        super().load_state(state, **kwargs)
        if "binding" in state:
            self._init_template(self.template, state["binding"])
        return self


class TemplatePassFailJudge(_TemplateJudgeMixin, PassFailJudge):
    """The user's pass/fail template, rendered per record -> reasoning, verdict."""

    def __init__(self, template: str, binding: dict[str, list[str]]):
        PassFailJudge.__init__(self, ["request"], template)
        self._init_template(template, binding)


class TemplateRubricJudge(_TemplateJudgeMixin, RubricJudge):
    """The user's rubric template (check lines `- [w=N] name: ...`), rendered per record."""

    def __init__(self, template: str, binding: dict[str, list[str]], threshold: float = 0.5):
        RubricJudge.__init__(self, ["request"], template, threshold)
        self._init_template(template, binding)


def make_judge(kind: str, view_fields: Sequence[str], prompt: str | None = None, view=None, **kw):
    """A judge program by kind; a prompt with `{{ variable }}` slots becomes a template judge.

    Args:
        kind: "passfail" or "rubric".
        view_fields: the record fields available to the judge.
        prompt: the starting prompt (default: the kind's default prompt).
        view: the --view spec mapping record fields to template variables ("title,diff" or
            "diff=patch"); for a prompt without variables, the fields the judge reads.
        kw: RubricJudge options (threshold).
    """
    if kind not in ("passfail", "rubric"):
        raise ValueError(f"unknown judge kind {kind!r}; one of passfail, rubric")
    if prompt and template_variables(prompt):
        binding = bind_view(prompt, view, view_fields)
        if kind == "passfail":
            return TemplatePassFailJudge(prompt, binding)
        return TemplateRubricJudge(prompt, binding, **kw)
    if view:
        have = set(view_fields)
        fields = [f for f, _ in parse_view(view)]
        unknown = [f for f in fields if f not in have]
        if unknown:
            from verifirst.core.errors import InputError

            raise InputError(f"--view names field(s) {unknown} the records do not have", field="--view",
                             expected="one of: " + ", ".join(sorted(have)))
        view_fields = fields
    if kind == "passfail":
        return PassFailJudge(view_fields, prompt or DEFAULT_PASSFAIL_PROMPT)
    return RubricJudge(view_fields, prompt or DEFAULT_RUBRIC_PROMPT, **kw)
