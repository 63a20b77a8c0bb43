"""The Python API: bring your own program, data, metric and optimizer.

    import verifirst as vf
    res = vf.optimize(program, data, metric, optimizer="gepa", splits=(0.5, 0.25, 0.25),
                      models={"task": "openai/gpt-4o-mini", "reflection": "openai/gpt-4o"},
                      budget=vf.Budget(max_metric_calls=200), run_dir="runs/a", tracking=vf.MLflow())
    res.program; res.report; res.save("out/")

Every optimizer runs under the split guard of the one driver (`verifirst.loop.driver`): it is handed
train and validation only, the test split is scored once after selection, and the report is the
same for all.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from verifirst.core.callbacks import RunCallback
from verifirst.core.engine import Budget, EngineContext, resolve_engine
from verifirst.core.errors import ConfigError, InputError
from verifirst.config import DEFAULT_MAX_ERROR_RATE
from verifirst.report.console import Console
from verifirst.requests import MODEL_SPEC_EXPECTED, as_budget, check_model_spec  # noqa: F401 (vf.api's names)
from verifirst.loop.splits import (DEFAULT_RATIOS, DEFAULT_SEED, SPLITS, SplitManifest, check_optimizer_needs,
                                   check_ratios, make_splits, split_options)

DEFAULT_WORKDIR = ".verifirst"


@dataclass
class MLflow:
    """Track a run in MLflow: a parent run, nested runs per evaluation and per optimizer.

    Args:
        uri: the tracking URI (default: MLFLOW_TRACKING_URI, else a local store in the workdir).
        experiment: the MLflow experiment (default: the run's name).
        traces: log DSPy traces with the verifier's feedback on each.
        register_prompt: register the optimized instructions when the optimizer changed them.
        offline: log to the workdir's local store whatever the URI or environment says.
    """

    uri: str | None = None
    experiment: str | None = None
    traces: bool = True
    register_prompt: bool = True
    offline: bool = False

    def check_reachable(self) -> None:
        """Refuse a tracking server that does not answer, before any work (offline: the local store)."""
        from verifirst.tracking import check_reachable, user_tracking_uri

        uri = self.uri or user_tracking_uri()
        if uri and not self.offline:
            check_reachable(uri)

    def callback(self, workdir: str | Path, name: str) -> RunCallback:
        """The observer that logs a run named `name` (built now: an unreachable server refuses here).

        Args:
            workdir: where the local store goes when no URI is given.
            name: the run's name (the experiment's, unless `experiment` is set).
        """
        from verifirst.tracking.callback import MLflowCallback

        return MLflowCallback(workdir, uri=self.uri, experiment=self.experiment or name, traces=self.traces,
                              offline=self.offline, register_prompt=self.register_prompt)

    def log_objective(self, report: dict, run_dir: Path, workdir: str | Path) -> str | None:
        """Log a cost or latency objective: its choice, and a nested run per candidate (verifirst.tracking)."""
        from verifirst.tracking import Tracker, log_objective

        tracker = Tracker(workdir, uri=self.uri, experiment=self.experiment or report.get("experiment") or "verifirst",
                          offline=self.offline, autolog=False)
        return log_objective(tracker, report, run_dir)


@dataclass
class Result:
    """What `optimize` and `evaluate` return.

    `program` is the optimized program (the given one when no optimizer ran); `report` is the
    dict the CLI prints: per split before/after with Wilson intervals, the paired comparison
    (bootstrap Δ interval, McNemar), errors and inconclusive items apart, usage.
    """

    program: Any
    report: dict
    manifest: SplitManifest
    run_dir: Path
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        """One line: the run directory, the optimizer, each split's pass rate before -> after (the
        program and the report are there to print on purpose)."""
        rates = ", ".join(f"{name} {_split_rates(split)}" for name, split in (self.report.get("splits") or {}).items())
        return f"Result(run_dir={str(self.run_dir)!r}, optimizer={self.report.get('engine')!r}, {rates or 'no splits'})"

    @property
    def run_id(self) -> str | None:
        """The MLflow run id (None when the run was not tracked)."""
        return self.report.get("run_id")

    @property
    def tracking_uri(self) -> str | None:
        """Where the run was tracked (None when it was not)."""
        return self.report.get("tracking_uri")

    def save(self, out: str | Path) -> list[Path]:
        """Write program.json, report.json, report.md and split_manifest.json to `out`.

        Args:
            out: the directory (created if missing).
        """
        from verifirst.report import write_reports

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = write_reports(self.report, out)
        if hasattr(self.program, "save"):
            self.program.save(str(out / "program.json"))
            paths.append(out / "program.json")
        paths.append(self.manifest.save(out / "split_manifest.json"))
        return paths


def _split_rates(split: dict) -> str:
    """A split's pass rate before, and after where the run optimized: "0.25 -> 0.50" or "0.25"."""
    def rate(which: str) -> str:
        value = (split.get(which) or {}).get("pass_rate")
        return "n/a" if value is None else f"{value:.2f}"

    return f"{rate('before')} -> {rate('after')}" if split.get("after") else rate("before")


