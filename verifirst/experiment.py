"""Run an experiment file end to end: suite -> splits -> program -> verifier -> optimizer ->
report + MLflow."""
from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from . import atomic, registry
from .config import Experiment
from .errors import ConfigError, VerifirstError
from .driver import TrackerCallback, optimize
from .engine import Budget, EngineContext, resolve_engine
from .ledger import LEDGER_FILE, TestLedger
from .lm import USAGE, FastJSONAdapter, Models, configure_cache, make_models
from .metric import Metric
from .preflight import check_verifiers
from .redaction import redact
from .rundir import lock_run_dir, new_run_dir
from .splits import SplitManifest, check_optimizer_needs, make_splits, nonempty_splits
from .task import Suite
from .tracking import Tracker


@dataclass
class RunOutput:
    run_dir: Path
    report: dict
    run_id: str | None
    tracker: Tracker
    program: Any


def _call(factory, options: dict, **extra):
    """Call a factory with the options it accepts plus any extras it names."""
    sig = inspect.signature(factory.__init__ if inspect.isclass(factory) else factory)
    accepts_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    kw = dict(options)
    for k, v in extra.items():
        if v is not None and (k in sig.parameters or accepts_kw) and k not in kw:
            kw[k] = v
    return factory(**kw)


def load_suite(exp: Experiment) -> Suite:
    s = exp.suite
    src = str(exp.path) if exp.path else None
    factory = registry.resolve("suite", registry.SUITES, s["name"], "suite.name", src)
    entry = registry.SUITES.get(s["name"])
    check_component_options(exp, "suite", factory)  # an option the loader does not take: named, not a traceback
    try:
        suite = _call(factory, s.get("options") or {}, **{entry.path_arg if entry else "path": s.get("path")})
    except VerifirstError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"suite {s['name']!r} could not be loaded: {e}", path=src, line=_options_line(exp, "suite"),
                          field="suite.options", expected="options the suite takes (see `verifirst components`)") \
            from None
    if not isinstance(suite, Suite):
        raise VerifirstError(f"suite {s['name']!r} returned {type(suite).__name__}, not a Suite")
    if s.get("limit"):
        items = list(suite.items)
        random.Random(exp.experiment["seed"]).shuffle(items)
        suite = Suite(suite.name, items[: s["limit"]], suite.description, suite.meta)
    return suite


def build_program(exp: Experiment, verifier=None, items=None):
    """The experiment's program; an option it does not take or a value it refuses is a
    configuration error naming program.options, not a traceback."""
    p = exp.program
    src = str(exp.path) if exp.path else None
    factory = registry.resolve("program", registry.PROGRAMS, p["name"], "program.name", src)
    check_component_options(exp, "program", factory)
    try:
        return _call(factory, p.get("options") or {}, verifier=verifier, items=items,
                     workdir=exp.experiment["workdir"])
    except VerifirstError:
        raise
    except (TypeError, ValueError, KeyError) as e:
        raise ConfigError(f"program {p['name']!r} could not be built: {e}", path=src,
                          line=_options_line(exp, "program"), field="program.options",
                          expected="options the program accepts (see `verifirst components`)") from None


def _options_line(exp: Experiment, section: str) -> int | None:
    if not (exp.path and Path(exp.path).is_file()):
        return None
    from .config import _line_of

    text = Path(exp.path).read_text(encoding="utf-8", errors="replace")
    return _line_of(text, section, "options") or _line_of(text, f"{section}.options", None)


def check_component_options(exp: Experiment, section: str, factory) -> None:
    """Refuse an option name the [section]'s factory does not take (e.g. `variantt`).

    Args:
        exp: the experiment.
        section: "program" or "verifier".
        factory: the loaded factory.
    """
    body = getattr(exp, section)
    registry.check_options(section, body["name"], factory, body.get("options") or {}, f"{section}.options",
                           str(exp.path) if exp.path else None, _options_line(exp, section))


