"""dspy.SIMBA behind the Engine interface, plus what it lacks: candidate selection on the
validation split and per-step metrics.

SIMBA needs sampling variance (task LM temperature > 0) and len(train) >= bsize.

Resuming: dspy.SIMBA keeps no checkpoint, so a run killed inside compile redoes the whole
compile when resumed; what the driver keeps is kept (the before-evaluations, and the chosen
program once engine_done.json is written). tests/test_resume.py pins exactly that.
"""
from __future__ import annotations

from typing import Any

import dspy

from .base import Budget, EngineContext, EngineResult


class SIMBAEngine:
    name = "simba"

    def __init__(self, bsize: int | None = None, num_candidates: int = 4, max_demos: int = 2, **options: Any):
        self.bsize = bsize
        self.num_candidates = num_candidates
        self.max_demos = max_demos
        self.options = options

    def compile(self, program, metric, trainset, valset, budget: Budget, ctx: EngineContext) -> EngineResult:
        bsize = self.bsize or min(8, len(trainset))
        if len(trainset) < bsize:
            raise ValueError(f"SIMBA needs len(train) >= bsize; got {len(trainset)} < {bsize}")
        steps = budget.max_iters or 4
        opt = dspy.SIMBA(metric=metric, bsize=bsize, num_candidates=self.num_candidates, max_steps=steps,
                         max_demos=self.max_demos, num_threads=budget.num_threads,
                         prompt_model=ctx.reflection_lm, **self.options)
        best = opt.compile(program, trainset=trainset, seed=ctx.seed)
        history: list[dict] = []
        for step, log in sorted((getattr(best, "trial_logs", {}) or {}).items()):
            row = {"step": int(step)}
            for k, v in (log or {}).items():
                if isinstance(v, (int, float)):
                    row[k] = float(v)
            history.append(row)
            ctx.log_metrics({k: v for k, v in row.items() if k != "step"}, int(step))
        cands = [c["program"] for c in getattr(best, "candidate_programs", [])] or [best]
        chosen, val_scores = _select_on_val(cands, metric, valset, budget.num_threads)
        for i, s in enumerate(val_scores):
            ctx.log_metrics({"candidate_val_score": s}, i)
        details = {"train_scores": [float(c["score"]) for c in getattr(best, "candidate_programs", [])],
                   "val_scores": val_scores, "chosen": chosen,
                   "candidates": [{n: p.signature.instructions for n, p in c.named_predictors()} for c in cands]}
        return EngineResult(cands[chosen], history, details)


def _select_on_val(cands, metric, valset, threads) -> tuple[int, list[float]]:
    ev = dspy.Evaluate(devset=valset, metric=metric, num_threads=threads, display_progress=False,
                       failure_score=0.0, max_errors=len(valset) * 10)
    scores = []
    for c in cands:
        res = ev(c)
        scores.append(float(res.score) / 100.0 if res.score > 1 else float(res.score))
    best = max(range(len(cands)), key=lambda i: (scores[i], -i))
    return best, scores
