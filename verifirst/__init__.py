"""verifirst: optimize generator and judge prompts against verifiers and workflow outcomes.

Public surface: `make_lm`, `make_splits`, `SplitManifest`, `Item`, `Suite`, `evaluate`,
`stats`, `Tracker`, `run_experiment`. Heavy modules (dspy, mlflow) load on first use.
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
    "evaluate": ("verifirst.evaluate", "evaluate"),
    "Tracker": ("verifirst.tracking", "Tracker"),
    "run_experiment": ("verifirst.experiment", "run"),
    "LeakageError": ("verifirst.errors", "LeakageError"),
    "InputError": ("verifirst.errors", "InputError"),
}


def __getattr__(name: str):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    if name in ("stats", "splits", "lm", "config", "tracking", "report", "errors", "atomic", "task"):
        return importlib.import_module(f"verifirst.{name}")
    raise AttributeError(f"module 'verifirst' has no attribute {name!r}")


__all__ = list(_LAZY) + ["stats", "__version__"]