def build_verifier(exp: Experiment, models: Models):
    """The experiment's verifier; a constructor that fails on anything but our own errors
    (a bad option, a missing tool) is reported as a configuration error, not a traceback."""
    v = exp.verifier
    src = str(exp.path) if exp.path else None
    factory = registry.resolve("verifier", registry.VERIFIERS, v["name"], "verifier.name", src)
    check_component_options(exp, "verifier", factory)
    try:
        return _call(factory, v.get("options") or {}, judge_lm=models.judge if exp.models.get("judge") else None)
    except VerifirstError:
        raise
    except Exception as e:
        raise ConfigError(f"verifier {v['name']!r} could not be built: {type(e).__name__}: {e}", path=src,
                          field="verifier.options",
                          expected="options the verifier accepts (see `verifirst components`)") from None


def _check_dirs(exp: Experiment, run_dir) -> None:
    """The workdir and a given run directory must be directories this process can write."""
    from .config import _line_of, check_workdir

    src = str(exp.path) if exp.path else None
    text = Path(exp.path).read_text(encoding="utf-8", errors="replace") if src and Path(src).is_file() else ""
    check_workdir(exp.experiment["workdir"], path=src, line=_line_of(text, "experiment", "workdir"))
    if run_dir:
        check_workdir(run_dir, field="--run-dir")


def make_executor(exp: Experiment):
    """Where the verifier runs: [experiment] executor ("thread" | "ray"), ray_address, threads (under
    Ray, the number of workers, each building the [verifier] by name once).

    Args:
        exp: the experiment.
    """
    from .executor import VerifierSpec, from_config

    ex, v = exp.experiment, exp.verifier
    # a verifier handed the judge LM is shipped as built (a worker has no LM to hand it)
    spec = None if exp.models.get("judge") else VerifierSpec(v["name"], dict(v.get("options") or {}))
    executor = from_config(ex["executor"], ex.get("ray_address"), ex["threads"], spec)
    check = getattr(executor, "preflight", None)
    if check is not None:  # an address nothing answers at stops the run before anything is written
        src = str(exp.path) if exp.path else None
        line = None
        if exp.path and Path(exp.path).is_file():
            from .config import _line_of

            line = _line_of(Path(exp.path).read_text(encoding="utf-8"), "experiment", "ray_address")
        check(source=src, line=line)
    return executor


def config_digest(exp: Experiment) -> str:
    """What a run directory may be resumed with: the configuration with its credentials masked, so
    the key is never part of what is stored and a rotated key still resumes.

    Args:
        exp: the experiment.
    """
    return hashlib.sha256(json.dumps(redact(exp.as_dict()), sort_keys=True, default=str).encode()).hexdigest()[:12]


def make_manifest(exp: Experiment, suite: Suite) -> SplitManifest:
    sp = exp.splits
    if sp.get("manifest"):
        m = SplitManifest.load(sp["manifest"])
        ids = {it.id for it in suite.items}
        missing = [i for i in m.train + m.val + m.test if i not in ids]
        if missing:
            raise ConfigError(f"manifest names {len(missing)} item(s) not in suite {suite.name}, e.g. {missing[:3]}",
                              path=sp["manifest"], field="splits.manifest", expected="a manifest made for this suite")
        return m
    strat = sp.get("stratify")
    return make_splits(suite.items, key=lambda it: it.id, group=lambda it: it.group_key,
                       ratios=sp["ratios"], seed=exp.experiment["seed"],
                       stratify=(lambda it: str(it.meta.get(strat, it.gold.get(strat, "")))) if strat else None,
                       source=str(exp.path) if exp.path else None, by=sp.get("by") or "random",
                       time_field=sp.get("time_field"), windows=sp.get("windows"))


def unscored_metrics(report: dict) -> dict[str, int]:
    """Items without a verdict per phase and cause, and skipped trace operations, as run metrics.

    Args:
        report: the run report (its split summaries and tracking_failures).
    """
    from .report import unscored_totals

    names = {"lm": "items_lm_error", "verifier": "items_verifier_error", "inconclusive": "items_inconclusive"}
    out = {f"{names[cause]}_{phase}": n
           for phase in ("before", "after") for cause, n in unscored_totals(report, phase).items()}
    out["tracking_failures"] = (report.get("tracking_failures") or {}).get("count", 0)
    return out


