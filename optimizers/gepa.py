"""dspy.GEPA behind the Engine interface: train for reflection, validation for selection,
checkpoints in the run directory (resumable), per-iteration metrics to the tracker."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import dspy

from verifirst import atomic

from .base import Budget, EngineContext, EngineResult


class _Recorder:
    """GEPA callback: per-iteration metrics and candidate prompts (GEPA's own MLflow
    logging leaves orphan runs under threads, so we log through our tracker)."""

    def __init__(self, ctx: EngineContext, valset_size: int):
        self.ctx = ctx
        self.valset_size = valset_size
        self.metric_calls = 0
        self.best_val = None
        self.history: list[dict] = []
        self.candidates: list[dict] = []

    def on_budget_updated(self, event):
        self.metric_calls = int(event["metric_calls_used"])

    def on_evaluation_end(self, event):
        scores = list(event.get("scores") or [])
        if scores and len(scores) != self.valset_size:
            row = {"iteration": int(event["iteration"]), "metric_calls": self.metric_calls,
                   "train_minibatch_score": sum(scores) / len(scores)}
            self.history.append(row)
            self.ctx.log_metrics({"train_minibatch_score": row["train_minibatch_score"],
                                  "metric_calls": self.metric_calls}, self.metric_calls)

    def on_valset_evaluated(self, event):
        avg = float(event["average_score"])
        self.best_val = avg if self.best_val is None else max(self.best_val, avg)
        row = {"iteration": int(event["iteration"]), "metric_calls": self.metric_calls,
               "val_score": avg, "best_val_score": self.best_val, "candidate_idx": int(event["candidate_idx"])}
        self.history.append(row)
        self.candidates.append({"candidate_idx": int(event["candidate_idx"]), "val_score": avg,
                                "instructions": dict(event["candidate"])})
        self.ctx.log_metrics({"val_score": avg, "best_val_score": self.best_val,
                              "metric_calls": self.metric_calls}, self.metric_calls)


class GEPAEngine:
    name = "gepa"

    def __init__(self, reflection_minibatch_size: int = 3, use_merge: bool = False, seed: int = 0,
                 **gepa_options: Any):
        self.reflection_minibatch_size = reflection_minibatch_size
        self.use_merge = use_merge
        self.seed = seed
        self.gepa_options = gepa_options

    def compile(self, program, metric, trainset, valset, budget: Budget, ctx: EngineContext) -> EngineResult:
        if ctx.reflection_lm is None:
            raise ValueError("GEPA needs a reflection LM (models.reflection)")
        log_dir = Path(ctx.run_dir) / "gepa"
        log_dir.mkdir(parents=True, exist_ok=True)
        rec = _Recorder(ctx, len(valset))
        budget_kw: dict[str, Any] = {}
        if budget.max_metric_calls:
            budget_kw["max_metric_calls"] = budget.max_metric_calls
        else:
            budget_kw["auto"] = budget.auto or "light"
        opt = dspy.GEPA(metric=metric, reflection_lm=ctx.reflection_lm, num_threads=budget.num_threads,
                        reflection_minibatch_size=self.reflection_minibatch_size, use_merge=self.use_merge,
                        track_stats=True, log_dir=str(log_dir), seed=self.seed, warn_on_score_mismatch=False,
                        gepa_kwargs={"use_cloudpickle": True, "callbacks": [rec]}, **budget_kw,
                        **self.gepa_options)
        best = opt.compile(program, trainset=trainset, valset=valset)
        details = _details(best)
        details["candidates_seen"] = rec.candidates
        atomic.write_json(log_dir / "detailed_results.json", details)
        ctx.log_artifact(log_dir / "detailed_results.json")
        return EngineResult(best, rec.history, details)


def _details(prog) -> dict:
    dr = getattr(prog, "detailed_results", None)
    if dr is None:
        return {}
    out: dict[str, Any] = {}
    for key in ("val_aggregate_scores", "parents", "discovery_eval_counts", "total_metric_calls",
                "num_full_val_evals", "best_idx", "log_dir", "seed"):
        if hasattr(dr, key):
            out[key] = getattr(dr, key)
    cands = getattr(dr, "candidates", None) or []
    out["candidates"] = [{n: p.signature.instructions for n, p in c.named_predictors()} for c in cands]
    front = getattr(dr, "per_val_instance_best_candidates", None)
    if front is not None:
        out["pareto_front"] = {str(k): sorted(v) if isinstance(v, set) else v
                               for k, v in (front.items() if isinstance(front, dict) else enumerate(front))}
    return out