def _is_lm(obj: Any) -> bool:
    import dspy

    return isinstance(obj, dspy.BaseLM)


def build_models(models: Any) -> Any:
    """LMs by role from strings, dicts (model=, api_base=, ...) or dspy.LM objects; None stays None.

    Args:
        models: a Models, or {role: spec} with roles task, reflection, teacher, judge.
    """
    from verifirst.lm import ROLES, Models, make_models
    from verifirst.core.redaction import register_secrets

    if models is None or isinstance(models, Models):
        return models
    if not isinstance(models, dict):
        raise InputError(f"models is a {type(models).__name__}", field="models",
                         expected="{role: " + MODEL_SPEC_EXPECTED + "}")
    unknown = sorted(set(models) - set(ROLES))
    if unknown:
        raise InputError(f"unknown role {unknown[0]!r}", field="models", expected="roles " + ", ".join(ROLES))
    given = {r: v for r, v in models.items() if v is not None}
    if "task" not in given:
        raise InputError("no task model", field="models.task", expected="the model the program runs on")
    from verifirst.lm.user_lm import metered

    objs = {r: metered(v, r) for r, v in given.items() if _is_lm(v)}  # its calls counted and capped as ours are
    for lm in objs.values():  # an LM built by the caller: its key is masked wherever it appears too
        register_secrets(getattr(lm, "kwargs", None) or {})
    specs = {r: v for r, v in given.items() if r not in objs}
    for r, v in specs.items():
        check_model_spec(v, f"models.{r}")
    built = make_models(specs) if specs else None
    return Models(**{r: objs.get(r) or (getattr(built, r) if built and r in specs else None) for r in ROLES})


def output_field_of(program: Any, output_field: str | None = None) -> str | None:
    """The program output a verifier checks: given, the program's `output_field`, or its one output.

    Args:
        program: the DSPy program.
        output_field: the field name, when you name it.
    """
    if output_field:
        return output_field
    if getattr(program, "output_field", None):
        return program.output_field
    preds = program.predictors() if hasattr(program, "predictors") else []
    outs = [f for p in preds[-1:] for f in p.signature.output_fields if f != "reasoning"]
    return outs[0] if len(outs) == 1 else None


