"""dspy.SIMBA behind the Engine interface, plus what it lacks: candidate selection on the
validation split and per-step metrics.

SIMBA needs sampling variance (task LM temperature > 0) and len(train) >= bsize.

Budget: `max_metric_calls` sets the steps: the most whose metric calls (each step's trajectories
and new candidates, then the candidates on train and on validation: `metric_calls`) stay within
it, at most `max_iters`; without it, `max_iters` steps (default 4). A max_metric_calls too small
for one step is refused before any LM call (`check_budget`).

Resuming: dspy.SIMBA keeps no checkpoint, so a run killed inside compile redoes the whole
compile when resumed; what the driver keeps is kept (the before-evaluations, and the chosen
program once engine_done.json is written). tests/test_resume.py pins exactly that.
"""
from __future__ import annotations

import math
from typing import Any

import dspy

from verifirst.core.engine import compile_arguments

from .base import Budget, EngineContext, EngineResult

DEFAULT_STEPS = 4


class SIMBAEngine:
    name = "simba"

    def __init__(self, bsize: int | None = None, num_candidates: int = 4, max_demos: int = 2, **options: Any):
        self.bsize = bsize
        self.num_candidates = num_candidates
        self.max_demos = max_demos
        self.options = options

    def compile_arguments(self, ctx: EngineContext) -> dict[str, Any]:
        """dspy.SIMBA.compile's arguments besides student and trainset: the run's seed, ctx.compile_kwargs.

        Args:
            ctx: the run context.
        """
        return compile_arguments(dspy.SIMBA.compile, "SIMBA", ctx)

    def batch_size(self, n_train: int) -> int:
        """The minibatch size: the configured bsize, else 8 or the whole training split if smaller."""
        return self.bsize or min(8, n_train)

    def metric_calls(self, steps: int, n_train: int, n_val: int) -> int:
        """The most metric calls a run of `steps` steps makes (dspy.SIMBA.compile, then `_select_on_val`).

        Each step scores bsize x num_candidates trajectories, then at most num_candidates + 1 new
        candidates (one per bucket, bsize buckets) on the step's batch; the end scores the winners
        (at most steps + 1 of them, at most num_candidates + 1) on train, then on validation.

        Args:
            steps: SIMBA's max_steps.
            n_train: training items.
            n_val: validation items.
        """
        bsize = self.batch_size(n_train)
        per_step = bsize * self.num_candidates + bsize * min(bsize, self.num_candidates + 1)
        finalists = min(steps + 1, self.num_candidates + 1)
        return steps * per_step + finalists * (n_train + n_val)

    def steps(self, budget: Budget, n_train: int, n_val: int) -> int:
        """SIMBA's steps: the most that keep the metric calls within budget.max_metric_calls, at most
        budget.max_iters; budget.max_iters (default 4) when no max_metric_calls is given.

        Args:
            budget: the run's budget.
            n_train: training items.
            n_val: validation items.
        """
        if budget.max_metric_calls is None:
            return DEFAULT_STEPS if budget.max_iters is None else budget.max_iters
        steps = 0
        while (budget.max_iters is None or steps < budget.max_iters) and \
                self.metric_calls(steps + 1, n_train, n_val) <= budget.max_metric_calls:
            steps += 1
        return steps

    def check_budget(self, budget: Budget, n_train: int, n_val: int) -> None:
        """Refuse a max_metric_calls too small for one step (vf.optimize asks before any LM call).

        Args:
            budget: the run's budget.
            n_train: training items.
            n_val: validation items.

        Raises:
            InputError: naming budget.max_metric_calls and the calls one step needs.
        """
        from verifirst.core.errors import InputError

        if budget.max_metric_calls is None or budget.max_iters == 0:
            return
        one_step = self.metric_calls(1, n_train, n_val)
        if self.steps(budget, n_train, n_val) == 0:
            raise InputError(f"max_metric_calls {budget.max_metric_calls} is too few for one SIMBA step with "
                             f"{n_train} training and {n_val} validation items", field="budget.max_metric_calls",
                             expected=f"at least {one_step} (bsize {self.batch_size(n_train)}, num_candidates "
                                      f"{self.num_candidates}), or a smaller bsize or num_candidates")

    def estimate(self, builder) -> int:
        """The calls this engine makes, for the dry-run estimate (see optimizers._estimates)."""
        from ._estimates import simba_lines

        return simba_lines(self, builder)

    def compile(self, program, metric, trainset, valset, budget: Budget, ctx: EngineContext) -> EngineResult:
        bsize = self.batch_size(len(trainset))
        if len(trainset) < bsize:
            raise ValueError(f"SIMBA needs len(train) >= bsize; got {len(trainset)} < {bsize}")
        steps = self.steps(budget, len(trainset), len(valset))
        opt = dspy.SIMBA(metric=metric, bsize=bsize, num_candidates=self.num_candidates, max_steps=steps,
                         max_demos=self.max_demos, num_threads=budget.num_threads,
                         prompt_model=ctx.reflection_lm, **self.options)
        best = opt.compile(program, trainset=trainset, **self.compile_arguments(ctx))
        history: list[dict] = []
        for step, log in sorted((getattr(best, "trial_logs", {}) or {}).items()):
            row = {"step": int(step)}
            for k, v in (log or {}).items():
                if isinstance(v, (int, float)):
                    row[k] = float(v)
            history.append(row)
            ctx.log_metrics({k: v for k, v in row.items() if k != "step"}, int(step))
        cands = [c["program"] for c in getattr(best, "candidate_programs", [])] or [best]
        chosen, val_scores, val_errors = _select_on_val(cands, metric, valset, budget.num_threads)
        for i, s in enumerate(val_scores):
            if s is not None:
                ctx.log_metrics({"candidate_val_score": s}, i)
            ctx.log_metrics({"candidate_val_errors": val_errors[i]}, i)
        details = {"train_scores": [float(c["score"]) for c in getattr(best, "candidate_programs", [])],
                   "val_scores": val_scores, "val_errors": val_errors, "val_n": len(valset), "chosen": chosen,
                   "candidates": [{n: p.signature.instructions for n, p in c.named_predictors()} for c in cands]}
        return EngineResult(cands[chosen], history, details)


