"""verifirst: optimize generator and judge prompts against verifiers and workflow outcomes.

The Python API (one import): `optimize`, `evaluate`, `run`, `load_config`, `calibrate`,
`Budget`, `MLflow`, `Metric`, `Suite`, `Item`; `mlflow_scorer` and `dspy_metric` put a verifier
into MLflow or DSPy outside any run. Also `make_lm`, `make_models`, `make_splits`,
`SplitManifest`, `stats`, `Tracker`; `RunCallback` (and the events in `verifirst.callbacks`)
observes the one run loop. Heavy modules (dspy, mlflow) load on
first use.

    import verifirst as vf
    res = vf.optimize(program, data, metric, optimizer="gepa", models={"task": "openai/gpt-4o-mini"})
"""
from __future__ import annotations

import importlib
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

__version__ = "0.1.0"

_LAZY = {
    "make_lm": ("verifirst.lm", "make_lm"),
    "make_splits": ("verifirst.splits", "make_splits"),
    "SplitManifest": ("verifirst.splits", "SplitManifest"),
    "Item": ("verifirst.task", "Item"),
    "Suite": ("verifirst.task", "Suite"),
    "optimize": ("verifirst.api", "optimize"),
    "evaluate": ("verifirst.api", "evaluate"),
    "run": ("verifirst.api", "run"),
    "load_config": ("verifirst.api", "load_config"),
    "calibrate": ("verifirst.calibration", "calibrate"),
    "Result": ("verifirst.api", "Result"),
    "MLflow": ("verifirst.api", "MLflow"),
    "Budget": ("verifirst.engine", "Budget"),
    "Engine": ("verifirst.engine", "Engine"),
    "EngineContext": ("verifirst.engine", "EngineContext"),
    "EngineResult": ("verifirst.engine", "EngineResult"),
    "TeleprompterEngine": ("verifirst.engine", "TeleprompterEngine"),
    "Metric": ("verifirst.metric", "Metric"),
    "mlflow_scorer": ("verifirst.scorers", "mlflow_scorer"),
    "dspy_metric": ("verifirst.scorers", "dspy_metric"),
    "RunCallback": ("verifirst.callbacks", "RunCallback"),
    "make_models": ("verifirst.lm", "make_models"),
    "Tracker": ("verifirst.tracking", "Tracker"),
    "LeakageError": ("verifirst.errors", "LeakageError"),
    "InputError": ("verifirst.errors", "InputError"),
    "Ray": ("verifirst.executor", "Ray"),
    "Threads": ("verifirst.executor", "Threads"),
}


def __getattr__(name: str):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    public = importlib.import_module("verifirst.registry").PUBLIC
    if name in public:  # classes a domain package provides (AutoRefine, AutoRefineAligner)
        mod, attr = public[name].split(":")
        return getattr(importlib.import_module(mod), attr)
    if name in ("stats", "splits", "lm", "config", "tracking", "report", "errors", "atomic", "task", "callbacks"):
        return importlib.import_module(f"verifirst.{name}")
    raise AttributeError(f"module 'verifirst' has no attribute {name!r}")


__all__ = list(_LAZY) + ["AutoRefine", "AutoRefineAligner", "stats", "__version__"]
