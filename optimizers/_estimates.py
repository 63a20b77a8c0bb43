"""The calls SIMBA makes, for the dry-run estimate (`verifirst.loop.estimate`): its `estimate(builder)`
adds its optimize-phase lines here and returns the tokens its result may add to the program's prompt.
AutoRefine's lines are verifirst.judge.estimates'; GEPA's model is dspy.GEPA's (`estimate.gepa_lines`)."""
from __future__ import annotations

from typing import Any

from verifirst.loop.estimate import PLACEHOLDER_CHARS, TYPICAL_FIELD_TOKENS, EstimateBuilder, Line, tokens_of


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