def make_manifest(items: Sequence[Any], splits: Any, seed: int, stratify: Any = None, *, no_val: bool = False,
                  no_test: bool = False) -> SplitManifest:
    """A manifest from ratios (grouped by each item's group, else its id), or the one given.

    Args:
        items: the suite's items.
        splits: (train, val, test) ratios, a SplitManifest, or {"ratios": ..., "by": "time",
            "time_field": "created_at", "windows": "7d"} (train oldest, test newest).
        seed: the split seed.
        stratify: an item -> label callable to stratify on.
        no_val: ratios may leave the validation split empty.
        no_test: ratios may leave the test split empty (no held-out number).
    """
    if isinstance(splits, SplitManifest):
        ids = {it.id for it in items}
        missing = [i for i in splits.train + splits.val + splits.test if i not in ids]
        if missing:
            raise InputError(f"manifest names {len(missing)} item(s) not in the data, e.g. {missing[:3]}",
                             field="splits", expected="a manifest made for this data")
        return splits
    splits, split_by = split_options(splits)  # {"by": "time", "time_field": ..., "ratios": ...} too
    ratios = check_ratios(splits, no_val=no_val, no_test=no_test, field="splits",
                          flags=("no_val=True", "no_test=True"))
    return make_splits(items, key=lambda it: it.id, group=lambda it: it.group_key, ratios=ratios, seed=seed,
                       stratify=stratify, **split_by)


def check_engine_budget(engine: Any, budget: Budget, manifest: SplitManifest) -> None:
    """Refuse a budget the engine cannot honour, before any LM call.

    A dspy.Teleprompter (BootstrapFewShot, MIPROv2, ...) keeps its budget in its own settings, so
    budget.max_metric_calls would be ignored; an engine with `check_budget` (SIMBA) checks its own.

    Args:
        engine: the resolved engine (None: no optimizer).
        budget: the run's budget.
        manifest: the splits (the engine's budget may depend on their sizes).

    Raises:
        InputError: naming the budget field and what the engine takes instead.
    """
    from verifirst.core.engine import TeleprompterEngine

    if isinstance(engine, TeleprompterEngine) and budget.max_metric_calls is not None:
        raise InputError(f"{engine.name} does not count metric calls: max_metric_calls would be ignored",
                         field="budget.max_metric_calls",
                         expected="no max_metric_calls; set the teleprompter's own budget (BootstrapFewShot: "
                                  "max_bootstrapped_demos, max_labeled_demos, max_rounds; dspy.GEPA: "
                                  "max_metric_calls), or a spend limit such as budget.max_lm_calls")
    if hasattr(engine, "check_budget"):
        sizes = manifest.sizes()
        engine.check_budget(budget, sizes["train"], sizes["val"])


