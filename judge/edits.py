"""Disagreement analysis -> balanced prompt edits -> a rewrite under a length cap (S2 §II-B).

Two rules are enforced in code, not only asked for:
- balance: every new reason to FAIL is paired with a new reason to PASS (and vice versa),
  so the judge cannot drift toward rejecting (or accepting) everything. One re-ask names the
  unpaired edits; whatever is still unpaired is dropped.
- length cap: the rewritten prompt must fit `length_cap` characters and contain every kept
  rule. One re-ask, then a deterministic application; pairs are dropped from the end until
  it fits; if even that fails the prompt is left unchanged.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Literal, Sequence

import dspy
import pydantic

RULES_HEADER = "Rules learned from outcomes:"
FIELD_CHARS = 1500  # per view field shown to the proposer: enough context, bounded prompt


class EditModel(pydantic.BaseModel):
    op: Literal["add", "remove", "replace"] = "add"
    direction: Literal["FAIL", "PASS"] = pydantic.Field(
        description="the verdict the edit pushes toward: FAIL = a new reason to fail")
    rule: str = pydantic.Field(description="the rule text to add (for add/replace)")
    target: str = pydantic.Field(default="", description="existing prompt text to remove/replace")


@dataclass
class Edit:
    op: str
    direction: str
    rule: str
    target: str = ""

    @classmethod
    def coerce(cls, raw) -> "Edit | None":
        if isinstance(raw, Edit):
            return raw
        if isinstance(raw, pydantic.BaseModel):
            raw = raw.model_dump()
        if not isinstance(raw, dict):
            return None
        op = str(raw.get("op", "add")).lower()
        direction = str(raw.get("direction", "")).upper()
        rule = " ".join(str(raw.get("rule", "")).split())
        target = str(raw.get("target", "") or "").strip()
        if op not in ("add", "remove", "replace") or direction not in ("FAIL", "PASS"):
            return None
        if op in ("add", "replace") and not rule:
            return None
        if op in ("remove", "replace") and not target:
            return None
        return cls(op, direction, rule, target)

    @property
    def adds_reason(self) -> bool:
        return self.op in ("add", "replace")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Disagreement:
    id: str
    view: dict
    label: str
    verdict: str
    reasoning: str
    justification: str = ""


class ProposeEdits(dspy.Signature):
    """You improve a code judge's prompt. Each disagreement shows what the judge saw, its verdict and
    reasoning, the correct outcome and a justification for that outcome. Propose general rules (not
    about one sample) that make the judge reproduce the outcomes. Edits must be balanced: every new
    reason to FAIL must come with a paired new reason to PASS, so the judge does not drift toward
    rejecting everything. Prefer few, precise edits; use remove/replace for rules that misled it."""

    judge_prompt: str = dspy.InputField(desc="the judge's current prompt")
    disagreements: str = dspy.InputField()
    feedback: str = dspy.InputField(desc="problems with a previous proposal; empty if none")
    edits: list[EditModel] = dspy.OutputField()


class ApplyEdits(dspy.Signature):
    """Rewrite the judge prompt so it includes every edit below (add the rules, remove or replace the
    targets), keeping its other instructions, any rubric check lines `- [w=N] name: ...` and every
    template variable `{{ name }}` exactly as written. The result must be at most `length_cap`
    characters. Return only the new prompt."""

    judge_prompt: str = dspy.InputField()
    edits: str = dspy.InputField()
    length_cap: int = dspy.InputField()
    feedback: str = dspy.InputField(desc="problems with a previous rewrite; empty if none")
    new_prompt: str = dspy.OutputField()


def format_disagreements(items: Sequence[Disagreement]) -> str:
    blocks = []
    for n, d in enumerate(items, start=1):
        view = "\n".join(f"  {k}: {_clip(v)}" for k, v in d.view.items())
        blocks.append(f"### Disagreement {n}\noutcome: {d.label}\njudge verdict: {d.verdict}\n"
                      f"judge reasoning: {d.reasoning}\njustification: {d.justification or '(none)'}\n"
                      f"view:\n{view}")
    return "\n\n".join(blocks)


def _clip(v, n: int = FIELD_CHARS) -> str:
    s = str(v)
    return s if len(s) <= n else s[:n] + f" ...[{len(s) - n} more chars]"


def balance(edits: Sequence[Edit]) -> tuple[list[Edit], list[Edit]]:
    """Pair new FAIL reasons with new PASS reasons in order; removals need no pair.

    Returns (kept, dropped). Kept always has as many FAIL-reason edits as PASS-reason ones.
    """
    fails = [e for e in edits if e.adds_reason and e.direction == "FAIL"]
    passes = [e for e in edits if e.adds_reason and e.direction == "PASS"]
    k = min(len(fails), len(passes))
    keep_ids = {id(e) for e in fails[:k] + passes[:k]}
    kept = [e for e in edits if not e.adds_reason or id(e) in keep_ids]
    dropped = [e for e in edits if e.adds_reason and id(e) not in keep_ids]
    return kept, dropped


def is_balanced(edits: Sequence[Edit]) -> bool:
    f = sum(e.adds_reason and e.direction == "FAIL" for e in edits)
    p = sum(e.adds_reason and e.direction == "PASS" for e in edits)
    return f == p


def dedupe(edits: Sequence[Edit], prompt: str) -> list[Edit]:
    """Drop repeats and additions already present in the prompt."""
    seen, out = set(), []
    low = _norm(prompt)
    for e in edits:
        key = (e.op, e.direction, _norm(e.rule), _norm(e.target))
        if key in seen or (e.op == "add" and _norm(e.rule) in low):
            continue
        seen.add(key)
        out.append(e)
    return out


def _norm(s: str) -> str:
    return " ".join(str(s).lower().split())


def pairs_in_order(edits: Sequence[Edit]) -> list[list[Edit]]:
    """Balanced units to drop together when the prompt must shrink (removals are singletons)."""
    fails = [e for e in edits if e.adds_reason and e.direction == "FAIL"]
    passes = [e for e in edits if e.adds_reason and e.direction == "PASS"]
    units = [[f, p] for f, p in zip(fails, passes)]
    units += [[e] for e in edits if not e.adds_reason]
    return units


def apply_deterministic(prompt: str, edits: Sequence[Edit]) -> str:
    """Plain application: removals/replacements by substring, additions as bullet lines."""
    text = prompt
    for e in edits:
        if e.op in ("remove", "replace") and e.target and e.target in text:
            text = text.replace(e.target, e.rule if e.op == "replace" else "", 1)
    adds = [e.rule for e in edits if e.op == "add" or (e.op == "replace" and e.target not in prompt)]
    lines = [ln for ln in text.rstrip().splitlines()]
    text = "\n".join(lines)
    if adds:
        if RULES_HEADER not in text:
            text += f"\n{RULES_HEADER}"
        text += "".join(f"\n- {r}" for r in adds)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def missing_from(new_prompt: str, edits: Sequence[Edit]) -> list[str]:
    """What a rewrite failed to carry out: absent added rules, surviving removal targets."""
    low = _norm(new_prompt)
    problems = []
    for e in edits:
        if e.adds_reason and _norm(e.rule) not in low:
            problems.append(f"missing rule: {e.rule}")
        if e.op == "remove" and e.target and _norm(e.target) in low:
            problems.append(f"not removed: {e.target}")
    return problems


@dataclass
class EditRound:
    """What one iteration's analysis did, for the checkpoint and the report."""

    proposed: list[dict] = field(default_factory=list)
    kept: list[dict] = field(default_factory=list)
    dropped_unbalanced: list[dict] = field(default_factory=list)
    dropped_for_length: list[dict] = field(default_factory=list)
    proposer_calls: int = 0
    rebalance_asked: bool = False
    applier: str = "lm"  # lm | lm-retry | deterministic | unchanged
    applier_problems: list[str] = field(default_factory=list)
    prompt_chars: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


