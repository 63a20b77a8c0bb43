"""dspy.GEPA behind the Engine interface: train for reflection, validation for selection,
checkpoints in the run directory (resumable), per-iteration metrics to the tracker.

GEPA saves its state at the start of every iteration, but not the random generator that picks
parents and minibatches, so a resumed run would wander off the path of an uninterrupted one.
We hand GEPA our own generator, candidate selector and batch sampler and save their state
beside GEPA's (on its on_state_saved event): a resumed run takes the same path, redoing at most
the iteration in flight (plus the seed's validation pass GEPA repeats on every start).

For inspection the engine also returns the seed instructions and the candidate lineage: each
candidate's parents, instruction text, validation score, and the reflection LM's answer that
proposed it (taken from the reflection LM's calls between GEPA's proposal start and end
events, since DSPy's proposer does not hand GEPA the raw text).
"""
from __future__ import annotations

import inspect
import json
import random
from pathlib import Path
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback

from verifirst.core import atomic
from verifirst.lm.spend import refused
from .base import Budget, EngineContext, EngineResult


class _Recorder:
    """GEPA callback: per-iteration metrics and candidate prompts (GEPA's own MLflow
    logging leaves orphan runs under threads, so we log through our tracker).

    Rows are kept in `path` (rewritten atomically after each event) so a resumed run reports
    the iterations of the run it continues; rows of a redone iteration (and of the seed's
    validation pass, which GEPA repeats on resume) keep their first record.
    """

    def __init__(self, ctx: EngineContext, valset_size: int, path: Path | None = None,
                 reflections: _ReflectionCapture | None = None):
        self.ctx = ctx
        self.valset_size = valset_size
        self.path = path
        self.reflections = reflections
        self.metric_calls = 0
        self.best_val = None
        self._rows: dict[str, dict] = {}
        self._cands: dict[str, dict] = {}
        self._proposals: dict[str, dict] = {}  # by iteration:proposal:n
        self._accepted: dict[str, dict] = {}  # by candidate index
        self._seen: dict[tuple, int] = {}
        self._cursor = 0  # first reflection answer not yet given to a proposal
        self._pending = 0  # proposals started in this iteration and not ended
        if path is not None and path.exists():
            try:
                saved = json.loads(path.read_text())
                self._rows, self._cands = dict(saved["rows"]), dict(saved["candidates"])
                self._proposals = dict(saved.get("proposals") or {})
                self._accepted = dict(saved.get("accepted") or {})
            except (ValueError, KeyError, TypeError):
                self._rows, self._cands = {}, {}  # unreadable: start the record afresh

    @property
    def history(self) -> list[dict]:
        return list(self._rows.values())

    @property
    def candidates(self) -> list[dict]:
        return list(self._cands.values())

    def _key(self, iteration: int, kind: str) -> str:
        n = self._seen.get((iteration, kind), 0)
        self._seen[(iteration, kind)] = n + 1
        return f"{iteration}:{kind}:{n}"

    @property
    def proposals_by_key(self) -> dict[str, dict]:
        return dict(self._proposals)

    @property
    def accepted(self) -> dict[int, dict]:
        return {int(k): v for k, v in self._accepted.items()}

    def _save(self) -> None:
        if self.path is not None:
            atomic.write_json(self.path, {"rows": self._rows, "candidates": self._cands,
                                          "proposals": self._proposals, "accepted": self._accepted}, indent=None)

    def on_iteration_start(self, event):
        self._pending = 0  # a task whose reflection failed starts a proposal that never ends

    def on_proposal_start(self, event):
        # GEPA starts every proposal of an iteration before reflecting for any of them
        if self._pending == 0:
            self._cursor = len(self.reflections.outputs) if self.reflections else 0
        self._pending += 1

    def on_proposal_end(self, event):
        it = int(event["iteration"])
        raw = {k: str(v) for k, v in (event.get("raw_lm_outputs") or {}).items() if v}
        outs = self.reflections.outputs if self.reflections else []
        # one answer per updated component; the last proposal of the iteration takes the rest
        n = len(event.get("new_instructions") or {}) if self._pending > 1 else len(outs)
        calls, self._cursor = outs[self._cursor:self._cursor + n], min(len(outs), self._cursor + n)
        self._pending = max(0, self._pending - 1)
        if raw:
            text = "\n\n".join(f"[{k}]\n{v}" for k, v in raw.items())
        else:
            text = "\n\n".join(calls) if calls else None
        self._proposals.setdefault(self._key(it, "proposal"), {
            "iteration": it, "components": sorted(event.get("new_instructions") or {}),
            "new_instructions": dict(event.get("new_instructions") or {}), "reflection": text})
        self._save()

    def on_merge_accepted(self, event):
        self._accepted.setdefault(str(int(event["new_candidate_idx"])), {
            "iteration": int(event["iteration"]), "merge": True})
        self._save()

    def on_candidate_accepted(self, event):
        # a merge is announced first; a redone iteration keeps its first record
        self._accepted.setdefault(str(int(event["new_candidate_idx"])), {"iteration": int(event["iteration"])})
        self._save()

    def on_budget_updated(self, event):
        self.metric_calls = int(event["metric_calls_used"])

    def on_evaluation_end(self, event):
        scores = list(event.get("scores") or [])
        if scores and len(scores) != self.valset_size:
            it = int(event["iteration"])
            row = {"iteration": it, "metric_calls": self.metric_calls,
                   "train_minibatch_score": sum(scores) / len(scores)}
            self._rows.setdefault(self._key(it, "train"), row)
            self._save()
            self.ctx.log_metrics({"train_minibatch_score": row["train_minibatch_score"],
                                  "metric_calls": self.metric_calls}, self.metric_calls)

    def on_valset_evaluated(self, event):
        avg = float(event["average_score"])
        it = int(event["iteration"])
        earlier = [r["val_score"] for r in self._rows.values() if "val_score" in r and r["iteration"] < it]
        self.best_val = max(earlier + [avg])
        row = {"iteration": it, "metric_calls": self.metric_calls,
               "val_score": avg, "best_val_score": self.best_val, "candidate_idx": int(event["candidate_idx"])}
        key = self._key(it, "val")
        self._rows.setdefault(key, row)
        self._cands.setdefault(key, {"candidate_idx": int(event["candidate_idx"]), "val_score": avg,
                            "instructions": dict(event["candidate"])})
        self._save()
        self.ctx.log_metrics({"val_score": avg, "best_val_score": self.best_val,
                              "metric_calls": self.metric_calls}, self.metric_calls)


