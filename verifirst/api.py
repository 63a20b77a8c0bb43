"""The Python API: bring your own program, data, metric and optimizer.

    import verifirst as vf
    res = vf.optimize(program, data, metric, optimizer="gepa", splits=(0.6, 0.2, 0.2),
                      models={"task": "openai/gpt-4o-mini", "reflection": "openai/gpt-4o"},
                      budget=vf.Budget(max_metric_calls=200), run_dir="runs/a", tracking=vf.MLflow())
    res.program; res.report; res.save("out/")

Every optimizer runs under the split guard of the one driver (`verifirst.driver`): it is handed
train and validation only, the test split is scored once after selection, and the report is the
same for all.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from . import atomic
from .driver import RunCallback, TrackerCallback
from .engine import Budget, EngineContext, resolve_engine
from .errors import InputError
from .config import DEFAULT_MAX_ERROR_RATE
from .splits import SPLITS, SplitManifest, check_optimizer_needs, check_ratios, make_splits, split_options

DEFAULT_WORKDIR = ".verifirst"


@dataclass
class MLflow:
    """Track a run in MLflow: a parent run, nested runs per evaluation and per optimizer.

    Args:
        uri: the tracking URI (default: MLFLOW_TRACKING_URI, else a local store in the workdir).
        experiment: the MLflow experiment (default: the run's name).
        traces: log DSPy traces with the verifier's feedback on each.
    """

    uri: str | None = None
    experiment: str | None = None
    traces: bool = True

    def callback(self, workdir: str | Path, name: str) -> TrackerCallback:
        from .tracking import Tracker

        return TrackerCallback(Tracker(workdir, uri=self.uri, experiment=self.experiment or name,
                                       enabled=True, autolog=self.traces))


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

    def save(self, out: str | Path) -> list[Path]:
        """Write program.json, report.json, report.md and split_manifest.json to `out`.

        Args:
            out: the directory (created if missing).
        """
        from .report import write_reports

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = write_reports(self.report, out)
        if hasattr(self.program, "save"):
            self.program.save(str(out / "program.json"))
            paths.append(out / "program.json")
        paths.append(self.manifest.save(out / "split_manifest.json"))
        return paths


def _is_lm(obj: Any) -> bool:
    import dspy

    return isinstance(obj, dspy.BaseLM)


def build_models(models: Any) -> Any:
    """LMs by role from strings, dicts (model=, api_base=, ...) or dspy.LM objects; None stays None.

    Args:
        models: a Models, or {role: spec} with roles task, reflection, teacher, judge.
    """
    from .lm import ROLES, Models, make_models
    from .redaction import register_secrets

    if models is None or isinstance(models, Models):
        return models
    if not isinstance(models, dict):
        raise InputError(f"models is a {type(models).__name__}", field="models",
                         expected="{role: model string, dict or dspy.LM}")
    unknown = sorted(set(models) - set(ROLES))
    if unknown:
        raise InputError(f"unknown role {unknown[0]!r}", field="models", expected="roles " + ", ".join(ROLES))
    given = {r: v for r, v in models.items() if v is not None}
    if "task" not in given:
        raise InputError("no task model", field="models.task", expected="the model the program runs on")
    objs = {r: v for r, v in given.items() if _is_lm(v)}
    for lm in objs.values():  # an LM built by the caller: its key is masked wherever it appears too
        register_secrets(getattr(lm, "kwargs", None) or {})
    specs = {r: v for r, v in given.items() if r not in objs}
    from .config import check_model_dict

    for r, v in specs.items():  # a typo such as `temprature` is refused, not sent to the provider
        if isinstance(v, dict):
            check_model_dict(v, f"models.{r}")
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


def _run_digest(program: Any, manifest: SplitManifest, metric: Any, optimizer: str, splits: Sequence[str]) -> str:
    """What a run directory may be resumed with: the same program, splits, metric and optimizer."""
    import hashlib
    import json

    from .ledger import program_hash

    body = {"program": program_hash(program), "split_digest": manifest.digest, "metric": metric.name,
            "output_field": metric.output_field, "threshold": metric.threshold, "optimizer": optimizer,
            "splits": list(splits)}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]


def _check_resume(run_dir: Path, digest: str) -> None:
    """An existing run directory resumes only the run that started it."""
    import json

    state = run_dir / "run_state.json"
    if not state.exists():
        return
    try:
        old = json.loads(state.read_text()).get("api_digest")
    except (OSError, ValueError):
        old = None
    if old != digest:
        raise InputError("this run directory belongs to another run (program, data, metric or optimizer differ)",
                         path=str(state), field="api_digest",
                         expected="the same arguments to resume, or a new run_dir")


def _usage_delta(before: Any, after: Any) -> dict:
    return {k: getattr(after, k) - getattr(before, k)
            for k in ("calls", "lm_calls", "cache_hits", "errors", "prompt_tokens", "completion_tokens")}


def optimize(program: Any, data: Any, metric: Any, optimizer: Any = "gepa", *,
             splits: Any = (0.6, 0.2, 0.2), models: Any = None, budget: Budget | None = None,
             run_dir: str | Path | None = None, tracking: MLflow | RunCallback | None = None,
             inputs: Sequence[str] | None = None, output_field: str | None = None,
             threshold: float | None = None, optimizer_options: dict | None = None, seed: int = 0,
             threads: int = 1, workdir: str | Path | None = None, name: str | None = None,
             max_error_rate: float | None = DEFAULT_MAX_ERROR_RATE, progress: bool | None = False,
             eval_splits: Sequence[str] = SPLITS, stratify: Any = None, adapter: Any = None,
             executor: Any = None, compile_kwargs: dict | None = None, no_val: bool = False,
             no_test: bool = False) -> Result:
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
            "time_field": "created_at", "windows": "7d"}: train oldest, test newest (verifirst.timesplit).
        models: {role: model string, {"model": ..., "api_base": ...} or dspy.LM} for task,
            reflection, teacher, judge; None uses the LM you configured in DSPy.
        budget: the optimizer's budget (vf.Budget).
        run_dir: where checkpoints, the optimized program and the reports go (default: a new
            WORKDIR/runs/NAME-TIME). An existing run directory resumes.
        tracking: vf.MLflow(...) or any RunCallback; None tracks nothing.
        inputs: the record keys that reach the program (default: the program's input fields).
        output_field: the program output a verifier checks (default: the program's only output).
        threshold: a plain metric's score counted as PASS (default 1.0).
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
        adapter: the DSPy adapter for `models` (default: verifirst's JSON adapter).
        executor: where verifier calls run, in evaluations and the optimizer's metric:
            vf.Threads() (default, this process) or vf.Ray(address=..., num_workers=...), whose
            workers each build the verifier once; the program's LM calls stay in this process.
        compile_kwargs: more arguments for a dspy.Teleprompter's (or SIMBA's) compile, e.g.
            {"minibatch_size": 20} for MIPROv2 or {"eval_kwargs": {...}} for COPRO; `seed` goes
            there too, where compile takes one, unless compile_kwargs sets it.
        no_val: run with an empty validation split (ratios with val 0), on purpose.
        no_test: run without a held-out test split (ratios with test 0), on purpose: no test number.
    """
    import dspy

    from . import driver
    from .data import to_suite
    from .ledger import LEDGER_FILE, TestLedger
    from .lm import USAGE, FastJSONAdapter
    from .metric import Metric
    from .rundir import lock_run_dir, new_run_dir

    # Everything that can refuse the run comes before anything is written.
    suite = to_suite(data, inputs=inputs, program=program)
    name = name or suite.name
    from .config import MAX_THREADS, check_number, check_workdir

    check_number(threads, 1, MAX_THREADS, "threads", integer=True)
    if max_error_rate is not None:
        check_number(max_error_rate, 0.0, 1.0, "max_error_rate")
    check_workdir(workdir or DEFAULT_WORKDIR, "workdir")
    if run_dir:
        check_workdir(run_dir, "run_dir")
    manifest = make_manifest(suite.items, splits, seed, stratify, no_val=no_val, no_test=no_test)
    bad = [s for s in eval_splits if s not in SPLITS]
    if bad:
        raise InputError(f"unknown split {bad[0]!r}", field="splits", expected=", ".join(SPLITS))
    eval_splits = tuple(s for s in eval_splits if manifest.sizes()[s])  # an empty split has nothing to score
    is_verifier = callable(getattr(getattr(metric, "metric", metric), "verify", None))
    scorer = Metric(metric, output_field_of(program, output_field) if is_verifier else output_field,
                    threshold=threshold)
    engine = resolve_engine(optimizer, optimizer_options)
    check_optimizer_needs(manifest, engine)  # GEPA on an empty training split: refused before it starts
    lms = build_models(models)
    task_lm = lms.task if lms is not None else dspy.settings.lm
    if task_lm is None:
        raise InputError("no task LM: pass models={'task': ...} or dspy.configure(lm=...)", field="models")
    if is_verifier:  # a toolchain that cannot run refuses the run before any LM call
        from .preflight import check_verifiers

        check_verifiers([scorer.metric], suite.items)
    workdir = Path(workdir or DEFAULT_WORKDIR)
    fresh = not run_dir
    run_dir = Path(run_dir) if run_dir else new_run_dir(workdir, name.replace(" ", "-").replace("/", "-"))
    budget = budget or Budget(num_threads=threads)
    reflection = lms.reflection if lms is not None else task_lm
    ctx = EngineContext(run_dir=run_dir, reflection_lm=reflection, teacher_lm=lms.teacher if lms else reflection,
                        task_lm=task_lm, seed=seed, compile_kwargs=dict(compile_kwargs or {}))
    if compile_kwargs and not hasattr(engine, "compile_arguments"):
        raise InputError(f"optimizer {getattr(engine, 'name', None)!r} takes no compile_kwargs", field="compile_kwargs",
                         expected="a dspy.Teleprompter or SIMBA, or no compile_kwargs")
    if hasattr(engine, "compile_arguments"):  # bad compile arguments, a missing package: refused before any LM call
        engine.compile_arguments(ctx)
    opt_name = getattr(engine, "name", "none")
    digest = _run_digest(program, manifest, scorer, opt_name, eval_splits)
    _check_resume(run_dir, digest)
    callback = tracking.callback(workdir, name) if isinstance(tracking, MLflow) else (tracking or RunCallback())
    hold = lock_run_dir(run_dir, fresh=fresh)  # another process on this run dir is refused here, by pid
    try:
        _check_resume(hold.path, digest)  # again under the lock: another run may have started it meanwhile
    except BaseException:
        hold.release()
        raise
    run_dir = ctx.run_dir = hold.path
    specs = {r: getattr(getattr(lms, r, None), "spec", None) or getattr(getattr(lms, r, None), "model", None)
             for r in ("task", "reflection", "teacher", "judge")} if lms else {"task": getattr(task_lm, "model", None)}
    status = "FAILED"
    try:
        run_id = callback.run_start(name, params={"split_digest": manifest.digest, "models": specs,
                                                  "suite_size": len(suite), "optimizer": opt_name,
                                                  "metric": scorer.name},
                                    tags={"verifirst.split_digest": manifest.digest, "verifirst.suite": suite.name,
                                          "verifirst.optimizer": opt_name, "verifirst.run_dir": str(run_dir)})
        atomic.write_json(run_dir / "run_state.json", {"status": "running", "api_digest": digest})
        usage_before = USAGE.total()
        scope = contextlib.ExitStack()
        if lms is not None:  # a context, not dspy.configure: the caller's global settings stay as they are
            scope.enter_context(dspy.context(lm=lms.task, adapter=adapter or FastJSONAdapter()))
        t0 = time.time()
        with scope:
            res = driver.optimize(program, scorer, suite.items, manifest, engine, budget, ctx, threads=threads,
                                  splits=eval_splits, progress=progress, max_error_rate=max_error_rate,
                                  ledger=TestLedger(workdir / LEDGER_FILE), callback=callback, executor=executor)
        report = res.report
        report.update({"experiment": name, "suite": suite.name, "metric": scorer.name, "run_dir": str(run_dir),
                       "run_id": run_id, "wall_s": round(time.time() - t0, 2), "models": specs,
                       "usage": USAGE.as_dict(), "usage_endpoints": USAGE.endpoints_as_dict(),
                       "usage_this_run": _usage_delta(usage_before, USAGE.total())})
        from .report import write_reports

        write_reports(report, run_dir)
        atomic.write_json(run_dir / "run_state.json", {"status": "finished", "run_id": run_id, "api_digest": digest})
        status = "FINISHED"
        return Result(res.program, report, manifest, run_dir, res.before, res.after)
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        callback.run_end(status)
        hold.release()


def evaluate(program: Any, data: Any, metric: Any, *, splits: Sequence[str] = SPLITS,
             ratios: Any = (0.6, 0.2, 0.2), **kwargs: Any) -> Result:
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


def load_config(path: str | Path, *, models: Any = None, offline: bool = False) -> dict:
    """An experiment file as `optimize` keyword arguments: vf.run(p) is vf.optimize(**vf.load_config(p)).

    Suite, program and verifier are built from the registry by name, as `verifirst run` does.

    Args:
        path: the experiment TOML.
        models: LMs to use instead of the file's [models] (a Models or {role: spec}).
        offline: track in the workdir's local MLflow store whatever the file says.
    """
    from . import config, experiment
    from .lm import make_models
    from .preflight import check_verifiers

    exp = config.load(path)
    ex, o, tr = exp.experiment, exp.optimizer, exp.tracking
    suite = experiment.load_suite(exp)
    lms = build_models(models) or make_models({k: exp.models.get(k) for k in ("task", "reflection", "teacher",
                                                                               "judge")},
                                              temperature=exp.models.get("temperature"))
    verifier = experiment.build_verifier(exp, lms)
    check_verifiers([verifier], suite.items)  # a toolchain that cannot run refuses before any LM call
    program = experiment.build_program(exp, verifier=verifier, items=suite.items)
    out_field = getattr(program, "output_field", None) or (exp.program.get("options") or {}).get("output_field")
    if not out_field:
        raise InputError("program declares no output field", path=str(path), field="program.options.output_field",
                         expected="the name of the program's output to verify")
    return {"program": program, "data": suite, "metric": verifier, "optimizer": o["name"],
            "optimizer_options": o.get("options") or {}, "splits": experiment.make_manifest(exp, suite),
            "models": lms, "output_field": out_field, "seed": ex["seed"], "threads": ex["threads"],
            "budget": Budget(max_metric_calls=o.get("max_metric_calls"), auto=o.get("auto"),
                             max_iters=o.get("max_iters"), num_threads=ex["threads"]),
            "workdir": ex["workdir"], "name": ex["name"], "max_error_rate": ex["max_error_rate"],
            "executor": experiment.make_executor(exp),
            "tracking": MLflow(uri=None if offline else tr.get("uri"), experiment=tr.get("experiment") or ex["name"],
                               traces=tr.get("traces", True)) if tr["enabled"] else None}


def run(path: str | Path, **overrides: Any) -> Result:
    """Run an experiment file through the API: vf.optimize(**vf.load_config(path)).

    Args:
        path: the experiment TOML.
        overrides: `optimize` arguments that replace the file's (e.g. run_dir, models).
    """
    kw = load_config(path, models=overrides.pop("models", None))
    kw.update(overrides)
    return optimize(**kw)


JUDGE_KINDS = ("passfail", "rubric")
CALIBRATION_ROLES = ("judge", "task", "teacher", "reflection")


def _judge_prompt(judge: str, kind: str) -> tuple[str, str | None]:
    """(kind, starting prompt) from a judge kind, a prompt file or a prompt's text."""
    if judge in JUDGE_KINDS:
        return judge, None
    if kind not in JUDGE_KINDS:
        raise InputError(f"unknown judge kind {kind!r}", field="kind", expected=" or ".join(JUDGE_KINDS))
    if "\n" not in judge and len(judge) < 4096:
        path = Path(judge)
        if path.is_file():
            text = path.read_text(encoding="utf-8").strip()
            if not text:
                raise InputError("the judge prompt file is empty", path=str(path), expected="a prompt text")
            return kind, text
    if not judge.strip():
        raise InputError("empty judge prompt", field="judge", expected="passfail, rubric, a prompt or its file")
    return kind, judge.strip()


def _calibration_models(models: Any) -> dict:
    """{judge, teacher, reflection} LMs: teacher defaults to the judge, reflection to the teacher."""
    import dspy

    given = {k: v for k, v in dict(models or {}).items() if v is not None}
    unknown = sorted(set(given) - set(CALIBRATION_ROLES))
    if unknown:
        raise InputError(f"unknown role {unknown[0]!r}", field="models", expected="roles judge, teacher, reflection")
    judge = given.get("judge") or given.get("task")
    if judge is None and dspy.settings.lm is None:
        raise InputError("no judge LM: pass models={'judge': ...} or dspy.configure(lm=...)", field="models.judge")
    if judge is None:
        judge = dspy.settings.lm
    teacher = given.get("teacher") or judge
    lms = build_models({"task": judge, "judge": judge, "teacher": teacher,
                        "reflection": given.get("reflection") or teacher})
    return {"judge": lms.judge, "teacher": lms.teacher, "reflection": lms.reflection}


def calibrate(outcomes: str | Path | None, judge: str = "passfail", *, models: Any = None, max_iters: int = 5,
              splits: Any = (0.5, 0.25, 0.25), run_dir: str | Path | None = None, tracking: MLflow | None = None,
              kind: str = "passfail", workdir: str | Path | None = None, seed: int = 0, threads: int = 1,
              limit: int | None = None, anchor: bool | str = False, echo: Any = None,
              prompt: str | None = None, view: str | None = None, name: str | None = None,
              promote: str | None = None, from_mlflow: str | None = None, label: str = "label",
              repeats: int = 1, no_test: bool = False, pass_at: float | None = None, label_map: Any = None,
              promote_rule: str = "significant") -> Result:
    """Calibrate an LLM judge on recorded outcomes with AutoRefine, through the one driver.

    The same experiment as `verifirst calibrate`: the judge program is scored before and after
    on every split against the recorded labels, AutoRefine sees train and validation only, and
    the test split is scored once, after selection. The report is `optimize`'s report plus a
    `judge` section (Scott's π against the uncalibrated judge with a paired bootstrap interval,
    FAIL recall/precision, PASS recall, McNemar, the teacher's keep/correct/abstain).

    Args:
        outcomes: a JSONL/CSV file of outcome records: `id`, `label` (PASS/FAIL or words such as
            merged/rejected), the view fields the judge reads, optionally `group` and metadata.
        judge: "passfail" or "rubric" (the default prompt), or your own starting prompt: its
            text or the path of a file holding it (a judge of `kind`).
        models: {"judge": ..., "teacher": ..., "reflection": ...} as model strings, dicts with
            api_base, or dspy.LM objects; the teacher defaults to the judge and the reflection
            (edit proposer) to the teacher; None uses the LM you configured in DSPy.
        max_iters: AutoRefine iterations at most.
        splits: (train, val, test) ratios, stratified by label, related records (`group`) kept together;
            or {"ratios": ..., "by": "time", "time_field": "created_at", "windows": "7d"}.
        run_dir: where checkpoints, evaluations, calibrated_prompt.txt and the reports go
            (default: a new WORKDIR/runs/calibrate-KIND-TIME); an unfinished one resumes.
        tracking: vf.MLflow(...) logs the run and registers the calibrated prompt, whose
            `champion` alias moves only on validation evidence; None tracks nothing.
        kind: the judge kind for a prompt of your own ("passfail" or "rubric").
        workdir: cache, runs, the test-reuse ledger and the local MLflow store (default .verifirst).
        seed: the split seed.
        threads: evaluation and loop threads.
        limit: use the first N records.
        anchor: also run MLflow make_judge + align() on the same split and compare: True (SIMBA),
            or aligners as "simba", "gepa", "memalign", a comma list or "all".
        echo: a callable for progress lines (default: none).
        prompt: your judge template with {{ variables }}: a file, prompts:/NAME/VERSION or
            prompts:/NAME@ALIAS (as `verifirst calibrate --prompt`); the calibrated version is
            registered under the same name (a file: `name` or its stem).
        view: which record fields fill the template's variables: "title,diff" or "diff=patch,...".
        name: the registry name for a file prompt.
        promote: move this alias to the calibrated version, only on validation evidence.
        from_mlflow: read records from this MLflow experiment's traces instead of `outcomes`,
            labelled by the human assessment or expectation named `label`.
        label: the assessment name that carries the label (with from_mlflow).
        repeats: judge runs per validation item; an edit must beat the repeat noise.
        no_test: run without a held-out test split (splits with test 0), on purpose.
        pass_at: numeric ratings at or above it are PASS (e.g. 4 on a 1-5 scale).
        label_map: categorical labels to PASS/FAIL: {"excellent": "PASS", "poor": "FAIL"} or
            "excellent=PASS,poor=FAIL"; a value neither covers is refused, naming its records.
        promote_rule: "significant" (validation Δπ interval above zero), "better" or
            "noninferior:MARGIN".

    Returns:
        A Result like `optimize`'s: the calibrated judge program, the report, the split
        manifest, the run directory and the driver's before/after evaluations.
    """
    from .calibrate import calibrate_run

    kind, judge_text = _judge_prompt(str(judge), kind)
    lms = _calibration_models(models)
    out = calibrate_run(Path(outcomes) if outcomes is not None else None, kind, max_iters=max_iters, splits=splits,
                        workdir=Path(workdir or DEFAULT_WORKDIR), limit=limit, seed=seed, threads=threads,
                        run_dir=Path(run_dir) if run_dir else None, models=lms, anchor=anchor,
                        echo=echo or (lambda line: None), prompt=judge_text, tracking=tracking is not None,
                        tracking_uri=tracking.uri if tracking else None,
                        trace=bool(tracking and tracking.traces),
                        experiment=(tracking.experiment if tracking and tracking.experiment else "verifirst-calibrate"),
                        prompt_source=prompt, view=view, name=name, promote_alias=promote, from_mlflow=from_mlflow,
                        label=label, repeats=repeats, no_test=no_test, pass_at=pass_at, label_map=label_map,
                        promote_rule=promote_rule)
    res = out.result
    return Result(res.program, res.report, out.manifest, out.run_dir, res.before, res.after)
