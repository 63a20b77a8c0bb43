"""What `verifirst run`, `optimize` and `demo` share with the other verbs: quiet or verbose
library logs, an experiment run through vf.run and printed (the report, its store, the command
that opens it), the demo's experiment. The commands themselves are in verifirst.cli."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer

from verifirst.cli_common import confirm_spend as _confirm_spend


# Libraries whose INFO lines and progress bars would interleave with ours; -v lets them speak.
LIBRARY_LOGGERS = ("dspy", "gepa", "mlflow", "litellm", "LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "alembic")
# Their per-call warnings and tracebacks (truncated replies, failed items) repeat what the run's rows say.
MODEL_CALL_LOGGERS = ("dspy", "gepa", "litellm", "LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
# Plumbing below those libraries: WARNING even with -v (SQLAlchemy alone logs thousands of mapper lines).
PLUMBING_LOGGERS = ("httpx", "httpcore", "urllib3", "sqlalchemy", "matplotlib", "sentence_transformers",
                    "chromadb", "llama_cpp", "filelock", "asyncio")
_VERBOSE = [False]


def set_verbosity(verbose: bool) -> None:
    """Quiet (default): library loggers at WARNING and their tqdm bars off, so a run prints one
    progress display per phase and the final tables. Verbose: everything at INFO and bars on.

    Called again after heavy imports: some libraries set their own levels when first imported.

    Args:
        verbose: True for `-v`.
    """
    import logging

    _VERBOSE[0] = verbose
    level = logging.INFO if verbose else logging.WARNING
    _library_bars(verbose)
    if not verbose:
        os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("LITELLM_LOG", "ERROR")
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(level)
    if not verbose:  # a failed LM call is an ERROR row in the report; its traceback is -v's business
        for name in MODEL_CALL_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
    for name in PLUMBING_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    if verbose:
        logging.basicConfig(level=logging.INFO)


# GEPA's one bar over its metric calls is the optimize phase's progress display on a terminal.
PHASE_BARS = ("GEPA Optimization",)


def library_levels_again() -> None:
    """The levels `-v` (or its absence) chose, set again: every verb calls it after its heavy imports
    (`import dspy` puts its logger back to INFO, so its WARNING lines would leak into a quiet verb)."""
    set_verbosity(_VERBOSE[0])


def _library_bars(on: bool) -> None:
    """tqdm bars on or off for this process. DSPy and GEPA pass disable=False explicitly (so
    TQDM_DISABLE cannot reach them); our own phases use rich progress, which this leaves alone.
    Off still lets GEPA's phase bar through on a terminal, never its nested evaluation bars."""
    import tqdm

    original = tqdm.tqdm.__dict__.get("_verifirst_init") or tqdm.tqdm.__init__
    tqdm.tqdm._verifirst_init = original
    if on:
        tqdm.tqdm.__init__ = original
        return

    def quiet_init(self, *args, **kwargs):
        if not (kwargs.get("desc") in PHASE_BARS and sys.stderr.isatty()):
            kwargs["disable"] = True
        original(self, *args, **kwargs)

    tqdm.tqdm.__init__ = quiet_init


def _check_experiment_tracking_uri(exp, offline: bool) -> None:
    """The URI an experiment would track to without --tracking-uri (the file's tracking.uri, else
    MLFLOW_TRACKING_URI), checked before anything is written; an error names the file and line, or
    the variable.

    Args:
        exp: the loaded experiment.
        offline: --offline (the local store is used whatever the URI).
    """
    from verifirst.config import _line_of
    from verifirst.experiment import experiment_text
    from verifirst.tracking import check_uri, user_tracking_uri

    if offline or not exp.tracking.get("enabled", True):
        return
    uri = exp.tracking.get("uri")
    text = experiment_text(exp) if uri else ""
    if text:
        check_uri(uri, "tracking.uri", path=str(exp.path), line=_line_of(text, "tracking", "uri"))
    elif uri:
        check_uri(uri, "tracking.uri")
    elif user_tracking_uri():
        check_uri(user_tracking_uri(), "MLFLOW_TRACKING_URI")


def _check_run_dir(run_dir: Path) -> None:
    """--run-dir: a directory for one run (a new one, or an unfinished run's to resume) that can be written.

    Args:
        run_dir: the flag's value.
    """
    from verifirst.config import RUN_DIR_EXPECTED, check_workdir

    check_workdir(run_dir, field="--run-dir", expected=RUN_DIR_EXPECTED)