def optimize(program: Any, data: Any, metric: Any, optimizer: Any = "gepa", *,
             splits: Any = DEFAULT_RATIOS, models: Any = None, budget: Budget | None = None,
             run_dir: str | Path | None = None, tracking: MLflow | RunCallback | None = None,
             inputs: Sequence[str] | None = None, output_field: str | None = None,
             threshold: float | None = None, optimizer_options: dict | None = None, seed: int = DEFAULT_SEED,
             threads: int = 1, workdir: str | Path | None = None, name: str | None = None,
             max_error_rate: float | None = DEFAULT_MAX_ERROR_RATE, progress: bool | None = False,
             eval_splits: Sequence[str] = SPLITS, stratify: Any = None, adapter: Any = None,
             executor: Any = None, compile_kwargs: dict | None = None, no_val: bool = False,
             no_test: bool = False, callbacks: Sequence[RunCallback] = (), echo: Any = None,
             cache: str | Path | None = None, config: dict | None = None, dry_run: bool = False,
             confirm: Callable[[Any], bool] | None = None, objective: Any = None, margin: float | None = None) -> Any:
    """Optimize `program` on `data` against `metric`, under the split guard, and report.

    Args:
        program: a DSPy program (left unchanged; the result's program is the optimized copy).
        data: records (dicts or dspy.Examples), a vf.Suite, a JSONL/JSON/CSV path, a
            datasets.Dataset, or a Hugging Face dataset id. Ids come from an `id` field or a
            content hash; a `group` field keeps related items in one split.
        metric: a Verifier (verify(item, candidate) -> Verdict) or a DSPy metric
            (example, pred, trace=None[, pred_name, pred_trace]) returning bool, float or
            dspy.Prediction(score=, feedback=) (the feedback reaches GEPA).
        optimizer: "gepa", "simba", "autorefine", "none" (or None), a registered name, any
            dspy.Teleprompter instance, or an Engine.
        splits: (train, val, test) ratios, a SplitManifest to reuse, or {"ratios": ..., "by": "time",
            "time_field": "created_at", "windows": "7d"}: train oldest, test newest (verifirst.loop.timesplit).
        models: {role: model string, {"model": ..., "api_base": ...} or dspy.LM} for task,
            reflection, teacher, judge; None uses the LM you configured in DSPy.
        budget: the optimizer's budget and the run's spend limits: a vf.Budget, or a dict of its
            fields (unknown fields are refused).
        run_dir: where checkpoints, the optimized program and the reports go (default: a new
            WORKDIR/runs/NAME-TIME). An existing run directory resumes.
        tracking: vf.MLflow(...) or any RunCallback; None tracks nothing.
        inputs: the record keys that reach the program (default: the program's input fields).
        output_field: the program output a verifier checks (default: the program's only output).
        threshold: a plain metric's score counted as PASS, in (0, 1] (default 1.0).
        optimizer_options: keyword arguments for a named optimizer's constructor.
        seed: the split and optimizer seed.
        threads: evaluation threads (and the optimizer's, unless the budget says otherwise).
        workdir: where the test-reuse ledger and default run directories live (default .verifirst).
        name: the run's name (default: the data's name).
        max_error_rate: the share of LM-error items that stops an evaluation (from 10 items on; the
            first 5 requests all failing stop it sooner); the experiment file's default. None: never stop.
        progress: show progress bars (None: when attached to a terminal).
        eval_splits: the splits scored before and after.
        stratify: an item -> label callable to stratify the split on.
        adapter: the DSPy adapter for `models` (default: verifirst's JSON adapter for the models it
            builds from strings; an LM object of your own runs with dspy.configure's adapter, else
            DSPy's ChatAdapter, as under dspy.Evaluate).
        executor: where verifier calls run, in evaluations and the optimizer's metric:
            vf.Threads() (default, this process) or vf.Ray(address=..., num_workers=...), whose
            workers each build the verifier once; the program's LM calls stay in this process.
        compile_kwargs: more arguments for a dspy.Teleprompter's (or SIMBA's) compile, e.g.
            {"minibatch_size": 20} for MIPROv2 or {"eval_kwargs": {...}} for COPRO; `seed` goes
            there too, where compile takes one, unless compile_kwargs sets it.
        no_val: run with an empty validation split (ratios with val 0), on purpose.
        no_test: run without a held-out test split (ratios with test 0), on purpose: no test number.
        callbacks: more observers of the run (verifirst.core.callbacks.RunCallback), after `tracking`.
        echo: a callable for progress lines (e.g. print); None prints nothing.
        cache: a directory for the disk cache of LM replies (only replies that parsed are kept);
            None keeps DSPy's cache as configured.
        config: the experiment file's settings this run came from (`vf.load_config` passes it):
            kept, credentials masked, in run_state.json and MLflow, and part of the resume key.
        dry_run: return the spend estimate (`verifirst.loop.estimate.SpendEstimate`: calls, tokens and
            USD low-high per role and phase) instead of running: no model is called and nothing is
            written (no run directory, no cache, no MLflow run). Everything a run would refuse is
            refused the same way.
        confirm: asked with the estimate, before anything is written, when the estimate's high end
            exceeds a max_usd limit of the budget (the run's or a role's); False refuses the run.
            None: no estimate is made (the budget's hard stop still holds).
        objective: "quality" (default: the optimizer's best), or "cheapest-not-worse" /
            "fastest-not-worse" (or a dict with kind, margin, models, reference, candidates): the
            cheapest (fastest) candidate non-inferior on validation, confirmed on test
            (`verifirst.loop.objective`, docs/spend.md).
        margin: the non-inferiority margin in (0, 1) for a cost or latency objective.

    Returns:
        The Result, or with dry_run the SpendEstimate.
    """
    call = dict(locals())  # every keyword, one field each of the request
    from verifirst.requests import OptimizeRequest

    return run_request(OptimizeRequest.build(call, drop_none=False))