class _ReflectionCapture(BaseCallback):
    """DSPy callback that keeps the reflection LM's answers in call order (the text of each
    completion, with the model's reasoning when it returns one)."""

    def __init__(self, lm: Any):
        self.lm = lm
        self.outputs: list[str] = []
        self._open: set[str] = set()

    def on_lm_start(self, call_id, instance, inputs):
        if instance is self.lm or getattr(instance, "role", None) == "reflection":
            self._open.add(call_id)

    def on_lm_end(self, call_id, outputs, exception=None):
        if call_id not in self._open:
            return
        self._open.discard(call_id)
        if exception is not None:
            self.outputs.append(f"(reflection LM call failed: {type(exception).__name__}: {exception})")
            return
        for out in outputs if isinstance(outputs, list) else [outputs]:
            if isinstance(out, dict):
                reasoning = out.get("reasoning_content")
                text = str(out.get("text", ""))
                self.outputs.append(f"reasoning:\n{reasoning}\n\nanswer:\n{text}" if reasoning else text)
            else:
                self.outputs.append(str(out))


class _Resumable:
    """The generator, selector and sampler GEPA draws from, saved and restored with its state."""

    FIELDS = ("shuffled_ids", "epoch", "id_freqs", "last_trainset_size", "_current_iteration",
              "_calls_in_iteration")

    def __init__(self, log_dir: Path, seed: int, minibatch_size: int, strategy: str = "pareto"):
        from gepa.strategies.batch_sampler import EpochShuffledBatchSampler
        from gepa.strategies.candidate_selector import CurrentBestCandidateSelector, ParetoCandidateSelector

        self.path = log_dir / "verifirst_rng.json"
        self.rng = random.Random(seed)
        self.sampler = EpochShuffledBatchSampler(minibatch_size=minibatch_size, rng=self.rng)
        self.selector = (CurrentBestCandidateSelector() if strategy == "current_best"
                         else ParetoCandidateSelector(rng=self.rng))
        self.metric_calls = 0  # GEPA's count at the saved state, when resuming
        self.restored = self._restore(log_dir)

    def _restore(self, log_dir: Path) -> bool:
        if not (log_dir / "gepa_state.bin").exists() or not self.path.exists():
            return False
        try:
            from gepa.core.state import GEPAState

            saved = json.loads(self.path.read_text())
            state = GEPAState.load(str(log_dir))
            self.metric_calls = int(state.total_num_evals)
            if saved["state_i"] != state.i:
                return False  # killed between GEPA's save and ours: continue with a fresh draw
            v, internal, gauss = saved["rng"]
            self.rng.setstate((v, tuple(internal), gauss))
            from collections import Counter

            for k in self.FIELDS:
                setattr(self.sampler, k, saved["sampler"][k])
            self.sampler.id_freqs = Counter({_id(k): n for k, n in saved["sampler"]["id_freqs"]})
            self.sampler.shuffled_ids = [_id(x) for x in self.sampler.shuffled_ids]
            return True
        except Exception:
            return False

    def on_state_saved(self, event):
        sam = {k: getattr(self.sampler, k) for k in self.FIELDS}
        sam["id_freqs"] = [[k, n] for k, n in self.sampler.id_freqs.items()]
        atomic.write_json(self.path, {"state_i": int(event["iteration"]) - 1, "rng": self.rng.getstate(),
                                      "sampler": sam}, indent=None)


