"""The informed teacher (S2 §II-C): sees exactly the judge's view x plus the outcome y.

Per training sample it KEEPs the label with a justification grounded in x, CORRECTs it
when x clearly contradicts it, or abstains (SKIP) when y cannot be explained from x.
Abstained samples leave calibration; the abstention rate by label and by metadata is a
monitoring signal (many abstentions: the judge needs better inputs, not a better prompt).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import Any, Callable, Literal, Sequence

import dspy

from verifirst.core.stats import fisher_exact
from verifirst.core.task import Item
from verifirst.judge.failfast import FIRST_CALLS_ALL_FAILED, not_sent
from verifirst.judge.pool import Threads, as_pool

KEEP, CORRECT, SKIP, ERROR = "KEEP", "CORRECT", "SKIP", "ERROR"
OUTCOME_FIELD = "outcome_label"

TEACHER_PROMPT = (
    "You curate training labels for a code judge. You see exactly what the judge sees, plus the "
    "outcome the workflow recorded (PASS or FAIL). Decide:\n"
    "KEEP: the outcome is explained by something visible in the view; write a justification "
    "that cites the specific evidence (lines, calls, missing pieces) in the view.\n"
    "CORRECT: the view clearly and unambiguously contradicts the outcome; justify with evidence.\n"
    "SKIP: the outcome cannot be explained from the view (e.g. it depends on hidden tests, scope, "
    "process or infrastructure). Prefer SKIP over a low-confidence CORRECT; never invent a reason."
)


@dataclass
class TeacherDecision:
    id: str
    label: str  # the outcome as recorded
    decision: str  # KEEP | CORRECT | SKIP | ERROR
    final_label: str | None  # label used for calibration; None when set aside
    justification: str = ""
    error: str | None = None

    @property
    def kept(self) -> bool:
        return self.decision in (KEEP, CORRECT)

    def to_dict(self) -> dict:
        return asdict(self)


def _flip(label: str) -> str:
    return "FAIL" if label == "PASS" else "PASS"


class InformedTeacher(dspy.Module):
    def __init__(self, view_fields: Sequence[str], prompt: str = TEACHER_PROMPT):
        super().__init__()
        self.view_fields = list(view_fields)
        if OUTCOME_FIELD in self.view_fields:
            raise ValueError(f"view field name {OUTCOME_FIELD!r} is reserved for the outcome")
        fields: dict = {f: (str, dspy.InputField()) for f in self.view_fields}
        fields[OUTCOME_FIELD] = (Literal["PASS", "FAIL"], dspy.InputField(desc="the recorded outcome"))
        fields["justification"] = (str, dspy.OutputField(desc="evidence from the view for the decision"))
        fields["decision"] = (Literal["KEEP", "CORRECT", "SKIP"], dspy.OutputField())
        self.review = dspy.Predict(dspy.Signature(fields, prompt))

    def forward(self, view: dict, label: str) -> dspy.Prediction:
        out = self.review(**{f: str(view[f]) for f in self.view_fields}, **{OUTCOME_FIELD: label})
        decision = str(out.decision or "").strip().upper()
        if decision not in (KEEP, CORRECT, SKIP):
            raise ValueError(f"teacher answered {out.decision!r}, not KEEP/CORRECT/SKIP")
        return dspy.Prediction(decision=decision, justification=str(out.justification or ""))


def review_one(teacher: InformedTeacher, item: Item, lm=None) -> TeacherDecision:
    label = item.gold["label"]
    try:
        with dspy.context(lm=lm) if lm is not None else nullcontext():
            out = teacher(view=dict(item.inputs), label=label)
    except Exception as e:  # an LM failure is recorded, never turned into a label
        return TeacherDecision(item.id, label, ERROR, None, "", f"{type(e).__name__}: {e}")
    final = label if out.decision == KEEP else _flip(label) if out.decision == CORRECT else None
    return TeacherDecision(item.id, label, out.decision, final, out.justification)


def run_teacher(teacher: InformedTeacher, items: Sequence[Item], lm=None, threads: Threads = 1,
                done: dict[str, TeacherDecision] | None = None,
                on_progress: Callable[[dict[str, TeacherDecision]], None] | None = None,
                progress_every: int = 16,
                on_item: Callable[[Item, TeacherDecision], None] | None = None) -> dict[str, TeacherDecision]:
    """Review every item not already in `done`; `on_progress` checkpoints partial results, `on_item` is told
    each review as it is made (in its thread); `threads` is the run's Pool, or a count."""
    pool = as_pool(threads)
    results = dict(done or {})
    todo = [it for it in items if it.id not in results]

    def one(it: Item) -> TeacherDecision:
        d = review_one(teacher, it, lm)
        if on_item is not None:
            on_item(it, d)
        return d

    for start in range(0, len(todo), progress_every):
        chunk = todo[start:start + progress_every]
        got = pool.map(one, chunk)
        for d in got:
            results[d.id] = d
        if on_progress:
            on_progress(results)
    return results


