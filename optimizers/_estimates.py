"""The calls AutoRefine and SIMBA make, for the dry-run estimate (`verifirst.loop.estimate`): each
engine's `estimate(builder)` adds its optimize-phase lines here and returns the tokens its result
may add to the program's prompt. GEPA's model is dspy.GEPA's (`estimate.gepa_lines`)."""
from __future__ import annotations

from typing import Any

from verifirst.loop.estimate import (PLACEHOLDER_CHARS, TYPICAL_FIELD_TOKENS, EstimateBuilder, Line, ceil_div,
                                     item_chars, mean, part_chars, tokens_of)

from ._edits import EditApplier, EditProposer
from ._teacher import InformedTeacher


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


def simba_lines(engine: Any, b: EstimateBuilder) -> int:
    """SIMBA: steps x bsize x num_candidates trajectories, up to num_candidates + 1 new candidates per step
    on its batch (one rule each from the reflection LM), then the finalists on train and on validation.
    The steps are the engine's (`SIMBAEngine.steps`: max_iters, capped by max_metric_calls).

    Args:
        engine: the SIMBA engine (bsize, num_candidates, steps).
        b: the estimate being built.
    """
    train, val = b.by_split["train"], b.by_split["val"]
    bsize = engine.batch_size(len(train))
    nc = int(engine.num_candidates)
    steps = engine.steps(b.budget, len(train), len(val))
    new = min(bsize, nc + 1)  # one candidate per bucket, bsize buckets
    finalists = min(steps + 1, nc + 1)
    b.program_lines(steps * bsize * nc, "optimize", f"SIMBA: {steps} steps x {bsize} items x {nc} trajectories",
                    "exact")
    b.program_lines(steps * bsize * new, "optimize", "SIMBA: new candidates on each step's batch", "up to")
    b.program_lines(finalists * (len(train) + len(val)), "optimize", "SIMBA: candidates on train, then on "
                    "validation", "up to")
    b.est.add(Line("optimize", b.reflection.role, "SIMBA rules: one per new candidate", steps * new,
                   (tokens_of(PLACEHOLDER_CHARS * 4),) * 2, b.reflection.completion(1, 2 * TYPICAL_FIELD_TOKENS),
                   b.reflection.model, b.reflection.price, "up to"))
    b.est.notes.append("SIMBA's counts are bounds: a candidate built by adding a demo calls no reflection")
    if b.budget.max_metric_calls is not None:
        b.est.notes.append(f"SIMBA runs {steps} steps: the most that keep its metric calls within max_metric_calls "
                           f"{b.budget.max_metric_calls}")
    return 0
