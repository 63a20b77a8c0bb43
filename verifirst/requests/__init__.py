"""The typed request of the optimize/run journey (verifirst.core.request); the verbs' are in requests.verbs.

Each is built once, from `vf.optimize` keywords, `verifirst run` flags plus an experiment file, or
a verb's flags, and checked completely before anything is written or any model is called. What
reaches third-party code is checked against that code: optimizer options against dspy.GEPA's or
dspy.SIMBA's constructor (names, annotated types, the arguments verifirst sets itself), compile
keywords against the teleprompter's compile, run and experiment names against MLflow's rules.
"""
from __future__ import annotations

import inspect
import re
import typing
from typing import Annotated, Any, Callable, Literal, Mapping, Optional, Sequence

from pydantic import AfterValidator, ConfigDict, StrictBool, TypeAdapter, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from verifirst.config import DEFAULT_MAX_ERROR_RATE, MAX_THREADS
from verifirst.core.request import (Fraction, NonEmptyStr, Request, expected_text, interval, refused,
                                    RunDir, UserPath, refusal)
from verifirst.loop.splits import DEFAULT_RATIOS, DEFAULT_SEED, SPLITS

NAME_MAX = 200  # a run's name is also its run directory's (plus a timestamp): NAME_MAX is 255 bytes
MLFLOW_EXPERIMENT_MAX = 500  # mlflow.utils.validation.MAX_EXPERIMENT_NAME_LENGTH
PROMPT_NAME = re.compile(r"^[a-zA-Z0-9_.-]+$")  # mlflow.prompt.constants.PROMPT_NAME_RULE


def _run_name(v: str) -> str:
    if not v.strip() or len(v) > NAME_MAX or any(ord(c) < 32 for c in v):
        raise ValueError(f"a name of 1 to {NAME_MAX} printable characters")
    return v


def _experiment_name(v: str) -> str:
    if not v.strip() or len(v) > MLFLOW_EXPERIMENT_MAX or "\x00" in v:
        raise ValueError(f"an MLflow experiment name: 1 to {MLFLOW_EXPERIMENT_MAX} characters, no NUL")
    return v


RunName = Annotated[str, AfterValidator(_run_name)]
ExperimentName = Annotated[str, AfterValidator(_experiment_name)]
Seed = interval(0, None, integer=True)
Threads = interval(1, MAX_THREADS, integer=True)
Threshold = interval(0, 1, low_open=True)
Margin = interval(0, 1, low_open=True, high_open=True)
Port = interval(1, 65535, integer=True)


def prompt_name(run_name: str) -> str:
    """The prompt-registry name a run registers its instructions under (tracking.callback's rule)."""
    return f"{run_name}-instructions".replace(" ", "-")


def default_run_name(text: str) -> str:
    """A run name made from a data set's name (a path, a Hugging Face id `org/set`): the characters
    MLflow's prompt registry refuses become `-`, cut to NAME_MAX.

    Args:
        text: the suite's name.
    """
    name = re.sub(r"[^a-zA-Z0-9_. -]+", "-", text).strip(" -") or "run"
    return name[:NAME_MAX]


