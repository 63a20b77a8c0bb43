"""The cheapest (or fastest) configuration that is not worse: a selection rule over candidates.

A candidate is a model and a program (its prompt): the program as given and as the optimizer left
it, for each model a role may choose from, and any (model, prompt) pairs the user gives. Every
candidate is scored on train and validation, and each item's own LM calls are priced
(`verifirst.lm.call_costs`: USD and tokens per item, latency per item p50/p90; cached calls
priced as if sent).

objective = "quality" is today's rule (the optimizer's best). "cheapest-not-worse" picks, among
the candidates whose validation quality is non-inferior to the reference, the one with the lowest
mean USD per item (ties: lower latency p50); "fastest-not-worse" the one with the lowest latency
p50 per item (ties: lower USD). The reference is the best candidate on validation (highest pass
rate; ties: the dearer on the rule's axis), or the configuration deployed now when the user gives it (a model and a
prompt). Non-inferior: the paired bootstrap 95% interval of Δ = pass rate(candidate) − pass
rate(reference), on the validation items both scored, has its lower bound above −margin (a
one-sided test at 2.5%; `verifirst.core.stats.paired_bootstrap`). The margin is in (0, 1): at
zero the rule would ask a cheaper candidate to be proven better, which is objective = "quality".

The test split is then scored once for the chosen candidate and once for the reference (one
evaluation when they are the same), each recorded in the test-reuse ledger: Δquality with its
interval and McNemar's p, and Δ USD and Δ latency per item.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from verifirst.core import stats
from verifirst.core.callbacks import ItemStart, RunCallback
from verifirst.core.errors import InputError
from verifirst.lm.call_costs import ItemCosts
from verifirst.loop.driver import score_split
from verifirst.loop.evaluation import EvalResult

OBJECTIVES = ("quality", "cheapest-not-worse", "fastest-not-worse")
AXIS = {"cheapest-not-worse": "usd_per_item", "fastest-not-worse": "latency_p50_s"}
TIE = {"cheapest-not-worse": "latency_p50_s", "fastest-not-worse": "usd_per_item"}
OBJECTIVE_KEYS = ("kind", "margin", "models", "reference", "candidates")
BOOTSTRAP_N = 2000
OBJECTIVE_EXPECTED = ('"quality", or {kind = "cheapest-not-worse" | "fastest-not-worse", margin = 0.02, '
                      'models = [...], reference = {model, prompt}, candidates = [{model, prompt}, ...]}')


@dataclass(frozen=True)
class Objective:
    """What a run selects on.

    Args:
        kind: "quality" (the optimizer's best), "cheapest-not-worse" or "fastest-not-worse".
        margin: the non-inferiority margin on the validation pass rate, in (0, 1).
        models: task models to choose from (empty: the run's task model); the optimizer searches
            prompts for each.
        reference: the configuration deployed now, {"model": ..., "prompt": ...}; None: the best
            candidate on validation.
        candidates: the user's own {"model", "prompt"} pairs, evaluated as given.
    """

    kind: str = "quality"
    margin: float | None = None
    models: tuple[str, ...] = ()
    reference: dict | None = None
    candidates: tuple[dict, ...] = ()

    @property
    def selects(self) -> bool:
        """Whether this objective chooses among candidates (anything but plain "quality")."""
        return self.kind != "quality"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "margin": self.margin, "models": list(self.models),
                "reference": self.reference, "candidates": list(self.candidates)}


def model_name(spec: Any) -> str | None:
    """The model string of a candidate's model: the string itself, or a dspy.LM's `model`; None if neither."""
    if isinstance(spec, str):
        return spec.strip() or None
    name = getattr(spec, "model", None)
    return name if isinstance(name, str) and callable(spec) else None


def _pair(value: Any, field_name: str) -> dict:
    if not isinstance(value, dict) or not model_name(value.get("model")):
        raise InputError(f"{value!r} is not a (model, prompt) pair", field=field_name,
                         expected='{model = "provider/name", prompt = "the instructions"}')
    extra = sorted(set(value) - {"model", "prompt"})
    if extra:
        raise InputError(f"unknown key {extra[0]!r}", field=f"{field_name}.{extra[0]}", expected="model, prompt")
    prompt = value.get("prompt")
    if prompt is not None and not isinstance(prompt, (str, dict)):
        raise InputError(f"prompt is a {type(prompt).__name__}", field=f"{field_name}.prompt",
                         expected="the instructions (a string, or {predictor name: instructions})")
    return {"model": value["model"], "prompt": prompt}


def check_objective(value: Any, margin: Any = None, field: str = "objective") -> Objective:
    """The run's Objective from what the user gave, or InputError naming the field.

    Args:
        value: None, an Objective, a kind string, or a dict with `kind` and the Objective's other keys.
        margin: the margin when `value` is a kind string (the `margin=` keyword, `--margin`).
        field: where the value came from, for the error (e.g. "objective", "[objective]").
    """
    if value is None:
        value = "quality"
    if isinstance(value, Objective):
        value = value.as_dict()
    if isinstance(value, str):
        value = {"kind": value, "margin": margin}
    elif isinstance(value, dict) and margin is not None:
        value = {**value, "margin": margin}
    if not isinstance(value, dict):
        raise InputError(f"objective is a {type(value).__name__}", field=field, expected=OBJECTIVE_EXPECTED)
    unknown = sorted(set(value) - set(OBJECTIVE_KEYS))
    if unknown:
        raise InputError(f"unknown objective key {unknown[0]!r}", field=f"{field}.{unknown[0]}",
                         expected=", ".join(OBJECTIVE_KEYS))
    kind = value.get("kind", "quality")
    if kind not in OBJECTIVES:
        raise InputError(f"unknown objective {kind!r}", field=f"{field}.kind", expected=", ".join(OBJECTIVES))
    m = value.get("margin")
    if kind == "quality":
        if m is not None:
            raise InputError(f"a margin ({m!r}) for objective quality, which takes none", field=f"{field}.margin",
                             expected='no margin, or kind "cheapest-not-worse" / "fastest-not-worse"')
    else:
        if m is None:
            raise InputError(f"objective {kind} needs a margin", field=f"{field}.margin",
                             expected="a number in (0, 1), e.g. 0.02 of pass rate")
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or not 0 < m < 1:
            hint = (" (at 0 a cheaper candidate would have to be proven better: that is objective quality)"
                    if m == 0 and not isinstance(m, bool) else "")
            raise InputError(f"margin {m!r} is outside (0, 1){hint}", field=f"{field}.margin",
                             expected="a number in (0, 1), e.g. 0.02 of pass rate")
    models = value.get("models") or ()
    if isinstance(models, str) or not isinstance(models, (list, tuple)) or \
            not all(model_name(x) for x in models):
        raise InputError(f"models {models!r} is not a list of model strings", field=f"{field}.models",
                         expected='["openai/gpt-4o-mini", "openai/gpt-4o"] (or dspy.LM objects, from Python)')
    if len({model_name(x) for x in models}) != len(models):
        raise InputError("a model is named twice", field=f"{field}.models", expected="each model once")
    ref = value.get("reference")
    ref = _pair(ref, f"{field}.reference") if ref is not None else None
    cands = value.get("candidates") or ()
    if not isinstance(cands, (list, tuple)):
        raise InputError(f"candidates is a {type(cands).__name__}", field=f"{field}.candidates",
                         expected="a list of {model, prompt}")
    cands = tuple(_pair(c, f"{field}.candidates[{i}]") for i, c in enumerate(cands))
    if kind == "quality" and (models or ref or cands):
        raise InputError("models, a reference or candidates given for objective quality, which chooses none",
                         field=f"{field}.kind", expected='"cheapest-not-worse" or "fastest-not-worse"')
    return Objective(kind, None if m is None else float(m), tuple(models), ref, cands)


def candidate_models(obj: Objective, task_model: str | None) -> list[str]:
    """Every model a candidate of `obj` runs on (the task model when it names none).

    Args:
        obj: the objective.
        task_model: the run's task model string.
    """
    found = [model_name(m) for m in obj.models] or ([task_model] if task_model else [])
    for pair in [*obj.candidates, *([obj.reference] if obj.reference else [])]:
        if model_name(pair["model"]) not in found:
            found.append(model_name(pair["model"]))
    return found


def check_prices(obj: Objective, task_model: str | None, prices: Any) -> None:
    """Refuse, before any call, a cost objective with a model whose price is unknown.

    Args:
        obj: the objective.
        task_model: the run's task model string.
        prices: the run's `verifirst.lm.spend.Prices`.
    """
    if obj.kind != "cheapest-not-worse":
        return
    for m in candidate_models(obj, task_model):
        if prices.per_token(m) is None:
            raise InputError(f"no price known for model {m!r}: objective cheapest-not-worse compares cost",
                             field="budget.prices",
                             expected=f'a [budget.prices] entry, "{m}" = {{input = 0.15, output = 0.60}} '
                                      "(USD per 1M tokens)")


def with_prompt(program: Any, prompt: Any) -> Any:
    """A copy of `program` whose predictors' instructions are `prompt` (None: as it is).

    Args:
        program: the DSPy program.
        prompt: one instructions string for every predictor, or {predictor name: instructions}.
    """
    prog = program.deepcopy()
    if prompt is None:
        return prog
    for name, p in prog.named_predictors():
        text = prompt.get(name) if isinstance(prompt, dict) else prompt
        if text is not None:
            p.signature = p.signature.with_instructions(text)
    return prog


# -- candidates --------------------------------------------------------------------------------------

@dataclass(eq=False)  # compared and hashed by identity
class Candidate:
    """One configuration: a model and a program, its evaluations and its cost per split.

    Args:
        label: how the report names it, e.g. "local/cheap · optimized".
        model: the task model string.
        program: the DSPy program (its prompt).
        source: "as given", "optimized", "yours" or "reference".
    """

    label: str
    model: str
    program: Any
    source: str
    evals: dict[str, EvalResult] = field(default_factory=dict)
    costs: dict[str, dict] = field(default_factory=dict)

    def quality(self, split: str) -> dict:
        """Pass rate over the scored items of `split` with its Wilson interval."""
        res = self.evals.get(split)
        if res is None:
            return {"pass_rate": None, "n_scored": 0, "ci95": None}
        k, n = sum(r.passed for r in res.scored), len(res.scored)
        return {"pass_rate": k / n if n else None, "n_scored": n, "ci95": list(stats.wilson(k, n))}

    def axis(self, name: str, split: str = "val") -> float:
        """A cost summary's value (e.g. "usd_per_item") on `split`; inf when unknown (never the cheapest).

        Args:
            name: the summary key.
            split: the split.
        """
        v = (self.costs.get(split) or {}).get(name)
        return math.inf if v is None else float(v)


class CostCallback(RunCallback):
    """Records each item's calls of a run's evaluations under (prefix, phase, split, item id).

    Args:
        costs: the collector.
        prefix: what this run's keys start with (its model).
    """

    def __init__(self, costs: ItemCosts, prefix: str):
        self.costs, self.prefix = costs, prefix

    def item_scope(self, event: ItemStart):
        return self.costs.scope((self.prefix, event.phase, event.split, event.item.id))

    def keys(self, phase: str, res: EvalResult) -> list:
        """The keys of an evaluation's items.

        Args:
            phase: "before" or "after".
            res: the evaluation.
        """
        return [(self.prefix, phase, res.split, r.id) for r in res.rows]


def paired_delta(ref: EvalResult, cand: EvalResult, seed: int = 0) -> dict:
    """Δ pass rate (candidate − reference) on the items both scored, with the paired bootstrap 95%
    interval and exact McNemar.

    Args:
        ref: the reference's evaluation of a split.
        cand: the candidate's evaluation of the same split.
        seed: the bootstrap seed.
    """
    a, b = ref.by_id(), cand.by_id()
    ids = [i for i in a if i in b and a[i].status in ("PASS", "FAIL") and b[i].status in ("PASS", "FAIL")]
    if not ids:
        return {"paired_n": 0, "delta": None, "ci95": None, "mcnemar_p": None}
    pa, pb = [float(a[i].passed) for i in ids], [float(b[i].passed) for i in ids]
    boot = stats.paired_bootstrap(lambda y, p: sum(p) / len(p), pa, pb, [0] * len(ids), n=BOOTSTRAP_N, seed=seed)
    mc = stats.mcnemar_paired([x > 0 for x in pa], [x > 0 for x in pb])
    return {"paired_n": len(ids), "delta": boot.delta, "ci95": [boot.lo, boot.hi], "mcnemar_p": mc.p_value}


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Which (cost, quality) points no other point dominates (cost lower or equal and quality higher
    or equal, one strictly).

    Args:
        points: (cost, quality) per candidate; an unknown quality is never on the front.
    """
    out = []
    for i, (c, q) in enumerate(points):
        if q is None or math.isnan(q):
            out.append(False)
            continue
        out.append(not any(j != i and q2 is not None and c2 <= c and q2 >= q and (c2 < c or q2 > q)
                           for j, (c2, q2) in enumerate(points)))
    return out


def select(cands: Sequence[Candidate], obj: Objective, reference: Candidate | None = None) -> dict:
    """Apply the rule on validation: the chosen candidate, the reference, and every candidate's row.

    Args:
        cands: the candidates, scored on validation with their costs.
        obj: the objective (not "quality").
        reference: the deployed configuration (one of `cands`), or None for the best on validation.

    Returns:
        {"chosen": Candidate, "reference": Candidate, "rows": [...], "verdict": str}.
    """
    axis, tie = AXIS[obj.kind], TIE[obj.kind]
    if reference is None:  # the best on validation; ties: the dearer on the rule's axis (what a choice on
        # quality alone may have kept: the test split then shows what the rule saves against it)
        reference = max(cands, key=lambda c: ((c.quality("val")["pass_rate"] or 0.0), _finite(c.axis(axis))))
    rows = []
    for c in cands:
        cmp = {"paired_n": len(reference.evals["val"].scored), "delta": 0.0, "ci95": [0.0, 0.0],
               "mcnemar_p": 1.0} if c is reference else paired_delta(reference.evals["val"], c.evals["val"])
        ok = c is reference or (cmp["ci95"] is not None and cmp["ci95"][0] > -obj.margin)
        rows.append({"candidate": c, "val_vs_reference": cmp, "non_inferior": ok})
    eligible = [r["candidate"] for r in rows if r["non_inferior"]]
    chosen = min(eligible, key=lambda c: (c.axis(axis), c.axis(tie), -(c.quality("val")["pass_rate"] or 0.0),
                                           c is not reference))
    unit = "USD per item" if axis == "usd_per_item" else "latency p50 per item"
    word = "cheaper" if axis == "usd_per_item" else "faster"
    if chosen is reference:
        better = [c for c in cands if c.axis(axis) < reference.axis(axis)]
        verdict = (f"No {word} candidate was non-inferior: none of the {len(better)} candidate(s) {word} than the "
                   f"reference ({reference.label}) had its validation Δ interval above −{obj.margin:g}; the "
                   f"reference is kept." if better else
                   f"No candidate is {word} than the reference ({reference.label}): it is kept.")
    else:
        verdict = (f"{chosen.label} is non-inferior to the reference ({reference.label}) on validation within "
                   f"margin {obj.margin:g}, at {_fmt(chosen.axis(axis))} {unit} against "
                   f"{_fmt(reference.axis(axis))}.")
    front = pareto_front([(c.axis(axis), c.quality("val")["pass_rate"]) for c in cands])
    for r, f in zip(rows, front):
        r["front"] = f
    return {"chosen": chosen, "reference": reference, "rows": rows, "verdict": verdict}


def _finite(x: float) -> float:
    return -1.0 if math.isinf(x) else x  # an unknown cost never wins a tie as the dearer


def _fmt(x: float) -> str:
    return "n/a" if x is None or math.isinf(x) else f"{x:.3g}"


def confirm_on_test(chosen: Candidate, reference: Candidate) -> dict:
    """The test split's comparison of chosen and reference: Δquality (chosen − reference) with its
    interval and McNemar's p, Δ USD and Δ latency p50 per item.

    Args:
        chosen: the chosen candidate, scored on test with its costs.
        reference: the reference, scored on test with its costs.
    """
    out: dict[str, Any] = {"chosen": chosen.quality("test"), "reference": reference.quality("test")}
    out["delta_quality"] = paired_delta(reference.evals["test"], chosen.evals["test"])
    for name in ("usd_per_item", "tokens_per_item", "latency_p50_s", "latency_p90_s"):
        a, b = chosen.costs["test"].get(name), reference.costs["test"].get(name)
        out[f"delta_{name}"] = None if a is None or b is None else a - b
    out["costs"] = {"chosen": chosen.costs["test"], "reference": reference.costs["test"]}
    return out


def candidate_row(c: Candidate, row: dict | None = None) -> dict:
    """A candidate's entry in the report: quality and cost per split, its validation comparison.

    Args:
        c: the candidate.
        row: its row from `select` (val_vs_reference, non_inferior, front), if any.
    """
    out = {"label": c.label, "model": c.model, "source": c.source,
           "splits": {s: {**c.quality(s), **c.costs.get(s, {})} for s in c.evals}}
    if row is not None:
        out.update({k: v for k, v in row.items() if k != "candidate"})
    return out


class CandidateScorer:
    """Scores candidates on a split with each item's calls priced.

    Args:
        scorer: the run's Metric.
        by_split: items by split.
        manifest: the split manifest (the test guard).
        costs: the per-item call collector.
        scope_for: model -> a context in which the program runs on that model.
        run_dir: where the candidates' rows are kept (eval/objective/).
        threads: evaluation threads.
        on_test: called with (program) after each test evaluation (the test-reuse ledger).
    """

    def __init__(self, scorer: Any, by_split: dict, manifest: Any, costs: ItemCosts,
                 scope_for: Callable[[str], Any], run_dir: Path, threads: int = 1,
                 on_test: Callable[[Any], None] | None = None):
        self.scorer, self.by_split, self.manifest, self.costs = scorer, by_split, manifest, costs
        self.scope_for, self.run_dir, self.threads, self.on_test = scope_for, Path(run_dir), threads, on_test

    def score(self, c: Candidate, split: str) -> None:
        """Evaluate `c` on `split`, keeping its rows and its cost summary.

        Args:
            c: the candidate.
            split: "train", "val" or "test".
        """
        slug = "".join(ch if ch.isalnum() else "-" for ch in c.label)
        ckpt = self.run_dir / "eval" / "objective" / f"{slug}_{split}.jsonl"
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        ckpt.unlink(missing_ok=True)  # scored afresh: a resumed row would carry no cost
        with self.scope_for(c.model), self.costs.watching():
            res = score_split(c.program, self.by_split[split], self.scorer, split=split, threads=self.threads,
                           manifest=self.manifest, checkpoint=ckpt, progress=False, desc=f"{c.label} {split}",
                           item_scope=lambda item: self.costs.scope((c.label, split, item.id)))
        c.evals[split] = res
        c.costs[split] = self.costs.summary([(c.label, split, r.id) for r in res.rows])
        if split == "test" and self.on_test is not None:
            self.on_test(c.program)
