"""verifirst: optimize generator and judge prompts against verifiers and workflow outcomes.

The Python API (one import): `optimize`, `evaluate`, `run`, `load_config`, `calibrate`,
`robustness` and `compare_robustness` (a judge's flip rates under perturbed text), `label_agreement`
(Krippendorff's α among labellers and a label policy),
`Budget`, `MLflow`, `Metric`, `Suite`, `Item`; `mlflow_scorer` and `dspy_metric` put a verifier
into MLflow or DSPy outside any run. Also `make_lm`, `make_models`, `make_splits`,
`SplitManifest`, `stats`, `Tracker`; `RunCallback` (and the events in `verifirst.core.callbacks`)
observes the one run loop; `InputError`, `LeakageError`, `RunFailed` and `ErrorRateExceeded` are
what a run raises. Heavy modules (dspy, mlflow) load on
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
    "make_splits": ("verifirst.loop.splits", "make_splits"),
    "SplitManifest": ("verifirst.loop.splits", "SplitManifest"),
    "Item": ("verifirst.core.task", "Item"),
    "Suite": ("verifirst.core.task", "Suite"),
    "optimize": ("verifirst.api", "optimize"),
    "evaluate": ("verifirst.api", "evaluate"),
    "run": ("verifirst.api", "run"),
    "load_config": ("verifirst.api", "load_config"),
    "robustness": ("verifirst.judging.robustness", "robustness"),
    "compare_robustness": ("verifirst.judging.robustness", "compare"),
    "label_agreement": ("verifirst.judging.agreement", "label_agreement"),
    "Result": ("verifirst.api", "Result"),
    "MLflow": ("verifirst.api", "MLflow"),
    "Budget": ("verifirst.core.engine", "Budget"),
    "Engine": ("verifirst.core.engine", "Engine"),
    "EngineContext": ("verifirst.core.engine", "EngineContext"),
    "EngineResult": ("verifirst.core.engine", "EngineResult"),
    "TeleprompterEngine": ("verifirst.core.engine", "TeleprompterEngine"),
    "Metric": ("verifirst.core.metric", "Metric"),
    "mlflow_scorer": ("verifirst.scorers", "mlflow_scorer"),
    "dspy_metric": ("verifirst.scorers", "dspy_metric"),
    "RunCallback": ("verifirst.core.callbacks", "RunCallback"),
    "make_models": ("verifirst.lm", "make_models"),
    "Tracker": ("verifirst.tracking", "Tracker"),
    "LeakageError": ("verifirst.core.errors", "LeakageError"),
    "InputError": ("verifirst.core.errors", "InputError"),
    "RunFailed": ("verifirst.core.errors", "RunFailed"),
    "ErrorRateExceeded": ("verifirst.core.errors", "ErrorRateExceeded"),
    "Ray": ("verifirst.loop.executor", "Ray"),
    "Threads": ("verifirst.loop.executor", "Threads"),
}


_MODULES = {"stats": "verifirst.core.stats", "splits": "verifirst.loop.splits", "lm": "verifirst.lm",
            "config": "verifirst.config", "tracking": "verifirst.tracking", "report": "verifirst.report",
            "errors": "verifirst.core.errors", "atomic": "verifirst.core.atomic", "task": "verifirst.core.task",
            "callbacks": "verifirst.core.callbacks"}


def __getattr__(name: str):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    if name in _MODULES:  # `vf.stats.wilson(...)`: a kernel module by its short name
        return importlib.import_module(_MODULES[name])
    if not name.startswith("__"):  # names a domain registers as "public" (calibrate, monitor, AutoRefine, ...)
        public = importlib.import_module("verifirst.core.registry").PUBLIC
        if name in public:
            return public[name].load()
    raise AttributeError(f"module 'verifirst' has no attribute {name!r}")


__all__ = list(_LAZY) + ["calibrate", "monitor", "monitor_recorded", "AutoRefine", "AutoRefineAligner", "stats", "__version__"]