def run_request(req: Any) -> Any:
    """Run one checked OptimizeRequest: what `vf.optimize`, `vf.run` and `verifirst run` build, handed
    whole to the loop (`driver.RunRequest.request`); every value below is read from it.

    Args:
        req: the OptimizeRequest (verifirst.requests), one field per `optimize` keyword.

    Returns:
        The Result, or with req.dry_run the SpendEstimate.
    """
    import dspy

    from verifirst.loop import driver
    from verifirst.core.data import to_suite
    from verifirst.loop.ledger import LEDGER_FILE, TestLedger
    from verifirst.lm import adapter_for, configure_cache
    from verifirst.core.metric import Metric
    from verifirst.core.redaction import redact
    from verifirst.report.html import publish
    from verifirst.loop.rundir import new_run_dir

    from verifirst.loop.objective import check_objective

    # Everything that can refuse the run comes before anything is written
    from verifirst.config import RUN_DIR_EXPECTED, check_workdir
    from verifirst.requests import (OptimizeRequest, check_compile_kwargs, check_names, check_optimizer_options,
                                    default_run_name)

    program, optimizer, options, tracking = req.program, req.optimizer, req.optimizer_options, req.tracking
    goal = check_objective(req.objective, req.margin)
    suite = to_suite(req.data, inputs=req.inputs, program=program)
    name = req.name or default_run_name(suite.name)  # a data set's name may hold what MLflow refuses (org/set)
    check_names(name, tracking)  # a name MLflow would refuse after the run paid its calls
    check_optimizer_options(optimizer, options, "optimizer_options")  # what dspy.GEPA/SIMBA accept
    check_compile_kwargs(optimizer, req.compile_kwargs, "compile_kwargs")
    check_workdir(req.workdir or DEFAULT_WORKDIR, "workdir")
    if req.run_dir:
        check_workdir(req.run_dir, "run_dir", expected=RUN_DIR_EXPECTED)
    manifest = make_manifest(suite.items, req.splits, req.seed, req.stratify, no_val=req.no_val, no_test=req.no_test)
    eval_splits = tuple(s for s in req.eval_splits if manifest.sizes()[s])  # an empty split has nothing to score
    is_verifier = callable(getattr(getattr(req.metric, "metric", req.metric), "verify", None))
    scorer = Metric(req.metric, output_field_of(program, req.output_field) if is_verifier else req.output_field,
                    threshold=req.threshold)
    if (optimizer is None or optimizer == "none") and options:  # a typo would go unnoticed
        raise InputError(f"optimizer_options {sorted(options)} given for optimizer none (evaluation only), "
                         "which takes none", field="optimizer_options", expected="no optimizer_options, or an optimizer")
    engine = resolve_engine(optimizer, options)
    check_optimizer_needs(manifest, engine)  # GEPA on an empty training split: refused before it starts
    budget = as_budget(req.budget, req.threads)
    check_engine_budget(engine, budget, manifest)
    if isinstance(tracking, MLflow):
        tracking.check_reachable()  # an unreachable server refuses the run before any model is built
    lms = build_models(req.models)
    from verifirst.lm.user_lm import metered

    task_lm = lms.task if lms is not None else metered(dspy.settings.lm, "task")  # DSPy's, counted and capped
    if task_lm is None:
        raise InputError("no task LM: pass models={'task': ...} or dspy.configure(lm=...)", field="models")
    if is_verifier:  # a toolchain that cannot run refuses the run before any LM call
        from verifirst.loop.preflight import check_verifiers

        check_verifiers([scorer.metric], suite.items)
    workdir = Path(req.workdir or DEFAULT_WORKDIR)
    run_dir = Path(req.run_dir) if req.run_dir else new_run_dir(workdir, name.replace(" ", "-").replace("/", "-"))
    reflection = lms.reflection if lms is not None else metered(dspy.settings.lm, "reflection")
    ctx = EngineContext(run_dir=run_dir, reflection_lm=reflection, teacher_lm=lms.teacher if lms else reflection,
                        task_lm=task_lm, seed=req.seed, compile_kwargs=dict(req.compile_kwargs or {}))
    if req.compile_kwargs and not hasattr(engine, "compile_arguments"):
        raise InputError(f"optimizer {getattr(engine, 'name', None)!r} takes no compile_kwargs", field="compile_kwargs",
                         expected="a dspy.Teleprompter or SIMBA, or no compile_kwargs")
    if hasattr(engine, "compile_arguments"):  # bad compile arguments, a missing package: refused before any LM call
        engine.compile_arguments(ctx)
    if goal.selects:  # one run per candidate model, the rule on validation, test once (verifirst.loop.objective_run)
        from verifirst.loop.objective_run import run_objective

        def rerun(**changes: Any) -> Any:  # one candidate's run: this request with its changes, checked again
            return run_request(OptimizeRequest.build({**dict(req), **changes}, drop_none=False))

        return run_objective(goal, req, rerun, manifest=manifest, suite=suite, scorer=scorer, lms=lms,
                             task_lm=task_lm, budget=budget, run_dir=run_dir, workdir=workdir, tracking=tracking,
                             result=Result, publish=publish)
    config = redact(req.config) if req.config is not None else None  # the key never reaches run_state.json or MLflow
    # the spend limits are no part of the resume key: a stopped run resumes with a larger budget
    resume_config = {k: v for k, v in config.items() if k != "budget"} if config is not None else None
    digest = driver.run_digest(program, manifest, scorer, getattr(engine, "name", "none"), eval_splits,
                               resume_config)
    driver.check_resume(run_dir, digest)  # another run's directory: refused before a tracker starts
    specs = {r: getattr(getattr(lms, r, None), "spec", None) or getattr(getattr(lms, r, None), "model", None)
             for r in ("task", "reflection", "teacher", "judge")} if lms else {"task": getattr(task_lm, "model", None)}
    usd_capped = any(lim is not None for lim in [budget.max_usd, *(r.get("max_usd") for r in budget.per_role.values())])
    if usd_capped:
        from verifirst.lm.spend import Prices

        Prices(budget.prices).require({r: getattr(getattr(lms, r, None), "model", None) or s  # before any call
                                       for r, s in specs.items() if s} if lms else {"task": specs["task"]})
    unknown = sorted(set(budget.per_role) - {"task", "reflection", "teacher", "judge"})
    if unknown:
        raise InputError(f"unknown role {unknown[0]!r}", field=f"budget.per_role.{unknown[0]}",
                         expected="roles task, reflection, teacher, judge")
    if req.dry_run or (req.confirm is not None and usd_capped):  # before anything is written or any model called
        from verifirst.loop.estimate import estimate_run

        estimate = estimate_run(program, suite.items, manifest, engine, budget, ctx, splits=eval_splits,
                                adapter=adapter_for(lms.task, req.adapter) if lms is not None else
                                (req.adapter or dspy.settings.adapter or dspy.ChatAdapter()))
        if req.dry_run:
            return estimate
        over = estimate.over_limits()
        if over and req.confirm is not None and not req.confirm(estimate):
            raise InputError(f"the run was not started: {over[0]}", field="max_usd",
                             expected="a larger max_usd, a smaller run, or confirm to start it anyway")
    observers: list[Any] = [tracking.callback(workdir, name) if isinstance(tracking, MLflow) else tracking]
    observers += [*req.callbacks, *([Console(req.echo)] if req.echo else [])]
    if req.cache is not None:
        configure_cache(req.cache)

    def lm_scope():  # a context, not dspy.configure: the caller's global settings stay as they are
        if lms is None:  # DSPy's configured LM, through the wrapper that counts it; its adapter as configured
            return dspy.context(lm=task_lm) if task_lm is not dspy.settings.lm else contextlib.nullcontext()
        return dspy.context(lm=lms.task, adapter=adapter_for(lms.task, req.adapter))

    run = driver.RunRequest(request=req, scorer=scorer, items=suite.items, manifest=manifest, engine=engine,
                            budget=budget, ctx=ctx, name=name, suite=suite.name, digest=digest,
                            fresh=not req.run_dir, config=config, models=specs, eval_splits=eval_splits,
                            ledger=TestLedger(workdir / LEDGER_FILE), lm_scope=lm_scope)
    res, _ = driver.run(run, observers, publish=publish)
    return Result(res.program, res.report, manifest, run.ctx.run_dir, res.before, res.after)