def tracking_failures(tracker: Tracker, result: Any) -> dict:
    """Trace operations that failed and were skipped: the tracker's own and the per-item hooks'.

    Args:
        tracker: the run's tracker (counts failed feedback, flush and link calls).
        result: the OptimizationResult whose evaluations count failed per-item hooks.
    """
    evals = {id(r): r for phase in (result.before, result.after) for r in phase.values()}.values()
    firsts = [tracker.first_failure] + [r.hook_error for r in evals]
    count = tracker.failures + sum(r.hook_failures for r in evals)
    return {"count": count, "first": next((f for f in firsts if f), None)}


def _resumes(run_dir: Path, exp: Experiment) -> bool:
    """Whether run_dir holds an unfinished or finished run to resume; refuses one that another
    experiment configuration started."""
    state = run_dir / "run_state.json"
    if not state.exists():
        return False
    try:
        old = json.loads(state.read_text()).get("config_digest")
    except (OSError, json.JSONDecodeError):
        old = None
    if old != config_digest(exp):
        raise ConfigError("this run directory belongs to another experiment configuration",
                          path=str(state), field="config_digest",
                          expected="the same experiment file to resume, or a fresh --run-dir")
    return True


def run(exp: Experiment, run_dir: str | Path | None = None, *, progress: bool | None = None,
        tracking_uri: str | None = None, offline: bool = False, echo=print,
        models: Models | None = None) -> RunOutput:
    """models: LMs to use instead of the file's [models] (tests pass scripted ones)."""
    ex = exp.experiment
    workdir = Path(ex["workdir"])
    _check_dirs(exp, run_dir)  # a file or a read-only place as workdir refuses the run, nothing written
    fresh = not run_dir
    run_dir = Path(run_dir) if run_dir else new_run_dir(workdir, ex["name"])
    resumed = _resumes(run_dir, exp)
    # Everything that can refuse the run comes before anything is written.
    executor = make_executor(exp)  # a Ray address nothing answers at refuses the run here
    tr = exp.tracking
    tracker = Tracker(workdir, uri=tracking_uri or tr.get("uri"), experiment=tr.get("experiment") or ex["name"],
                      enabled=tr["enabled"], offline=offline, autolog=tr.get("traces", True))
    suite = load_suite(exp)
    manifest = make_manifest(exp, suite)
    if models is None:
        models = make_models({k: exp.models.get(k) for k in ("task", "reflection", "teacher", "judge")},
                             temperature=exp.models.get("temperature"))
    verifier = build_verifier(exp, models)
    check_verifiers([verifier], suite.items)  # a toolchain that cannot run refuses the run before any LM call
    program = build_program(exp, verifier=verifier, items=suite.items)
    out_field = getattr(program, "output_field", None) or (exp.program.get("options") or {}).get("output_field")
    if not out_field:
        raise ConfigError("program declares no output field", field="program.options.output_field",
                          expected="the name of the program's output to verify")
    scorer = Metric(verifier, out_field)
    o = exp.optimizer
    engine = resolve_engine(o["name"], o.get("options") or {}, source=str(exp.path) if exp.path else None)
    check_optimizer_needs(manifest, engine, str(exp.path) if exp.path else None)
    workdir.mkdir(parents=True, exist_ok=True)
    configure_cache(workdir / "cache")
    budget = Budget(max_metric_calls=o.get("max_metric_calls"), auto=o.get("auto"), max_iters=o.get("max_iters"),
                    num_threads=ex["threads"])
    hold = lock_run_dir(run_dir, fresh=fresh)  # another process on this run dir is refused here, by pid
    run_dir = hold.path
    usage_before = USAGE.total()
    scope = contextlib.ExitStack()
    status = "FAILED"
    try:
        resumed = _resumes(run_dir, exp)  # again under the lock: another run may have started it meanwhile
        atomic.write_json(run_dir / "run_state.json", {"config": redact(exp.as_dict()), "status": "running",
                                                        "config_digest": config_digest(exp)})
        echo(f"suite {suite.name}: {len(suite)} items; splits train {len(manifest.train)} / val "
             f"{len(manifest.val)} / test {len(manifest.test)} (digest {manifest.digest}); optimizer {o['name']}; "
             f"run dir {run_dir}" + (" (resuming)" if resumed else ""))
        run_id = tracker.start(ex["name"], params={"config": exp.as_dict(), "split_digest": manifest.digest,
                                                   "models": {k: getattr(getattr(models, k), "spec", None)
                                                              for k in ("task", "reflection", "teacher", "judge")},
                                                   "suite_size": len(suite)},
                               tags={"verifirst.split_digest": manifest.digest, "verifirst.suite": suite.name,
                                     "verifirst.optimizer": o["name"], "verifirst.run_dir": str(run_dir)})
        # A context, not dspy.configure: a run must not change the caller's global settings.
        scope.enter_context(dspy.context(lm=models.task, adapter=FastJSONAdapter()))
        tracker.log_json(exp.as_dict(), "config.json")
        ctx = EngineContext(run_dir=run_dir, reflection_lm=models.reflection, teacher_lm=models.teacher,
                            task_lm=models.task, seed=ex["seed"])
        t0 = time.time()
        result = optimize(program, scorer, suite.items, manifest, engine, budget, ctx, threads=ex["threads"],
                          executor=executor, splits=nonempty_splits(manifest),  # no_val / no_test: skip it
                          callback=TrackerCallback(tracker) if tracker.enabled else None, progress=progress,
                          max_error_rate=ex["max_error_rate"],
                          ledger=TestLedger(workdir / LEDGER_FILE))  # the workdir's, even for --run-dir
        # a split with no verdict raised RunFailed in the driver: nothing below (registry, reports) ran
        report = result.report
        used = USAGE.total()
        report.update({
            "experiment": ex["name"], "suite": suite.name, "run_dir": str(run_dir), "run_id": run_id,
            "tracking_uri": tracker.uri, "wall_s": round(time.time() - t0, 2),
            "models": {k: getattr(getattr(models, k), "spec", None) for k in ("task", "reflection", "teacher", "judge")},
            "usage": USAGE.as_dict(), "usage_endpoints": USAGE.endpoints_as_dict(),
            "usage_this_run": {"calls": used.calls - usage_before.calls,
                               "lm_calls": used.lm_calls - usage_before.lm_calls,
                               "cache_hits": used.cache_hits - usage_before.cache_hits,
                               "errors": used.errors - usage_before.errors,
                               "prompt_tokens": used.prompt_tokens - usage_before.prompt_tokens,
                               "completion_tokens": used.completion_tokens - usage_before.completion_tokens,
                               "attempts": used.attempts - usage_before.attempts,
                               "failed_attempts": used.failed_attempts - usage_before.failed_attempts,
                               "unusable": used.unusable - usage_before.unusable},
        })
        report["tracking_failures"] = tracking_failures(tracker, result)
        # only what the optimizer changed is registered: a kept seed prompt is no new version
        if tr.get("register_prompt") and tracker.enabled and report.get("instructions") \
                and report.get("instructions_changed"):
            name = f"{ex['name']}-instructions".replace(" ", "-")
            text = "\n\n".join(f"## {k}\n{v}" for k, v in report["instructions"].items())
            report["prompt_uri"] = tracker.register_prompt(
                name, text, tags={"split_digest": manifest.digest, "run_id": run_id or "", "engine": o["name"]})
        from .report import write_reports

        paths = write_reports(report, run_dir)
        for p in paths:
            tracker.log_artifact(p, "report")
        from .html_report import log_plots, write_html

        if tracker.enabled:
            log_plots(tracker, report, run_dir)
        else:
            write_html(report, run_dir / "report.html", run_dir=run_dir)
        tracker.log_artifact(run_dir / "split_manifest.json")
        if (run_dir / "optimized_program.json").exists():
            tracker.log_artifact(run_dir / "optimized_program.json", "program")
        tracker.log_json(report["usage"], "usage.json")
        u = report["usage_this_run"]
        tracker.log_metrics({"lm_calls": u["lm_calls"], "cache_hits": u["cache_hits"], "lm_errors": u["errors"],
                             "prompt_tokens": u["prompt_tokens"], "completion_tokens": u["completion_tokens"],
                             **unscored_metrics(report)})
        atomic.write_json(run_dir / "run_state.json", {"config": redact(exp.as_dict()), "status": "finished",
                                                        "config_digest": config_digest(exp), "run_id": run_id})
        status = "FINISHED"
        return RunOutput(run_dir, report, run_id, tracker, result.program)
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        tracker.finish(status)
        scope.close()
        hold.release()