def run_experiment(exp, run_dir, tracking_uri, offline, as_json, progress=None, limits=None, dry_run=False,
                    yes=False):
    """`verifirst run`: vf.run(exp), which is vf.optimize(**vf.load_config(exp)), printed."""
    from verifirst import api
    from verifirst.report import print_report

    library_levels_again()  # dspy and litellm are imported now and may have set their own levels
    if run_dir:
        _check_run_dir(run_dir)
    if not tracking_uri:  # the flag was checked as it was parsed
        _check_experiment_tracking_uri(exp, offline)
    if dry_run:
        est = api.run(exp, run_dir=run_dir, tracking_uri=tracking_uri, offline=offline, limits=limits, dry_run=True)
        _print_estimate(est, as_json)
        return est
    out = api.run(exp, run_dir=run_dir, tracking_uri=tracking_uri, offline=offline, progress=progress,
                  echo=(lambda m: typer.echo(m, err=True)) if as_json else typer.echo, limits=limits,
                  confirm=_confirm_spend(yes))
    if as_json:
        from verifirst.report import report_json

        typer.echo(report_json(out.report))
        return out
    print_report(out.report)
    typer.echo(f"report: {out.run_dir / 'report.md'}")
    if out.run_id:
        typer.echo(f"MLflow run {out.run_id} in {out.tracking_uri}")
        typer.echo(f"inspect it: {_ui_hint(out.tracking_uri, exp.experiment['workdir'])}")
    if out.report.get("prompt_uri"):
        typer.echo(f"optimized prompt registered as {out.report['prompt_uri']}")
    elif out.report.get("engine") not in (None, "none") and not out.report.get("instructions_changed"):
        typer.echo("the start instructions were kept (stopped by budget): no prompt registered"
                   if out.report.get("stopped") else "the optimizer kept the seed instructions: no prompt registered")
    return out


def _ui_hint(uri: str, workdir: str) -> str:
    """The command that opens the store a run was logged to: the workdir's, another file store (a
    --tracking-uri or MLFLOW_TRACKING_URI), or a server, whose own UI is at its address."""
    from verifirst.tracking import default_uri

    if uri == default_uri(workdir):
        return f"verifirst ui --workdir {workdir}"
    if uri.startswith(("http://", "https://")):
        return uri
    return f"verifirst ui --tracking-uri {uri}"


def _print_estimate(estimate, as_json: bool) -> None:
    """A dry run's estimate: the table (or JSON with --json) on stdout."""
    if as_json:
        typer.echo(json.dumps(estimate.as_dict(), indent=2))
    else:
        typer.echo(estimate.render(), nl=False)


def demo_config(workdir: Path, budget: int = 24, model: str | None = None) -> dict:
    """The demo's experiment: GEPA on the built-in bash pack, on the embedded model or `model`.

    Args:
        workdir: where the cache, runs and MLflow store go.
        budget: GEPA metric calls.
        model: a LiteLLM model string for the task and reflection roles (None: the embedded model).
    """
    return {
        "experiment": {"name": "demo-bash-gepa", "workdir": str(workdir), "seed": 0, "threads": 1,
                       "description": f"built-in NL->Bash pack, GEPA on {model or 'the embedded SmolLM2-135M'}"},
        "suite": {"name": "bash-builtin", "limit": 24},
        "program": {"name": "bash-generator", "options": {"variant": "predict"}},
        "verifier": {"name": "bash-pack"},
        "splits": {"ratios": [0.34, 0.33, 0.33]},
        "optimizer": {"name": "gepa", "max_metric_calls": budget},
        # Short answers keep the 135M model fast: a bash command fits in 128 tokens.
        "models": {"task": model, "reflection": model} if model else
                  {"task": {"model": "local", "max_tokens": 128}, "reflection": "local"},
    }


def demo_outcome(report: dict) -> str:
    """One line on what the held-out split shows, and where a real model goes when nothing improved.

    Args:
        report: the demo run's report.
    """
    t = (report.get("splits") or {}).get("test") or {}
    b, a = t.get("before") or {}, t.get("after") or {}
    what = f"test {b.get('pass')}/{b.get('scored')} -> {a.get('pass')}/{a.get('scored')} passed"
    if b.get("scored") and a.get("scored") and a["pass"] / a["scored"] > b["pass"] / b["scored"]:
        return f"held-out result: {what} (interval and McNemar's p in the table above)"
    task = (report.get("models") or {}).get("task") or "task"
    task = "embedded 135M" if task == "local" else task
    return (f"no improvement on held-out items ({what}): the {task} model is the limit; for a result plug a real one: verifirst demo --model openai/gpt-4o-mini, "
            "or task = \"openai/gpt-4o-mini\" under [models] in examples/bash_gepa.toml")