class OptimizeRequest(Request):
    """`vf.optimize`'s keywords, one field each (`verifirst run` and experiment files map onto these)."""

    program: Any
    data: Any
    metric: Any
    optimizer: Any = "gepa"
    splits: Any = DEFAULT_RATIOS
    models: Any = None
    budget: Any = None
    run_dir: Optional[RunDir] = None
    tracking: Any = None
    inputs: Optional[tuple[NonEmptyStr, ...]] = None
    output_field: Optional[NonEmptyStr] = None
    threshold: Optional[Threshold] = None
    optimizer_options: Optional[dict[str, Any]] = None
    seed: Seed = DEFAULT_SEED
    threads: Threads = 1
    workdir: Optional[RunDir] = None
    name: Optional[RunName] = None
    max_error_rate: Optional[Fraction] = DEFAULT_MAX_ERROR_RATE
    progress: Optional[StrictBool] = False
    eval_splits: tuple[Literal["train", "val", "test"], ...] = SPLITS
    stratify: Optional[Callable] = None
    adapter: Any = None
    executor: Any = None
    compile_kwargs: Optional[dict[str, Any]] = None
    no_val: StrictBool = False
    no_test: StrictBool = False
    callbacks: Sequence[Any] = ()
    echo: Optional[Callable] = None
    cache: Optional[UserPath] = None
    config: Optional[dict] = None
    dry_run: StrictBool = False
    confirm: Optional[Callable] = None
    objective: Any = None
    margin: Optional[Margin] = None

    @field_validator("program")
    @classmethod
    def _program(cls, v):
        if not callable(v):
            raise PydanticCustomError("program", "a DSPy program (a dspy.Module)")
        return v

    @field_validator("metric")
    @classmethod
    def _metric(cls, v):
        if not (callable(v) or callable(getattr(v, "verify", None))):
            raise PydanticCustomError("metric", "a Verifier (with verify) or a DSPy metric function")
        return v

    @field_validator("tracking")
    @classmethod
    def _tracking(cls, v):
        from verifirst.core.callbacks import RunCallback

        if v is not None and not isinstance(v, RunCallback) and not callable(getattr(v, "callback", None)):
            raise PydanticCustomError("tracking", "vf.MLflow(...), a RunCallback, or None")
        return v

    @field_validator("adapter")
    @classmethod
    def _adapter(cls, v):
        import dspy

        if v is not None and not isinstance(v, dspy.Adapter):
            raise PydanticCustomError("adapter", "a dspy.Adapter (dspy.ChatAdapter(), dspy.JSONAdapter()) or None")
        return v

    @field_validator("executor")
    @classmethod
    def _executor(cls, v):
        if v is not None and not all(callable(getattr(v, m, None)) for m in ("concurrency", "metric", "close")):
            raise PydanticCustomError("executor", "vf.Threads(), vf.Ray(...), or None")
        return v


# ---- models and budget (vf.optimize's models= and budget=) ------------------------------

MODEL_SPEC_EXPECTED = "a model string, a dict with `model`, a list of endpoints, or a dspy.LM"


def check_model_spec(spec: Any, field: str) -> None:
    """Refuse a model spec make_models cannot build, naming the role: a str, a dict with `model`, a
    list of endpoints (model strings or dicts). A dspy.LM is taken as it is before this check.

    Args:
        spec: the role's spec.
        field: the role's field, e.g. `models.task`.
    """
    from verifirst.config import check_model_dict
    from verifirst.core.errors import InputError

    if isinstance(spec, dict):  # a typo such as `temprature` is refused, not sent to the provider
        check_model_dict(spec, field)
    elif isinstance(spec, list):
        if not spec:
            raise InputError("an empty list of endpoints", field=field, expected=MODEL_SPEC_EXPECTED)
        for i, endpoint in enumerate(spec):
            if not isinstance(endpoint, (str, dict)):
                raise InputError(f"endpoint {i} is a {type(endpoint).__name__}", field=f"{field}[{i}]",
                                 expected="a model string or a dict with `model`")
    elif not isinstance(spec, str) or not spec.strip():
        raise InputError(f"{spec!r} is not a model", field=field, expected=MODEL_SPEC_EXPECTED)


def as_budget(budget: Any, threads: int) -> Any:
    """The run's Budget: the one given, one from a dict of its fields, or the default for `threads`.

    Args:
        budget: a Budget, a dict such as {"max_metric_calls": 200}, or None.
        threads: the run's threads (the default budget's num_threads).
    """
    import dataclasses

    from verifirst.core.engine import Budget
    from verifirst.core.errors import InputError

    if budget is None:
        return Budget(num_threads=threads)
    if isinstance(budget, Budget):
        return budget
    if not isinstance(budget, dict):
        raise InputError(f"budget is a {type(budget).__name__}", field="budget",
                         expected="a vf.Budget or a dict of its fields")
    names = [f.name for f in dataclasses.fields(Budget)]
    unknown = sorted(set(budget) - set(names))
    if unknown:
        raise InputError(f"unknown budget field {unknown[0]!r}", field=f"budget.{unknown[0]}",
                         expected="one of " + ", ".join(names))
    return Budget(**{"num_threads": threads, **budget})



# ---- third-party arguments ---------------------------------------------------------------

# What a named engine hands to DSPy, and the arguments it sets itself (an option naming one would
# collide with verifirst's, or break GEPA's "exactly one budget" rule, after files were written).
THIRD_PARTY: dict[str, tuple[str, frozenset[str], str]] = {
    "gepa": ("GEPA", frozenset({"metric", "reflection_lm", "num_threads", "track_stats", "log_dir", "gepa_kwargs",
                                "warn_on_score_mismatch", "max_metric_calls", "auto", "max_full_evals"}),
             "[optimizer] max_metric_calls or auto (the budget), [models] reflection, [experiment] threads"),
    "simba": ("SIMBA", frozenset({"metric", "max_steps", "num_threads", "prompt_model"}),
              "[optimizer] max_iters or max_metric_calls (the steps), [models] reflection, [experiment] threads"),
}