def evaluate(program: Any, data: Any, metric: Any, *, splits: Sequence[str] = SPLITS,
             ratios: Any = DEFAULT_RATIOS, **kwargs: Any) -> Result:
    """Score `program` on `data` with `metric`, no optimizer: each split once, same report shape.

    Args:
        program: a DSPy program.
        data: as for `optimize`.
        metric: a Verifier or a DSPy metric, as for `optimize`.
        splits: the split names to score ("train", "val", "test").
        ratios: (train, val, test) ratios, or a SplitManifest.
        kwargs: any other `optimize` argument (models, run_dir, tracking, inputs, threads, ...).
    """
    return optimize(program, data, metric, None, splits=ratios, eval_splits=tuple(splits), **kwargs)


def load_config(path: Any, *, models: Any = None, offline: bool = False, tracking_uri: str | None = None) -> dict:
    """An experiment file as `optimize` keyword arguments: vf.run(p) is vf.optimize(**vf.load_config(p)).

    Suite, program, verifier and optimizer are built from the registry by name; anything the file
    gets wrong is refused here, naming the file and line, before anything is written.

    Args:
        path: the experiment TOML (or an Experiment from verifirst.config.from_dict).
        models: LMs to use instead of the file's [models] (a Models or {role: spec}).
        offline: track in the workdir's local MLflow store whatever the file says.
        tracking_uri: the MLflow tracking URI instead of the file's.
    """
    from verifirst import config, experiment
    from verifirst.lm import make_models
    from verifirst.requests import check_experiment

    exp = path if isinstance(path, config.Experiment) else config.load(path)
    ex, o, tr = exp.experiment, exp.optimizer, exp.tracking
    src = str(exp.path) if exp.path else None
    experiment.check_dirs(exp)  # a file or a read-only place as workdir refuses the run, nothing written
    experiment.resolve_option_paths(exp)  # a component's path options: against the file's folder
    check_experiment(exp, experiment.experiment_text(exp))  # names MLflow takes, options dspy.GEPA takes
    tracking = MLflow(uri=tracking_uri or tr.get("uri"), experiment=tr.get("experiment") or ex["name"],
                      traces=tr.get("traces", True), register_prompt=tr.get("register_prompt", True),
                      offline=offline) if tr["enabled"] else None
    if tracking is not None:
        tracking.check_reachable()  # before any model is built
    executor = experiment.make_executor(exp)  # a Ray address nothing answers at refuses the run here
    suite = experiment.load_suite(exp)
    manifest = experiment.make_manifest(exp, suite)
    lms = build_models(models) or make_models({k: exp.models.get(k) for k in ("task", "reflection", "teacher",
                                                                               "judge")},
                                              temperature=exp.models.get("temperature"))
    verifier = experiment.build_verifier(exp, lms, suite.items)  # its preflight too: before any LM call
    program = experiment.build_program(exp, verifier=verifier, items=suite.items)
    out_field = getattr(program, "output_field", None) or (exp.program.get("options") or {}).get("output_field")
    if not out_field:
        raise InputError("program declares no output field", path=src, field="program.options.output_field",
                         expected="the name of the program's output to verify")
    # built here to refuse a bad name or option naming the file; vf.optimize builds it again from the name
    engine = resolve_engine(o["name"], o.get("options") or {}, source=src)
    check_optimizer_needs(manifest, engine, src)
    budget = Budget(max_metric_calls=o.get("max_metric_calls"), auto=o.get("auto"), max_iters=o.get("max_iters"),
                    num_threads=ex["threads"], **{k: v for k, v in exp.budget.items() if v not in (None, {})})
    try:
        check_engine_budget(engine, budget, manifest)
    except InputError as e:  # the engine's budget is the [optimizer] section's: placed there
        key = (e.field or "").removeprefix("budget.")
        if key not in ("max_metric_calls", "auto"):
            raise
        raise ConfigError(e.message, path=src, line=config._line_of(experiment.experiment_text(exp), "optimizer", key),
                          field=f"optimizer.{key}",
                          expected=(e.expected or "").replace("budget.max_iters", "optimizer.max_iters")) from None
    goal = config.check_objective_section(exp.objective, src or "<experiment>", experiment.experiment_text(exp))
    if goal.selects:  # a model without a price when cost is the objective: refused at the [objective] table
        from verifirst.loop.objective import check_prices
        from verifirst.lm.spend import Prices

        try:
            check_prices(goal, getattr(lms.task, "model", None), Prices(budget.prices))
        except InputError as e:
            raise ConfigError(e.message, path=src, line=config._line_of(experiment.experiment_text(exp), "objective",
                                                                        "models"), field="objective.models",
                              expected=e.expected) from None
    return {"program": program, "data": suite, "metric": verifier, "optimizer": o["name"],
            "optimizer_options": o.get("options") or {}, "splits": manifest,
            "models": lms, "output_field": out_field, "seed": ex["seed"], "threads": ex["threads"],
            "budget": budget,
            "workdir": ex["workdir"], "name": ex["name"], "max_error_rate": ex["max_error_rate"],
            "executor": executor, "tracking": tracking, "cache": Path(ex["workdir"]) / "cache",
            "config": exp.as_dict(), **({"objective": goal} if goal.selects else {})}


