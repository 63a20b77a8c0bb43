"""The calls AutoRefine makes, for the dry-run estimate (`verifirst.loop.estimate`): the engine's
`estimate(builder)` adds its optimize-phase lines here and returns the tokens its result may add
to the judge's prompt."""
from __future__ import annotations

from typing import Any

from verifirst.judge.edits import EditApplier, EditProposer
from verifirst.judge.teacher import InformedTeacher
from verifirst.loop.estimate import (TYPICAL_FIELD_TOKENS, EstimateBuilder, Line, ceil_div, item_chars, mean,
                                     part_chars, tokens_of)


def autorefine_lines(engine: Any, b: EstimateBuilder) -> int:
    """AutoRefine: one teacher review per training item; iteration 0 and each iteration run the judge
    on train and validation; each iteration asks the proposer once per batch of disagreements (at
    most all training items) and the applier once.

    Args:
        engine: the AutoRefine engine (repeats, batch_size, length_cap, use_teacher).
        b: the estimate being built.
    """
    train, val = b.by_split["train"], b.by_split["val"]
    iters = 5 if b.budget.max_iters is None else int(b.budget.max_iters)
    repeats = int(engine.repeats or 1)
    batch = max(1, int(engine.batch_size or 6))
    cap = int(engine.length_cap or 4000)
    prompt = str(getattr(b.program, "prompt", "") or "")
    growth = tokens_of(max(0, cap - len(prompt)))  # the applier may grow the prompt up to the length cap
    if engine.use_teacher:
        chars = part_chars(b, lambda: InformedTeacher(sorted(train[0].inputs)).review.signature if train else None,
                           extra={"outcome_label": "PASS"})
        b.est.add(Line("optimize", b.teacher.role, "AutoRefine teacher: one review per training item", len(train),
                       (tokens_of(chars),) * 2, b.teacher.completion(2), b.teacher.model, b.teacher.price, "exact"))
    per_eval = len(train) + len(val) * (1 + (repeats if repeats > 1 else 0))
    b.program_lines(per_eval, "optimize", "AutoRefine iteration 0: the judge on train and validation", "exact")
    b.program_lines(per_eval * iters, "optimize", f"AutoRefine: the judge on train and validation, {iters} "
                    "iterations", "up to", growth)
    if iters:
        n_batches = ceil_div(len(train), batch)
        one = mean([item_chars(it) for it in train]) + 300  # a disagreement: the view, verdict, reasons
        pchars = [part_chars(b, lambda: EditProposer(batch).propose.signature,
                             extra={"judge_prompt": prompt, "feedback": "", "disagreements": "x" * int(n * one)})
                  for n in (1, min(len(train), batch))]  # one disagreement in a batch .. a full batch
        achars = part_chars(b, lambda: EditApplier().apply.signature,
                            extra={"judge_prompt": prompt, "edits": "x" * 600, "length_cap": str(cap), "feedback": ""})
        b.est.add(Line("optimize", b.reflection.role, f"AutoRefine proposer: one call per {batch} disagreements "
                       "(at most all training items)", n_batches * iters, (tokens_of(pchars[0]), tokens_of(pchars[1])),
                       b.reflection.completion(1, 6 * TYPICAL_FIELD_TOKENS), b.reflection.model, b.reflection.price,
                       "up to"))
        b.est.add(Line("optimize", b.reflection.role, "AutoRefine applier: one rewrite per iteration", iters,
                       (tokens_of(achars), tokens_of(achars) + growth),
                       b.reflection.completion(1, tokens_of(len(prompt)) + TYPICAL_FIELD_TOKENS), b.reflection.model,
                       b.reflection.price, "up to"))
    b.est.notes.append("AutoRefine stops early at its target agreement, at no disagreement or at no usable edit: its "
                       "iterations are a bound; items the teacher sets aside leave the loop (and are judged once for "
                       "the review queue)")
    return growth
