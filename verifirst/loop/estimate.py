"""What a run will spend, before it spends anything: calls per role and phase, tokens, USD.

`estimate_run` reads the configuration the one run loop would run (program, splits, engine,
budget, LMs by role) and counts the LM calls each phase makes: the evaluation of every split
before optimization, the optimizer's own calls, the evaluation of every split after it. No model
is called and nothing is written.

- Evaluations: one program run per item, each predictor of the program called once per run
  (a dspy.ReAct loop counts up to its max_iters + 1).
- dspy.GEPA (`gepa_lines`): the seed program's validation pass, then iterations of a training minibatch scored for
  the parent and for the child (2 x reflection_minibatch_size metric calls) until max_metric_calls
  (or the `auto` budget dspy.GEPA derives) is spent; GEPA stops at the first iteration boundary
  past it, so the count is "about". One reflection call per iteration ("up to": an iteration whose
  minibatch is already perfect, or whose child is accepted, costs fewer or other calls).
- An engine with an `estimate(builder)` method (the Engine protocol's optional part) adds its own
  optimize-phase lines to the EstimateBuilder: the domain's engines do (AutoRefine and SIMBA in
  optimizers/_estimates.py; verifirst's GEPA engine through `gepa_lines`).
- Any other optimizer: its own calls are not estimated (said in the notes).

Tokens come from the actual prompts: the program's predictors are formatted with the DSPy adapter
the run uses for a sample of items (the optimizers' prompts likewise, with placeholders for what a
model would have answered), counted as characters / 4 as the spend meter counts them. Completion
tokens are a range: a typical answer (TYPICAL_FIELD_TOKENS per output field) for the low end, the
role's max_tokens (or the spend meter's DEFAULT_MAX_TOKENS) for the high end. USD uses the prices
the run would use (the budget's `prices`, then LiteLLM's bundled map). Retries, and calls the LM
cache would serve, are not counted: with the cache on, a run sends fewer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from verifirst.core.engine import Budget, EngineContext
from verifirst.loop.splits import SPLITS, SplitManifest

TYPICAL_FIELD_TOKENS = 10  # low end of a completion: tokens per output field of a terse answer
PLACEHOLDER_CHARS = 400  # an input no sample item carries (a later stage's input, a model's answer)
SAMPLE_ITEMS = 3  # items whose prompts are formatted
FEEDBACK_CHARS = (40, 400)  # a metric's feedback shown to GEPA's reflection (low, high)
BOUNDS = ("exact", "about", "up to")


def ceil_div(a: int, b: int) -> int:
    return -(-a // b) if b > 0 else 0


@dataclass
class Line:
    """One role x phase of the estimate.

    Args:
        phase: "before train", "optimize", "after test", "report", ...
        role: the usage role the calls are counted under (the LM's role).
        what: what makes these calls.
        calls: LM calls.
        prompt_tokens: prompt tokens per call (low, high).
        completion_tokens: completion tokens per call (low, high).
        model: the model priced.
        price: (USD per input token, USD per output token), None when no price is known.
        bound: "exact", "about" or "up to" (the run may stop earlier and call less).
    """

    phase: str
    role: str
    what: str
    calls: int
    prompt_tokens: tuple[int, int]
    completion_tokens: tuple[int, int]
    model: str | None = None
    price: tuple[float, float] | None = None
    bound: str = "exact"

    @property
    def tokens(self) -> tuple[int, int]:
        """(low, high) prompt + completion tokens of all the calls."""
        return (self.calls * (self.prompt_tokens[0] + self.completion_tokens[0]),
                self.calls * (self.prompt_tokens[1] + self.completion_tokens[1]))

    @property
    def usd(self) -> tuple[float, float] | None:
        """(low, high) USD, or None without a known price."""
        if self.price is None:
            return None
        pi, po = self.price
        return (self.calls * (self.prompt_tokens[0] * pi + self.completion_tokens[0] * po),
                self.calls * (self.prompt_tokens[1] * pi + self.completion_tokens[1] * po))

    def as_dict(self) -> dict:
        usd = self.usd
        return {"phase": self.phase, "role": self.role, "what": self.what, "calls": self.calls, "bound": self.bound,
                "prompt_tokens_per_call": list(self.prompt_tokens),
                "completion_tokens_per_call": list(self.completion_tokens),
                "tokens_low": self.tokens[0], "tokens_high": self.tokens[1], "model": self.model,
                "usd_low": None if usd is None else round(usd[0], 6),
                "usd_high": None if usd is None else round(usd[1], 6)}


@dataclass
class SpendEstimate:
    """What `vf.optimize(..., dry_run=True)` returns: calls, tokens and USD per role and phase.

    Args:
        lines: one Line per role x phase.
        engine: the optimizer's name ("none": evaluation only).
        sizes: items per split.
        limits: the run's spend limits ({"max_usd": ..., ...}; per role under "per_role").
        notes: what the estimate does not count, and why a number is a bound.
    """

    lines: list[Line] = field(default_factory=list)
    engine: str = "none"
    sizes: dict = field(default_factory=dict)
    limits: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, line: Line) -> None:
        """Add a line (calibration adds its report steps).

        Args:
            line: the role x phase to add; one without calls is left out.
        """
        if line.calls > 0:
            self.lines.append(line)

    def by_role(self) -> dict[str, dict]:
        """{role: {calls, tokens_low, tokens_high, usd_low, usd_high, bound}} over every phase."""
        out: dict[str, dict] = {}
        for ln in self.lines:
            r = out.setdefault(ln.role, {"calls": 0, "tokens_low": 0, "tokens_high": 0, "usd_low": 0.0,
                                         "usd_high": 0.0, "bound": "exact", "priced": True})
            r["calls"] += ln.calls
            r["tokens_low"] += ln.tokens[0]
            r["tokens_high"] += ln.tokens[1]
            usd = ln.usd
            if usd is None:
                r["priced"] = False
            else:
                r["usd_low"] += usd[0]
                r["usd_high"] += usd[1]
            r["bound"] = max(r["bound"], ln.bound, key=BOUNDS.index)
        for r in out.values():
            if not r.pop("priced"):
                r["usd_low"] = r["usd_high"] = None
        return out

    @property
    def total(self) -> dict:
        """{calls, tokens_low, tokens_high, usd_low, usd_high, bound} for the whole run (usd None when a
        model has no known price)."""
        roles = self.by_role().values()
        priced = all(r["usd_low"] is not None for r in roles)
        bound = max([r["bound"] for r in roles] or ["exact"], key=BOUNDS.index)
        return {"calls": sum(r["calls"] for r in roles), "tokens_low": sum(r["tokens_low"] for r in roles),
                "tokens_high": sum(r["tokens_high"] for r in roles),
                "usd_low": sum(r["usd_low"] for r in roles) if priced else None,
                "usd_high": sum(r["usd_high"] for r in roles) if priced else None, "bound": bound}

    def over_limits(self) -> list[str]:
        """What the high end of the estimate would cross: one sentence per max_usd limit (the run's and
        each role's) it exceeds; empty when none."""
        out = []
        cap = self.limits.get("max_usd")
        high = self.total["usd_high"]
        if cap is not None and high is not None and high > cap:
            out.append(f"the estimate (up to {_usd(high)}) exceeds max_usd {cap:g} for the run")
        roles = self.by_role()
        for role, lim in sorted((self.limits.get("per_role") or {}).items()):
            cap = lim.get("max_usd")
            high = (roles.get(role) or {}).get("usd_high")
            if cap is not None and high is not None and high > cap:
                out.append(f"the estimate for role {role} (up to {_usd(high)}) exceeds its max_usd {cap:g}")
        return out

    def as_dict(self) -> dict:
        """JSON-able: lines, by_role, total, limits, notes."""
        return {"engine": self.engine, "sizes": dict(self.sizes), "lines": [ln.as_dict() for ln in self.lines],
                "by_role": self.by_role(), "total": self.total, "limits": self.limits, "notes": list(self.notes),
                "over_limits": self.over_limits()}

    def table(self) -> Any:
        """The estimate as a rich Table (role x phase, calls, tokens, USD low-high)."""
        from rich.table import Table

        t = Table(title=f"dry run: spend estimate ({self.engine}; no model called, nothing written)",
                  title_justify="left")
        for col, just in (("phase", "left"), ("role", "left"), ("what", "left"), ("calls", "right"),
                          ("tokens (low-high)", "right"), ("USD (low-high)", "right")):
            t.add_column(col, justify=just)  # type: ignore[arg-type]
        for ln in self.lines:
            t.add_row(ln.phase, ln.role, ln.what, _calls(ln.calls, ln.bound), _range(*ln.tokens),
                      "unknown price" if ln.usd is None else _usd_range(*ln.usd))
        t.add_section()
        for role, r in sorted(self.by_role().items()):
            t.add_row("all phases", role, "", _calls(r["calls"], r["bound"]), _range(r["tokens_low"], r["tokens_high"]),
                      "unknown price" if r["usd_low"] is None else _usd_range(r["usd_low"], r["usd_high"]))
        tot = self.total
        t.add_row("[bold]total[/bold]", "", "", _calls(tot["calls"], tot["bound"]),
                  _range(tot["tokens_low"], tot["tokens_high"]),
                  "unknown price" if tot["usd_low"] is None else _usd_range(tot["usd_low"], tot["usd_high"]))
        return t

    def render(self, width: int = 140) -> str:
        """The table, the notes and any limit the estimate exceeds, as text.

        Args:
            width: the text width.
        """
        import io

        from rich.console import Console

        buf = io.StringIO()
        con = Console(file=buf, width=width, force_terminal=False, color_system=None, highlight=False)
        con.print(self.table())
        for note in self.notes:
            con.print(f"note: {note}", markup=False)
        for over in self.over_limits():
            con.print(f"warning: {over}", markup=False)
        return buf.getvalue()


def _calls(n: int, bound: str) -> str:
    return f"up to {n}" if bound == "up to" else f"~{n}" if bound == "about" else str(n)


def _range(lo: float, hi: float) -> str:
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


def _usd(x: float) -> str:
    return f"${x:.2f}" if x >= 0.01 or x == 0 else f"${x:.2g}"


def _usd_range(lo: float, hi: float) -> str:
    return _usd(lo) if lo == hi else f"{_usd(lo)}-{_usd(hi)}"


# -- LMs: role, price, completion cap ----------------------------------------------------------------

class _LMInfo:
    """What the estimate needs of an LM: its usage role, the model it is priced as, its price and
    completion cap."""

    def __init__(self, lm: Any, default_role: str, prices: Any):
        from verifirst.lm.spend import DEFAULT_MAX_TOKENS

        self.role = getattr(lm, "role", None) or default_role
        engine = getattr(lm, "engine", None)
        endpoints = getattr(engine, "endpoints", None)
        if endpoints:  # a routed role is reserved at its dearest endpoint, as the spend meter does
            models = [ep.model for ep in endpoints]
        else:
            models = [getattr(lm, "model", None) or "unknown"]
        found = [prices.per_token(m) for m in models]
        self.model = " | ".join(dict.fromkeys(models))
        self.price = None if any(p is None for p in found) else (max(p[0] for p in found),
                                                                 max(p[1] for p in found))
        kw = getattr(lm, "kwargs", None) or {}
        self.max_tokens = int(kw.get("max_tokens") or kw.get("max_completion_tokens") or DEFAULT_MAX_TOKENS)

    def completion(self, fields: int, typical: int | None = None) -> tuple[int, int]:
        """(low, high) completion tokens: a typical answer, capped by max_tokens; max_tokens."""
        low = typical if typical is not None else TYPICAL_FIELD_TOKENS * max(fields, 1)
        return (min(low, self.max_tokens), self.max_tokens)


# -- prompts --------------------------------------------------------------------------------------------

def tokens_of(chars: float) -> int:
    from verifirst.lm.spend import CHARS_PER_TOKEN

    return int(math.ceil(chars / CHARS_PER_TOKEN))


def _message_chars(messages: Any) -> int:
    from verifirst.lm.spend import prompt_chars

    return prompt_chars((), {"messages": messages})


def format_chars(adapter: Any, signature: Any, inputs: dict, demos: Sequence = ()) -> int:
    """Characters of the messages `adapter` formats for one call (no model is called).

    Args:
        adapter: the DSPy adapter the run uses.
        signature: the predictor's signature.
        inputs: the call's input values (a missing input field gets a placeholder).
        demos: the predictor's demos.
    """
    filled = {}
    for name in signature.input_fields:
        value = inputs.get(name)
        filled[name] = "x" * PLACEHOLDER_CHARS if value is None else value
    try:
        return _message_chars(adapter.format(signature, list(demos or []), filled))
    except Exception:  # an adapter that cannot format without a model: the inputs and instructions' size
        return len(signature.instructions or "") + sum(len(str(v)) for v in filled.values()) + 400


@dataclass
class _Predictor:
    name: str
    lm: Any
    signature: Any
    demos: list
    calls_per_run: int  # how many times one program run calls it (at most)


def _predictors(program: Any) -> list[_Predictor]:
    """The program's predictors, each with the calls one run makes of it (a dspy.ReAct's loop: up to
    max_iters, its extraction once)."""
    import dspy

    loops: dict[int, int] = {}
    for _, mod in (program.named_sub_modules() if hasattr(program, "named_sub_modules") else []):
        if isinstance(mod, dspy.ReAct):
            loops[id(mod.react)] = int(getattr(mod, "max_iters", 1) or 1)
    preds = program.named_predictors() if hasattr(program, "named_predictors") else []
    return [_Predictor(n, getattr(p, "lm", None), p.signature, list(getattr(p, "demos", []) or []),
                       loops.get(id(p), 1)) for n, p in preds]


def _sample(items: Sequence[Any], n: int = SAMPLE_ITEMS) -> list[Any]:
    """Up to n items spread over the list (deterministic)."""
    if len(items) <= n:
        return list(items)
    step = len(items) / n
    return [items[int(k * step)] for k in range(n)]


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


# -- the estimate -------------------------------------------------------------------------------------

class EstimateBuilder:
    """What an engine's `estimate(builder)` adds its optimize-phase lines to (the Engine protocol's
    optional estimate method): the splits (`by_split`), the program's predictors (`preds`), sample
    items (`samples`), the LMs by role (`task`, `reflection`, `teacher`: model, price, max_tokens,
    completion range), the adapter, and the estimate itself (`est`: `add(Line)`, `notes`).
    `program_lines` adds the program's own calls; `part_chars` sizes one call of an engine's own
    predictor."""

    def __init__(self, program: Any, items: Sequence[Any], manifest: SplitManifest, engine: Any, budget: Budget,
                 ctx: EngineContext, splits: Sequence[str], adapter: Any, sample: int):
        from verifirst.lm.spend import Prices

        import dspy

        self.program, self.manifest, self.engine, self.budget, self.ctx = program, manifest, engine, budget, ctx
        self.by_split = {s: manifest.select(items, s) for s in SPLITS}
        self.splits = [s for s in splits if self.by_split.get(s)]
        self.prices = Prices(budget.prices)
        self.adapter = adapter or _default_adapter()
        task_lm = ctx.task_lm if ctx.task_lm is not None else dspy.settings.lm
        self.task = _LMInfo(task_lm, "task", self.prices)
        self.task_lm = task_lm
        self.reflection = _LMInfo(ctx.reflection_lm if ctx.reflection_lm is not None else task_lm, "reflection",
                                  self.prices)
        self.teacher = _LMInfo(ctx.teacher_lm if ctx.teacher_lm is not None else
                               (ctx.reflection_lm if ctx.reflection_lm is not None else task_lm), "teacher", self.prices)
        self.samples = _sample([it for s in SPLITS for it in self.by_split[s]], sample)
        self.preds = _predictors(program)
        self.est = SpendEstimate(engine=getattr(engine, "name", "none") if engine is not None else "none",
                                 sizes={s: len(v) for s, v in self.by_split.items()}, limits=_limits(budget))

    # the program's calls per run, by LM
    def program_lines(self, n_runs: int, phase: str, what: str, bound: str = "exact",
                      extra_instruction_tokens: int = 0) -> None:
        """One line per LM the program's predictors use: n_runs program runs."""
        if n_runs <= 0:
            return
        groups: dict[int, list[_Predictor]] = {}
        for p in self.preds:
            groups.setdefault(id(p.lm) if p.lm is not None else 0, []).append(p)
        for key, preds in groups.items():
            lm = preds[0].lm if key else self.task_lm
            info = self.task if key == 0 else _LMInfo(lm, "task", self.prices)
            calls_per_run = sum(p.calls_per_run for p in preds)
            prompt = mean([sum(p.calls_per_run * self._prompt_tokens(p, it) for p in preds)
                           for it in self.samples]) / max(calls_per_run, 1)
            fields = mean([len(p.signature.output_fields) for p in preds])
            low = int(round(prompt))
            self.est.add(Line(phase, info.role, what, n_runs * calls_per_run,
                              (low, low + extra_instruction_tokens), info.completion(round(fields)), info.model,
                              info.price, bound))

    def _prompt_tokens(self, p: _Predictor, item: Any) -> int:
        inputs = dict(getattr(item, "inputs", {}) or {})
        return tokens_of(format_chars(self.adapter, p.signature, inputs, p.demos))

    def evaluations(self, phase: str, bound: str = "exact", extra_instruction_tokens: int = 0) -> None:
        for s in self.splits:
            self.program_lines(len(self.by_split[s]), f"{phase} {s}", f"the program on the {s} split", bound,
                               extra_instruction_tokens)

    def build(self) -> SpendEstimate:
        if not self.preds:
            self.est.notes.append("the program has no DSPy predictors: its LM calls are not estimated")
        self.evaluations("before")
        growth = 0
        if self.engine is not None:
            model = getattr(self.engine, "estimate", None)
            if model is None and _engine_kind(self.engine) == "dspy.GEPA":
                model = _dspy_gepa  # a teleprompter: DSPy's own, not a domain's
            if model is None:
                self.est.notes.append(f"the optimizer {self.est.engine!r} is not modelled: its own calls are not "
                                      f"counted (only the evaluations before and after it)")
            else:
                growth = model(self) or 0
            self.evaluations("after", "exact", growth)
        self.est.notes.append("retries and calls served by the LM cache are not counted; verifier-side LM calls "
                              "(an LLM-judged verifier) are not counted")
        run_dir = getattr(self.ctx, "run_dir", None)
        if run_dir is not None and (Path(run_dir) / "run_state.json").exists():
            self.est.notes.append(f"{run_dir} resumes: its finished evaluations are kept and, with the LM cache on, "
                                  "calls already made are free, so the run makes fewer calls than these")
        return self.est


def _default_adapter() -> Any:
    from verifirst.lm import FastJSONAdapter

    return FastJSONAdapter()


def _limits(budget: Budget) -> dict:
    from verifirst.lm.spend import LIMITS

    out: dict[str, Any] = {k: getattr(budget, k) for k in LIMITS if getattr(budget, k, None) is not None}
    if budget.per_role:
        out["per_role"] = {r: dict(v) for r, v in budget.per_role.items()}
    return out


def _engine_kind(engine: Any) -> str:
    """The engine's model key: its name, or the class of the teleprompter a TeleprompterEngine wraps."""
    tp = getattr(engine, "teleprompter", None)
    if tp is not None:
        return f"dspy.{type(tp).__name__}"
    return str(getattr(engine, "name", ""))


# -- engine models: each adds the optimize phase's lines and returns the prompt growth (tokens) the
#    optimized program may carry into the after-evaluations

def gepa_lines(b: EstimateBuilder, *, minibatch: int, max_metric_calls: int | None, auto: str | None,
               selector: Any = "round_robin", use_merge: bool = False) -> int:
    """GEPA's optimize-phase lines (dspy.GEPA's algorithm, whoever drives it): the seed's validation
    pass, minibatch pairs until the metric-call budget is spent, one reflection per iteration.

    Args:
        b: the estimate being built.
        minibatch: the reflection minibatch size.
        max_metric_calls: GEPA's metric-call budget (None: from `auto`).
        auto: "light" | "medium" | "heavy" when no max_metric_calls.
        selector: the component selector ("all" reflects on every predictor each iteration).
        use_merge: whether merges take metric calls from the same budget.

    Returns:
        the tokens a child's instructions may add to the program's prompt.
    """
    import dspy

    train, val = b.by_split["train"], b.by_split["val"]
    n_val = len(val) if val else len(train)
    components = max(len(b.preds), 1)
    if max_metric_calls:
        budget, how = int(max_metric_calls), f"max_metric_calls {max_metric_calls}"
    else:
        auto = auto or "light"
        from dspy.teleprompt.gepa.gepa import AUTO_RUN_SETTINGS

        budget = int(dspy.GEPA.auto_budget(None, num_preds=components,  # type: ignore[arg-type]
                                           num_candidates=AUTO_RUN_SETTINGS[auto]["n"], valset_size=n_val))
        how = f"auto={auto}: {budget} metric calls"
    iters = ceil_div(max(budget - n_val, 0), 2 * minibatch)
    runs = n_val + iters * 2 * minibatch
    per_iter = components if selector == "all" else 1
    refl = iters * per_iter
    b.program_lines(n_val, "optimize", "GEPA: the seed program's validation pass", "exact")
    # a child's instruction is at most what the reflection LM writes
    growth = max(0, b.reflection.max_tokens - tokens_of(mean([len(p.signature.instructions or "") for p in b.preds])))
    b.program_lines(runs - n_val, "optimize", f"GEPA: {iters} iterations x 2 minibatches of {minibatch} ({how})",
                    "about", growth)
    if refl:
        chars = (_gepa_reflection_chars(b, minibatch, False), _gepa_reflection_chars(b, minibatch, True))
        instr = tokens_of(mean([len(p.signature.instructions or "") for p in b.preds]))
        b.est.add(Line("optimize", b.reflection.role, "GEPA reflection: one new instruction per iteration"
                       + (f" ({components} components)" if per_iter > 1 else ""), refl,
                       (tokens_of(chars[0]), tokens_of(chars[1])),
                       b.reflection.completion(1, instr + TYPICAL_FIELD_TOKENS), b.reflection.model,
                       b.reflection.price, "up to"))
    b.est.notes.append(f"GEPA spends about its metric-call budget ({budget}, plus at most one iteration past it); "
                       "reflection is a bound: an iteration whose minibatch is already perfect reflects not at all, "
                       "and an accepted child's validation pass takes the place of later iterations")
    if use_merge:
        b.est.notes.append("GEPA merges (use_merge) spend metric calls from the same budget and call no reflection")
    return growth


def _gepa_reflection_chars(b: EstimateBuilder, minibatch: int, high: bool) -> int:
    """Characters of one reflection prompt: DSPy's instruction proposer over a minibatch of sample items with
    placeholder answers and feedback (terse ones for the low end; answers of the task's max_tokens and long
    feedback for the high end)."""
    try:
        from dspy.teleprompt.gepa.instruction_proposal import ProposeInstruction
    except ImportError:  # an older DSPy: its proposer's prompt is about this size
        ProposeInstruction = None
    pred = b.preds[0] if b.preds else None
    items = b.by_split["train"][:minibatch] or b.samples
    examples = []
    fields = list(pred.signature.output_fields) if pred else ["answer"]
    size = (b.task.max_tokens * 4 // len(fields)) if high else TYPICAL_FIELD_TOKENS * 4
    for it in items:
        examples.append({"Inputs": dict(getattr(it, "inputs", {}) or {}), "Generated Outputs":
                         {k: "x" * size for k in fields}, "Feedback": "x" * FEEDBACK_CHARS[int(high)]})
    instruction = pred.signature.instructions if pred else ""
    if ProposeInstruction is None:
        return len(instruction) + sum(len(str(e)) for e in examples) + 1500
    import dspy

    return format_chars(dspy.JSONAdapter(), ProposeInstruction,
                        {"current_instruction": instruction, "examples_with_feedback": examples})


def _dspy_gepa(b: EstimateBuilder) -> int:
    tp = b.engine.teleprompter
    calls = getattr(tp, "max_metric_calls", None)
    full = getattr(tp, "max_full_evals", None)
    if not calls and full:
        calls = full * (len(b.by_split["train"]) + len(b.by_split["val"]))
    return gepa_lines(b, minibatch=int(getattr(tp, "reflection_minibatch_size", 3) or 3), max_metric_calls=calls,
                      auto=getattr(tp, "auto", None), selector=getattr(tp, "component_selector", "round_robin"),
                      use_merge=bool(getattr(tp, "use_merge", False)))


def item_chars(it: Any) -> int:
    """Characters of an item's inputs."""
    return sum(len(str(v)) for v in (getattr(it, "inputs", {}) or {}).values())


def part_chars(b: EstimateBuilder, signature_of: Any, extra: dict) -> int:
    """Characters of one call of an engine's own predictor, formatted with the adapter the run uses
    over the sample items; a predictor that cannot be built: the inputs' size plus an instruction's.

    Args:
        b: the estimate being built.
        signature_of: () -> the predictor's DSPy signature.
        extra: the inputs the engine adds to an item's (placeholders for what a model would answer).
    """
    try:
        sig = signature_of()
    except Exception:
        sig = None
    if sig is None:
        return int(mean([sum(len(str(v)) for v in extra.values()) + item_chars(it) + 1500 for it in b.samples]))
    return int(mean([format_chars(b.adapter, sig, {**dict(getattr(it, "inputs", {}) or {}), **extra})
                     for it in b.samples] or [0]))


def estimate_run(program: Any, items: Sequence[Any], manifest: SplitManifest, engine: Any, budget: Budget,
                 ctx: EngineContext, *, splits: Sequence[str] = SPLITS, adapter: Any = None,
                 sample: int = SAMPLE_ITEMS) -> SpendEstimate:
    """The calls, tokens and USD a run of this configuration implies, per role and phase; no model is
    called and nothing is written.

    Args:
        program: the DSPy program the run optimizes.
        items: every item of the suite.
        manifest: the split manifest.
        engine: the optimizer engine, or None (evaluation only).
        budget: the run's budget (engine budget, spend limits, prices).
        ctx: the run context (LMs by role).
        splits: the splits evaluated before and after.
        adapter: the DSPy adapter the run formats prompts with (default: verifirst's JSON adapter).
        sample: how many items' prompts are formatted.
    """
    return EstimateBuilder(program, items, manifest, engine, budget, ctx, splits, adapter, sample).build()
