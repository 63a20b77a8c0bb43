"""One interface over every optimizer engine, and how an `optimizer` argument becomes one.

An engine gets a program, a metric, train and validation examples (already admitted by the
split guard), a budget and a run context; it returns the optimized program plus its
per-iteration history. The driver (`verifirst.loop.driver.optimize`) does everything around it:
guard, before/after evaluation on every split, paired tests, tracking.

Engines are found by name through `registry.ENGINES` (no engine module is imported here), any
`dspy.Teleprompter` instance runs through `TeleprompterEngine`, and an object with an
engine's `compile` is used as it is.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol


SPEND_LIMITS = ("max_usd", "max_tokens", "max_lm_calls", "max_wall_s")
_WHOLE = ("max_tokens", "max_lm_calls")  # counted in whole units


def check_limit(value: Any, field: str, *, integer: bool = False) -> None:
    """Refuse a limit that is not a positive number: 0 is never "unlimited" (leave the limit out).

    Args:
        value: the limit given.
        field: the option's name in the message (`budget.max_usd`, `--max-usd`).
        integer: it must be a whole number.

    Raises:
        InputError: naming the field and what it expects.
    """
    from .errors import InputError

    kind = "an integer >= 1" if integer else "a number > 0"
    ok = isinstance(value, int if integer else (int, float)) and not isinstance(value, bool)
    if not ok or not 0 < value < float("inf"):  # False for NaN too; inf is refused as nan is (a limit is finite)
        raise InputError(f"{value!r} is not a limit", field=field,
                         expected=f"{kind}, finite (0 is not unlimited, nor is inf: leave the limit out for none)")


@dataclass
class Budget:
    """What a run may spend: the engine's own budget, and a hard cap on money, tokens, LM calls and
    time for the whole run (every role together) and, where given, per role.

    Args:
        max_metric_calls: metric calls (GEPA; SIMBA derives its steps from it).
        auto: "light" | "medium" | "heavy" (GEPA, when no max_metric_calls).
        max_iters: AutoRefine iterations (0: score the start only), SIMBA steps.
        num_threads: threads the engine may use.
        extra: engine-specific settings.
        max_usd: US dollars for the whole run, all roles (prices: LiteLLM's map, or `prices`).
        max_tokens: prompt + completion tokens for the whole run.
        max_lm_calls: requests sent to models (retries included; cache hits are free).
        max_wall_s: seconds of wall time.
        per_role: {role: {"max_usd": ..., ...}} limits for one role (task, reflection, teacher, judge).
        prices: {model: {"input": USD per 1M tokens, "output": USD per 1M tokens}} for models
            LiteLLM's price map does not know (self-hosted, custom).

    Every LM call is admitted against what is left before it is sent; the call that would cross a
    limit is not sent and the run stops (verifirst.lm.spend).
    """

    max_metric_calls: int | None = None
    auto: str | None = None
    max_iters: int | None = None
    num_threads: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    max_usd: float | None = None
    max_tokens: int | None = None
    max_lm_calls: int | None = None
    max_wall_s: float | None = None
    per_role: dict[str, dict] = field(default_factory=dict)
    prices: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from .errors import InputError

        if self.max_metric_calls is not None:
            check_limit(self.max_metric_calls, "budget.max_metric_calls", integer=True)
        if self.max_iters is not None and (isinstance(self.max_iters, bool) or not isinstance(self.max_iters, int)
                                           or self.max_iters < 0):
            raise InputError(f"{self.max_iters!r} is not a number of iterations", field="budget.max_iters",
                             expected="an integer >= 0")
        if isinstance(self.num_threads, bool) or not isinstance(self.num_threads, int) or self.num_threads < 1:
            raise InputError(f"{self.num_threads!r} is not a number of threads", field="budget.num_threads",
                             expected="an integer >= 1")
        for key in SPEND_LIMITS:
            if getattr(self, key) is not None:
                check_limit(getattr(self, key), f"budget.{key}", integer=key in _WHOLE)
        if not isinstance(self.per_role, dict):
            raise InputError("per_role is not a table", field="budget.per_role", expected="{role: {limit: value}}")
        for role, limits in self.per_role.items():
            if not isinstance(limits, dict) or not limits:
                raise InputError(f"the limits of role {role!r} are not a table", field=f"budget.per_role.{role}",
                                 expected="{max_usd = ..., max_tokens = ..., max_lm_calls = ..., max_wall_s = ...}")
            for key, value in limits.items():
                if key not in SPEND_LIMITS:
                    raise InputError(f"unknown limit {key!r}", field=f"budget.per_role.{role}.{key}",
                                     expected=", ".join(SPEND_LIMITS))
                check_limit(value, f"budget.per_role.{role}.{key}", integer=key in _WHOLE)
        for model, price in (self.prices or {}).items():
            bad = not isinstance(price, dict) or set(price) != {"input", "output"} or any(
                isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 for v in price.values())
            if bad:
                raise InputError(f"the price of {model!r} is not {{input, output}}", field=f"budget.prices.{model}",
                                 expected="{input = USD per 1M input tokens, output = USD per 1M output tokens}, "
                                          "numbers >= 0")

    @property
    def spend_limited(self) -> bool:
        """Whether any money, token, call or time limit is set (for the run or a role)."""
        return any(getattr(self, k) is not None for k in SPEND_LIMITS) or bool(self.per_role)


@dataclass
class EngineResult:
    """What an engine returns.

    program: the selected program. history: one dict of metrics per iteration. details:
    engine-specific, JSON-able. stopped: "budget" when the run's budget refused a call and the
    engine stopped at its last completed iteration, `program` being the best of those on
    validation (an engine that cannot do so raises or returns without it, and the loop keeps the
    start program).
    """

    program: Any
    history: list[dict] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    stopped: str | None = None


@dataclass
class EngineContext:
    """What an engine may use besides the data: LMs by role, a run dir, a logger."""

    run_dir: Path
    reflection_lm: Any = None
    teacher_lm: Any = None
    task_lm: Any = None
    log_metrics: Callable[[dict, int], None] = lambda metrics, step: None
    log_artifact: Callable[[Path], None] = lambda path: None
    seed: int = 0
    compile_kwargs: dict[str, Any] = field(default_factory=dict)  # extra arguments to a teleprompter's compile


class Engine(Protocol):
    """An optimizer: `compile` gets the program, the run's metric, train and validation examples, the
    budget and the run context, and returns an EngineResult. An engine may also have
    `estimate(builder) -> int`: it adds the LM calls it would make to a dry-run estimate
    (verifirst.loop.estimate.EstimateBuilder) and returns the tokens its result may add to the
    program's prompt; an engine without it is reported as not modelled. And it may have
    `check_budget(budget, n_train, n_val)`, called before any LM call, which raises InputError for
    a budget it cannot honour (AutoRefine refuses max_metric_calls, which it does not count): a
    budget field the engine ignores must be refused there, never dropped in silence."""

    name: str

    def compile(self, program: Any, metric: Any, trainset: list, valset: list, budget: Budget,
                ctx: EngineContext) -> EngineResult: ...


class TeleprompterEngine:
    """Any `dspy.Teleprompter` (MIPROv2, BootstrapFewShot, COPRO, a configured dspy.GEPA) as an engine.

    It is handed train and validation examples only. While it compiles, its metric is the run's
    metric (one metric path: every item it scores is recorded in the split manifest and a test
    item is refused as leakage); its own metric is put back afterwards. compile also gets the
    run's seed (where it takes one) and the run's compile_kwargs.
    """

    def __init__(self, teleprompter: Any, name: str | None = None):
        """Args:
            teleprompter: a dspy.Teleprompter instance, configured as you like.
            name: the name in reports (default: the teleprompter's class name).
        """
        self.teleprompter = teleprompter
        self.name = name or type(teleprompter).__name__

    def accepts_valset(self) -> bool:
        params = inspect.signature(self.teleprompter.compile).parameters
        return "valset" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())

    def compile_arguments(self, ctx: EngineContext) -> dict[str, Any]:
        """compile's extra arguments for this run (seed, ctx.compile_kwargs); refuses bad ones.

        Args:
            ctx: the run context.
        """
        tp = self.teleprompter
        return compile_arguments(tp.compile, self.name, ctx, OPTIONAL_PACKAGES.get(type(tp).__name__, ()))

    def compile(self, program, metric, trainset, valset, budget: Budget, ctx: EngineContext) -> EngineResult:
        tp = self.teleprompter
        kwargs = self.compile_arguments(ctx)
        # dspy.GEPA keeps its metric as metric_fn, the others as metric
        attrs = [a for a in ("metric", "metric_fn") if hasattr(tp, a)]
        # MIPROv2 reads `seed or self.seed` (a seed of 0 is dropped, dspy#10321): its own seed is set too
        attrs += ["seed"] if "seed" in kwargs and isinstance(getattr(tp, "seed", None), int) else []
        own = {a: getattr(tp, a) for a in attrs}
        for a in attrs:
            setattr(tp, a, kwargs["seed"] if a == "seed" else metric)
        try:
            if self.accepts_valset():
                kwargs["valset"] = valset
            best = tp.compile(program, trainset=trainset, **kwargs)
        except ModuleNotFoundError as e:
            raise missing_dependency(self.name, e.name) from None
        finally:
            for a, v in own.items():
                setattr(tp, a, v)
        return EngineResult(best, [], {"teleprompter": type(tp).__name__,
                                       "valset_passed": self.accepts_valset()})


# optional packages some DSPy optimizers import inside compile, and the extra that installs them
OPTIONAL_PACKAGES = {"MIPROv2": ("optuna",)}
EXTRA_OF = {"optuna": "mipro"}


def missing_dependency(optimizer: str, module: str | None) -> Exception:
    """The error for an optimizer whose optional package is not installed, naming the extra."""
    from verifirst.core.errors import InputError

    extra = EXTRA_OF.get(module or "")
    fix = f"pip install 'verifirst[{extra}]'" if extra else f"pip install {module}"
    return InputError(f"optimizer {optimizer} needs the Python package {module!r}, which is not installed",
                      field="optimizer", expected=fix)


def compile_arguments(compile_fn: Callable, name: str, ctx: EngineContext,
                      packages: tuple[str, ...] = ()) -> dict[str, Any]:
    """What a teleprompter's compile gets besides student, trainset and valset: the run's seed
    (where compile takes one) and ctx.compile_kwargs, checked against compile's signature; the
    optional packages compile imports are checked too (vf.optimize calls this before any LM call).

    Args:
        compile_fn: the teleprompter's compile.
        name: the optimizer's name in errors.
        ctx: the run context (seed, compile_kwargs).
        packages: modules compile imports that an extra provides.
    """
    import importlib.util

    from verifirst.core.errors import InputError

    for module in packages:
        if importlib.util.find_spec(module) is None:
            raise missing_dependency(name, module)
    params = inspect.signature(compile_fn).parameters
    open_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    given = dict(ctx.compile_kwargs or {})
    for key in given:
        if key in ("student", "trainset", "valset"):
            raise InputError(f"compile_kwargs sets {key!r}, which the run passes itself", field=f"compile_kwargs.{key}",
                             expected="other compile arguments; the data comes from the split")
        if key not in params and not open_kw:
            takes = sorted(k for k in params if k not in ("self", "student", "trainset", "valset"))
            raise InputError(f"{name}.compile takes no argument {key!r}", field=f"compile_kwargs.{key}",
                             expected="one of " + (", ".join(takes) or "nothing else"))
    return {**({"seed": ctx.seed} if "seed" in params else {}), **given}


def is_teleprompter(obj: Any) -> bool:
    try:
        from dspy.teleprompt import Teleprompter
    except ImportError:
        return False
    return isinstance(obj, Teleprompter)


def resolve_engine(optimizer: Any, options: dict | None = None, *, source: str | None = None) -> Any:
    """An engine from a name, a dspy.Teleprompter, or an engine object; None for "none".

    Args:
        optimizer: "gepa", "simba", "autorefine", "none", `module:Class`, any registered name,
            a dspy.Teleprompter instance, or an object with compile(program, metric, trainset,
            valset, budget, ctx).
        options: keyword arguments for a named engine's constructor.
        source: the file the name came from (for the error message).
    """
    from verifirst.core import registry
    from verifirst.core.errors import ConfigError

    if optimizer is None or optimizer == "none":
        return None
    if isinstance(optimizer, str):
        cls = registry.resolve("optimizer", registry.ENGINES, optimizer, "optimizer.name", source)
        try:
            return cls(**(options or {}))
        except TypeError as e:
            raise ConfigError(f"optimizer {optimizer!r} does not accept these options: {e}", path=source,
                              field="optimizer", expected="options the optimizer accepts") from None
    if options:
        raise ConfigError("optimizer options go with an optimizer name, not an instance", path=source,
                          field="optimizer", expected="configure the instance itself")
    if is_teleprompter(optimizer):
        return TeleprompterEngine(optimizer)
    if callable(getattr(optimizer, "compile", None)):
        if not getattr(optimizer, "name", None):
            raise ConfigError(f"engine {type(optimizer).__name__} has no name", field="optimizer",
                              expected="an engine with a `name` attribute")
        return optimizer
    raise ConfigError(f"cannot use {type(optimizer).__name__} as an optimizer", path=source, field="optimizer",
                      expected="a name, a dspy.Teleprompter, or an Engine")