class EditProposer(dspy.Module):
    def __init__(self, batch_size: int = 6):
        super().__init__()
        self.batch_size = max(1, int(batch_size))
        self.propose = dspy.Predict(ProposeEdits)

    def _ask(self, prompt: str, batch: Sequence[Disagreement], feedback: str, rnd: EditRound) -> list[Edit]:
        rnd.proposer_calls += 1
        try:
            out = self.propose(judge_prompt=prompt, disagreements=format_disagreements(batch),
                               feedback=feedback)
        except Exception as e:  # a failed proposal call costs edits, not the run
            rnd.errors.append(f"propose: {type(e).__name__}: {e}")
            return []
        return [x for x in (Edit.coerce(r) for r in (out.edits or [])) if x is not None]

    def forward(self, prompt: str, disagreements: Sequence[Disagreement], rnd: EditRound) -> list[Edit]:
        edits: list[Edit] = []
        for start in range(0, len(disagreements), self.batch_size):
            batch = disagreements[start:start + self.batch_size]
            got = self._ask(prompt, batch, "", rnd)
            if not is_balanced(got):
                rnd.rebalance_asked = True
                unpaired = balance(got)[1]
                fb = ("Unbalanced proposal. Pair each of these with a new rule pushing the other way, "
                      "or drop it: " + json.dumps([e.to_dict() for e in unpaired]))
                retry = self._ask(prompt, batch, fb, rnd)
                got = retry if retry else got
            edits.extend(got)
        return edits