def run(path: Any, *, models: Any = None, offline: bool = False, tracking_uri: str | None = None,
        limits: dict | None = None, dry_run: bool = False, **overrides: Any) -> Any:
    """Run an experiment file through the API: vf.optimize(**vf.load_config(path)); `verifirst run`.

    Args:
        path: the experiment TOML (or an Experiment).
        models: LMs to use instead of the file's [models].
        offline: track in the workdir's local MLflow store whatever the file says.
        tracking_uri: the MLflow tracking URI instead of the file's.
        limits: spend limits that replace the file's [budget] ones, e.g. {"max_usd": 20} (`--max-usd`).
        dry_run: return the spend estimate instead of running (`verifirst run --dry-run`): no model
            is called and nothing is written.
        overrides: `optimize` arguments that replace the file's (e.g. run_dir, progress, echo, confirm).

    Returns:
        The Result, or with dry_run the SpendEstimate.
    """
    import dataclasses

    kw = load_config(path, models=models, offline=offline, tracking_uri=tracking_uri)
    given = {k: v for k, v in (limits or {}).items() if v is not None}
    if given:
        kw["budget"] = dataclasses.replace(kw["budget"], **given)  # checked again: 0 or -1 is refused
    from verifirst.requests import OptimizeRequest

    return run_request(OptimizeRequest.build({**kw, **overrides, "dry_run": dry_run}, drop_none=False))