def _id(x):
    return tuple(x) if isinstance(x, list) else x


class GEPAEngine:
    name = "gepa"

    def __init__(self, reflection_minibatch_size: int = 3, use_merge: bool = False, seed: int | None = None,
                 **gepa_options: Any):
        self.reflection_minibatch_size = reflection_minibatch_size
        self.use_merge = use_merge
        self.seed = seed  # None: the run's seed (vf.optimize(seed=...))
        known = inspect.signature(dspy.GEPA.__init__).parameters
        unknown = sorted(set(gepa_options) - set(known) - {"candidate_selection_strategy"})
        if unknown:  # refused when the engine is made (before any work), not at its first compile
            raise TypeError(f"unexpected option {unknown[0]!r} (dspy.GEPA takes: "
                            f"{', '.join(k for k in known if k not in ('self', 'metric'))})")
        self.gepa_options = gepa_options

    def estimate(self, builder) -> int:
        """The calls this engine makes, for the dry-run estimate: dspy.GEPA's (verifirst.loop.estimate)."""
        from verifirst.loop.estimate import gepa_lines

        return gepa_lines(builder, minibatch=int(self.reflection_minibatch_size or 3),
                          max_metric_calls=builder.budget.max_metric_calls, auto=builder.budget.auto,
                          selector=self.gepa_options.get("component_selector", "round_robin"),
                          use_merge=bool(self.use_merge))

    def compile(self, program, metric, trainset, valset, budget: Budget, ctx: EngineContext) -> EngineResult:
        if ctx.reflection_lm is None:
            raise ValueError("GEPA needs a reflection LM (models.reflection)")
        log_dir = Path(ctx.run_dir) / "gepa"
        log_dir.mkdir(parents=True, exist_ok=True)
        seed_instructions = _instructions(program)
        capture = _ReflectionCapture(ctx.reflection_lm)
        valset = valset or None  # an empty validation split (no_val): GEPA tracks its Pareto front on train
        rec = _Recorder(ctx, len(valset or trainset), log_dir / "verifirst_history.json", capture)
        opts = dict(self.gepa_options)
        strategy = opts.pop("candidate_selection_strategy", "pareto")
        seed = ctx.seed if self.seed is None else self.seed
        draws = _Resumable(log_dir, seed, self.reflection_minibatch_size, strategy)
        rec.metric_calls = draws.metric_calls
        budget_kw: dict[str, Any] = {}
        if budget.max_metric_calls:
            budget_kw["max_metric_calls"] = budget.max_metric_calls
        else:
            budget_kw["auto"] = budget.auto or "light"
        # reflection_minibatch_size goes to our sampler; GEPA refuses both at once
        opt = dspy.GEPA(metric=metric, reflection_lm=ctx.reflection_lm, num_threads=budget.num_threads,
                        reflection_minibatch_size=None, use_merge=self.use_merge,
                        candidate_selection_strategy=draws.selector,
                        track_stats=True, log_dir=str(log_dir), seed=seed, warn_on_score_mismatch=False,
                        gepa_kwargs={"use_cloudpickle": True, "callbacks": [rec, draws],
                                     "batch_sampler": draws.sampler, "stop_callbacks": [_budget_refused]},
                        **budget_kw, **opts)
        try:
            with dspy.context(callbacks=[*(dspy.settings.get("callbacks") or []), capture]):
                best = opt.compile(program, trainset=trainset, valset=valset)
        except Exception:
            if refused() is None:
                raise
            best = best_saved(program, log_dir)  # a refused call ended the iteration in flight
            if best is None:
                raise
            return EngineResult(best, rec.history, {"seed_instructions": seed_instructions,
                                                    "selected_from": "the last completed iteration"},
                                stopped="budget")
        details = _details(best)
        details["candidates_seen"] = rec.candidates
        details["seed_instructions"] = seed_instructions
        details["lineage"] = lineage(details, rec.accepted, rec.proposals_by_key)
        atomic.write_json(log_dir / "detailed_results.json", details)
        atomic.write_json(log_dir / "gepa_lineage.json", details["lineage"])
        ctx.log_artifact(log_dir / "detailed_results.json")
        ctx.log_artifact(log_dir / "gepa_lineage.json")
        return EngineResult(best, rec.history, details, stopped="budget" if refused() is not None else None)