def _rate_row(decisions: list[TeacherDecision]) -> dict:
    c = Counter(d.decision for d in decisions)
    n = len(decisions)
    return {"n": n, "keep": c[KEEP], "correct": c[CORRECT], "skip": c[SKIP], "error": c[ERROR],
            "skip_rate": c[SKIP] / n if n else 0.0}


def abstention_stats(items: Sequence[Item], decisions: dict[str, TeacherDecision],
                     meta_fields: Sequence[str] | None = None, max_levels: int = 20) -> dict:
    """Keep/correct/skip counts overall, by recorded label and by metadata field.

    Meta fields default to every field with 2..max_levels distinct scalar values. Each
    breakdown with exactly two levels carries a Fisher exact test of skip rates.
    """
    rows = [(it, decisions[it.id]) for it in items if it.id in decisions]
    out: dict[str, Any] = {"overall": _rate_row([d for _, d in rows])}
    by_label: dict[str, list] = defaultdict(list)
    for it, d in rows:
        by_label[d.label].append(d)
    out["by_label"] = {k: _rate_row(v) for k, v in sorted(by_label.items())}
    out["by_label_fisher"] = _fisher(by_label)
    if meta_fields is None:
        levels: dict[str, set] = defaultdict(set)
        for it, _ in rows:
            for k, v in it.meta.items():
                if isinstance(v, (str, int, bool)) or v is None:
                    levels[k].add(v)
        meta_fields = [k for k, vs in sorted(levels.items()) if 2 <= len(vs) <= max_levels]
    by_meta = {}
    for field in meta_fields:
        groups: dict[str, list] = defaultdict(list)
        for it, d in rows:
            groups[str(it.meta.get(field))].append(d)
        by_meta[field] = {"levels": {k: _rate_row(v) for k, v in sorted(groups.items())},
                          "fisher": _fisher(groups)}
    out["by_meta"] = by_meta
    return out


def _fisher(groups: dict[str, list]) -> dict | None:
    if len(groups) != 2:
        return None
    (a, da), (b, db) = sorted(groups.items())
    sa = sum(d.decision == SKIP for d in da)
    sb = sum(d.decision == SKIP for d in db)
    res = fisher_exact([[sa, len(da) - sa], [sb, len(db) - sb]])
    return {"levels": [a, b], "skip": [sa, sb], "n": [len(da), len(db)],
            "odds_ratio": res.odds_ratio, "p_value": res.p_value}


def review_items(view_fields: Sequence[str], items: Sequence[Item], lm=None, threads: Threads = 1,
                 fail_fast: bool = False,
                 on_item: Callable[[Item, TeacherDecision], None] | None = None) -> dict[str, dict]:
    """The informed teacher AutoRefine runs, on these items with their recorded labels (a monitoring
    window): item id -> {"decision": KEEP | CORRECT | SKIP | ERROR, "final_label", "justification",
    "error"}. SKIP is an abstention: the outcome cannot be explained from what the judge sees.

    Args:
        view_fields: the fields the judge reads (the teacher sees exactly those).
        items: the items, each with gold["label"] PASS/FAIL.
        lm: the teacher's LM (None: the configured one).
        threads: teacher calls in parallel (a Pool, or a count).
        fail_fast: stop asking once the first FIRST_CALLS_ALL_FAILED reviews all failed (an endpoint
            that is down): the items not asked get decision ERROR and an error saying so.
        on_item: told each item and its decision as it is reviewed (progress).
    """
    teacher = InformedTeacher(view_fields)
    if not fail_fast:
        decisions = run_teacher(teacher, items, lm, threads, on_item=on_item)
        return {k: d.to_dict() for k, d in decisions.items()}
    items = list(items)
    first = run_teacher(teacher, items[:FIRST_CALLS_ALL_FAILED], lm, threads, on_item=on_item)
    if len(first) >= FIRST_CALLS_ALL_FAILED and all(d.decision == ERROR for d in first.values()):
        why = not_sent(next(d.error for d in first.values()), len(first))
        rest = {it.id: TeacherDecision(it.id, it.gold["label"], ERROR, None, "", why)
                for it in items[FIRST_CALLS_ALL_FAILED:]}
    else:
        rest = run_teacher(teacher, items[FIRST_CALLS_ALL_FAILED:], lm, threads, on_item=on_item)
    decisions = {**first, **rest}
    return {it.id: decisions[it.id].to_dict() for it in items}