def _hints(fn: Callable) -> dict[str, Any]:
    """fn's parameter annotations, resolved where they can be (a forward reference DSPy does not
    import at run time stays unchecked: Any)."""
    try:
        return typing.get_type_hints(fn)
    except Exception:
        out = {}
        for name, p in inspect.signature(fn).parameters.items():
            ann = p.annotation
            out[name] = Any if isinstance(ann, str) or ann is inspect.Parameter.empty else ann
        return out


def check_call(fn: Callable, values: Mapping[str, Any], *, names: Mapping[str, str], owner: str,
               reserved: frozenset[str] = frozenset(), instead: str = "", skip: int = 0,
               path: str | None = None, lines: Mapping[str, int] | None = None) -> None:
    """Refuse `values` that `fn` (third-party code) would refuse: a name it does not take, a value
    its annotation excludes (a Literal, a type), a name verifirst passes itself.

    Args:
        fn: the callable the values reach (dspy.GEPA.__init__, a teleprompter's compile).
        values: keyword -> value.
        names: keyword -> the name the user typed (`optimizer.options.seed`, `optimizer_options.seed`).
        owner: the callable's name in messages ("dspy.GEPA").
        reserved: keywords verifirst sets itself.
        instead: where the user sets what a reserved keyword would.
        skip: leading positional parameters to ignore (self, the student program).
        path: the experiment file the values came from, if any.
        lines: keyword -> line in `path`.
    """
    params = list(inspect.signature(fn).parameters.values())[skip:]
    open_kw = any(p.kind == p.VAR_KEYWORD for p in params)
    hints = _hints(fn)
    fields = {p.name: (hints.get(p.name, Any), None) for p in params
              if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self"}
    problems: list[tuple[str, Any, str]] = []
    for key, value in values.items():
        if key in reserved:
            problems.append((key, value, f"not {key}: verifirst sets it for {owner}" +
                             (f"; use {instead}" if instead else "")))
        elif key not in fields and not open_kw:
            problems.append((key, value, f"an argument {owner} takes: " +
                             ", ".join(k for k in fields if k not in reserved)))
    for key, value in values.items():  # each value against its annotation, where pydantic can read it
        if key not in fields or key in reserved:
            continue
        try:
            adapter = TypeAdapter(fields[key][0], config=ConfigDict(arbitrary_types_allowed=True))
        except Exception:  # a Protocol or a name DSPy imports only for type checkers: the name was checked
            continue
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError as e:
            problems.append((key, value, expected_text(e.errors()[0])))
    if problems:
        raise refused(problems, names=names, path=path, lines=lines)


def check_optimizer_options(optimizer: Any, options: Mapping[str, Any] | None, prefix: str, *,
                            path: str | None = None, line: int | None = None) -> None:
    """Options for a named optimizer, checked against the DSPy constructor they reach.

    Args:
        optimizer: the optimizer as given (a name, an instance, None).
        options: its options.
        prefix: how the user names the options (`optimizer_options`, `optimizer.options`).
        path: the experiment file they came from, if any.
        line: the options' line there.
    """
    if not options or not isinstance(optimizer, str) or optimizer not in THIRD_PARTY:
        return
    import dspy

    cls_name, reserved, instead = THIRD_PARTY[optimizer]
    check_call(getattr(dspy, cls_name).__init__, options, names={k: f"{prefix}.{k}" for k in options},
               owner=f"dspy.{cls_name}", reserved=reserved, instead=instead, skip=1, path=path,
               lines={k: line for k in options} if line else None)


def check_compile_kwargs(optimizer: Any, compile_kwargs: Mapping[str, Any] | None, prefix: str) -> None:
    """compile_kwargs of a dspy.Teleprompter (MIPROv2, COPRO, ...), checked against its compile's
    annotations (names are checked by core.engine.compile_arguments).

    Args:
        optimizer: the teleprompter instance.
        compile_kwargs: the keywords.
        prefix: how the user names them.
    """
    fn = getattr(optimizer, "compile", None)
    if not compile_kwargs or fn is None or isinstance(optimizer, str):
        return
    reserved = frozenset({"student", "trainset", "valset"})
    check_call(fn, compile_kwargs, names={k: f"{prefix}.{k}" for k in compile_kwargs},
               owner=f"{type(optimizer).__name__}.compile", reserved=reserved, skip=0)


def check_names(name: str | None, tracking: Any, *, names: Mapping[str, str] | None = None,
                path: str | None = None, lines: Mapping[str, int] | None = None) -> None:
    """The run name and the MLflow experiment and prompt names it leads to, as MLflow takes them.

    Args:
        name: the run's name (given or default).
        tracking: the run's vf.MLflow, or anything else (then only the run name is checked).
        names: field ("name", "experiment") -> what the user typed ("experiment.name").
        path: the experiment file the names came from, if any.
        lines: field -> line in `path`.
    """
    names = {"experiment": "tracking.experiment", **(names or {})}
    values: dict[str, Any] = {"name": name}
    experiment = getattr(tracking, "experiment", None)
    if experiment is not None:
        values["experiment"] = experiment
    try:
        _TrackingNames.model_validate(values)
    except ValidationError as e:
        raise refusal(e, names=names, path=path, lines=lines) from None
    if name and getattr(tracking, "register_prompt", False) and not PROMPT_NAME.match(prompt_name(name)):
        raise refused([("name", name, "letters, digits, '_', '.', '-' and spaces only: the optimized prompt is "
                                      f"registered in MLflow as {prompt_name(name)!r}, a name MLflow refuses")],
                      names=names, path=path, lines=lines)


class _TrackingNames(Request):
    name: Optional[RunName] = None
    experiment: Optional[ExperimentName] = None




def check_experiment(exp: Any, text: str) -> None:
    """What an experiment file hands to MLflow and DSPy, refused at the file's lines: the run and
    MLflow experiment names, and [optimizer] options against dspy.GEPA's or dspy.SIMBA's constructor.

    Args:
        exp: the validated Experiment (verifirst.config).
        text: the file's text ("" for an experiment built in Python).
    """
    from types import SimpleNamespace

    from verifirst.config import _line_of

    src = str(exp.path) if exp.path else None
    ex, o, tr = exp.experiment, exp.optimizer, exp.tracking
    tracking = SimpleNamespace(experiment=tr.get("experiment"),
                               register_prompt=tr.get("enabled", True) and tr.get("register_prompt", True))
    check_names(ex["name"], tracking, names={"name": "experiment.name", "experiment": "tracking.experiment"},
                path=src, lines={"name": _line_of(text, "experiment", "name"),
                                 "experiment": _line_of(text, "tracking", "experiment")})
    check_optimizer_options(o["name"], o.get("options"), "optimizer.options", path=src,
                            line=_line_of(text, "optimizer", "options") or _line_of(text, "optimizer.options", None))


# Each experiment-file key -> the one OptimizeRequest field it becomes (vf.load_config builds them).
EXPERIMENT_FIELDS: dict[str, str] = {
    "experiment.name": "name", "experiment.workdir": "workdir", "experiment.seed": "seed",
    "experiment.threads": "threads", "experiment.max_error_rate": "max_error_rate",
    "experiment.executor": "executor", "experiment.ray_address": "executor", "experiment.description": "config",
    "suite.name": "data", "suite.path": "data", "suite.limit": "data", "suite.options": "data",
    "program.name": "program", "program.options": "program",
    "verifier.name": "metric", "verifier.options": "metric",
    **{f"splits.{k}": "splits" for k in ("ratios", "stratify", "manifest", "no_val", "no_test", "by", "time_field",
                                         "windows")},
    "optimizer.name": "optimizer", "optimizer.options": "optimizer_options",
    "optimizer.max_metric_calls": "budget", "optimizer.auto": "budget", "optimizer.max_iters": "budget",
    **{f"models.{k}": "models" for k in ("task", "reflection", "teacher", "judge", "temperature")},
    **{f"budget.{k}": "budget" for k in ("max_usd", "max_tokens", "max_lm_calls", "max_wall_s", "per_role", "prices")},
    **{f"objective.{k}": "objective" for k in ("kind", "models", "reference", "candidates")},
    "objective.margin": "objective",
    **{f"tracking.{k}": "tracking" for k in ("uri", "experiment", "enabled", "register_prompt", "traces")},
}

# Each `verifirst run` (and `optimize`) option -> the OptimizeRequest field it sets.
RUN_FLAGS: dict[str, str] = {
    "experiment": "config", "--run-dir": "run_dir", "--tracking-uri": "tracking", "--offline": "tracking",
    "--json": "echo", "--max-usd": "budget", "--max-tokens": "budget", "--max-lm-calls": "budget",
    "--max-wall-s": "budget", "--dry-run": "dry_run", "--yes": "confirm", "--objective": "objective",
    "--margin": "objective",
}