class EditApplier(dspy.Module):
    def __init__(self):
        super().__init__()
        self.apply = dspy.Predict(ApplyEdits)

    def _ask(self, prompt, edits, cap, feedback, rnd) -> str | None:
        try:
            out = self.apply(judge_prompt=prompt, edits=json.dumps([e.to_dict() for e in edits], indent=1),
                             length_cap=int(cap), feedback=feedback)
            return str(out.new_prompt or "").strip()
        except Exception as e:
            rnd.errors.append(f"apply: {type(e).__name__}: {e}")
            return None

    def _problems(self, text: str | None, edits, cap, needs_checks: bool, variables: Sequence[str] = ()) -> list[str]:
        if not text:
            return ["empty rewrite"]
        probs = missing_from(text, edits)
        from verifirst.judge.template import missing_variables

        probs += [f"template variable {{{{ {v} }}}} was lost" for v in missing_variables(text, variables)]
        if len(text) > cap:
            probs.append(f"too long: {len(text)} chars > cap {cap}")
        if needs_checks:
            from verifirst.judge.programs import parse_checks

            if not parse_checks(text):
                probs.append("rubric check lines `- [w=N] name: description` were lost")
        return probs

    def forward(self, prompt: str, edits: Sequence[Edit], cap: int, rnd: EditRound,
                needs_checks: bool = False, variables: Sequence[str] = ()) -> str:
        """The prompt with `edits` applied under `cap` chars, keeping rubric checks and the
        template `variables` (an LM rewrite, one re-ask, then deterministic application)."""
        edits = list(edits)
        text = self._ask(prompt, edits, cap, "", rnd)
        probs = self._problems(text, edits, cap, needs_checks, variables)
        if probs:
            rnd.applier_problems.extend(probs)
            text = self._ask(prompt, edits, cap, "Fix these problems: " + "; ".join(probs), rnd)
            probs = self._problems(text, edits, cap, needs_checks, variables)
            rnd.applier = "lm-retry"
        if not probs:
            rnd.prompt_chars = len(text)
            return text
        rnd.applier_problems.extend(probs)
        rnd.applier = "deterministic"
        units = pairs_in_order(edits)
        while units:
            flat = [e for u in units for e in u]
            text = apply_deterministic(prompt, flat)
            if not self._problems(text, flat, cap, needs_checks, variables):
                rnd.kept = [e.to_dict() for e in flat]
                rnd.prompt_chars = len(text)
                return text
            rnd.dropped_for_length.extend(e.to_dict() for e in units.pop())
        rnd.applier, rnd.kept = "unchanged", []
        rnd.prompt_chars = len(prompt)
        return prompt