def _item_score(value) -> float:
    """A metric value as a number: a float, a bool, or a Prediction with a score."""
    return float(getattr(value, "score", value))


def candidate_val_score(res) -> tuple[float | None, int]:
    """(mean metric over the items that produced an output, how many items errored).

    dspy.Evaluate's `score` is a percentage (100 * sum / len(devset)) that scores every failed
    item at `failure_score`; an LM error is no evidence about the prompt, so errored items
    (failure_score NaN) are counted and left out, and the mean is read on the 0..1 scale from
    the per-item results. None when no item produced an output.

    Args:
        res: the dspy EvaluationResult of one candidate (results: (example, prediction, score)).
    """
    scores = [_item_score(s) for _, _, s in res.results]
    ok = [s for s in scores if not math.isnan(s)]
    return (sum(ok) / len(ok) if ok else None), len(scores) - len(ok)


def _select_on_val(cands, metric, valset, threads) -> tuple[int, list[float | None], list[int]]:
    """The candidate with the best validation score (ties: the earlier, SIMBA's better on train).

    Returns (index chosen, each candidate's score over its items with an output or None, each
    candidate's count of items that raised instead of producing an output)."""
    ev = dspy.Evaluate(devset=valset, metric=metric, num_threads=threads, display_progress=False,
                       failure_score=float("nan"), max_errors=len(valset) * 10)
    scores, errors = [], []
    for c in cands:
        score, n_err = candidate_val_score(ev(c))
        scores.append(score)
        errors.append(n_err)
    best = max(range(len(cands)), key=lambda i: (scores[i] is not None, scores[i] or 0.0, -i))
    return best, scores, errors