def _budget_refused(gepa_state: Any) -> bool:
    """GEPA stopper: the run's budget refused a call (GEPA's evaluations score a refused call as a
    failure, so its next iteration would learn from nothing): stop before it starts."""
    return refused() is not None


def best_saved(program: Any, log_dir: Path) -> Any:
    """The program of GEPA's state saved at the start of its last iteration with the highest mean
    validation score (every candidate there was fully scored before that iteration); None when
    there is no such state.

    Args:
        program: the start program (the candidate's instructions are set on a copy of it).
        log_dir: GEPA's log directory.
    """
    from gepa.core.state import GEPAState

    try:
        state = GEPAState.load(str(log_dir))
    except Exception:  # no state saved yet (the seed's validation pass was refused)
        return None
    scores = [sum(sc.values()) / len(sc) if sc else float("-inf") for sc in state.prog_candidate_val_subscores]
    if not scores:
        return None
    idx = max(range(len(scores)), key=lambda i: (scores[i], -i))  # ties: the earlier candidate
    best = program.deepcopy()
    for name, pred in best.named_predictors():
        text = state.program_candidates[idx].get(name)
        if text is not None:
            pred.signature = pred.signature.with_instructions(text)
    return best


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


def _instructions(prog) -> dict[str, str]:
    return {n: p.signature.instructions for n, p in prog.named_predictors()}


def lineage(details: dict, accepted: dict[int, dict], proposals: dict[str, dict]) -> list[dict]:
    """One row per GEPA candidate: its parents, instructions, validation score and the
    reflection that proposed it (None with the reason in `reflection_note` when there is none).

    Args:
        details: GEPA's detailed results as `_details` returns them (candidates, parents, scores).
        accepted: by candidate index, the iteration that accepted it (and whether by a merge).
        proposals: the proposals recorded during the run, by key.
    """
    cands = details.get("candidates") or []
    parents = details.get("parents") or []
    scores = details.get("val_aggregate_scores") or []
    found = details.get("discovery_eval_counts") or []
    rows = []
    for idx, instr in enumerate(cands):
        ps = [p for p in (parents[idx] if idx < len(parents) else []) or [] if p is not None]
        acc = accepted.get(idx) or {}
        # the proposal of that iteration whose new texts this candidate carries
        prop = next((p for p in proposals.values() if p["iteration"] == acc.get("iteration")
                     and all(instr.get(k) == v for k, v in p["new_instructions"].items())), None)
        reflection, note = (prop or {}).get("reflection"), None
        if idx == 0:
            note = "the seed program: no reflection proposed it"
        elif acc.get("merge") or len(ps) > 1:
            note = f"merged from candidates {', '.join(map(str, ps))}: no reflection proposed it"
        elif prop is None:
            note = "no proposal was recorded for this candidate (accepted before a resume)"
        elif reflection is None:
            note = "the reflection LM was not called through DSPy, so its answer could not be captured"
        rows.append({"idx": idx, "parents": ps, "instructions": dict(instr),
                     "val_score": scores[idx] if idx < len(scores) else None,
                     "iteration": acc.get("iteration"),
                     "metric_calls_at_discovery": found[idx] if idx < len(found) else None,
                     "components_updated": (prop or {}).get("components")
                     or sorted(k for k in instr if ps and cands[ps[0]].get(k) != instr[k]),
                     "reflection": reflection, "reflection_note": note,
                     "best": idx == details.get("best_idx")})
    return rows
