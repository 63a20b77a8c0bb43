"""Optimizer engines (GEPA, SIMBA, AutoRefine) behind the kernel's one interface.

The run loop (`verifirst.loop.driver`: `vf.optimize` is its only entry), the engine protocol
(`verifirst.core.engine`) and the metric (`verifirst.core.metric`) live in the kernel; the names
below stay importable from here, loaded on first use so that registering costs no import.
`register` adds the engines and the AutoRefine teleprompter to the component registry (entry point
`optimizers` of the group `verifirst.components`, declared in verifirst's pyproject.toml as a plugin
declares its own); engines are then found by name.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verifirst.core.engine import Engine

__all__ = ["Budget", "Engine", "EngineContext", "EngineResult", "TeleprompterEngine", "VerifierMetric",
           "get_engine", "OptimizationResult", "compare", "register"]

_LAZY = {
    "OptimizationResult": ("verifirst.loop.driver", "OptimizationResult"),
    "compare": ("verifirst.loop.driver", "compare"),
    "Budget": ("verifirst.core.engine", "Budget"),
    "Engine": ("verifirst.core.engine", "Engine"),
    "EngineContext": ("verifirst.core.engine", "EngineContext"),
    "EngineResult": ("verifirst.core.engine", "EngineResult"),
    "TeleprompterEngine": ("verifirst.core.engine", "TeleprompterEngine"),
    "VerifierMetric": ("verifirst.optimizers.metric", "VerifierMetric"),
}


def register(registry) -> None:
    """The engines an experiment's [optimizer] names and the class reachable as `verifirst.AutoRefine`
    (AutoRefine's engine and aligner are the judge domain's: verifirst.judge registers them)."""
    add = registry.add
    add("engine", "gepa", "verifirst.optimizers.gepa:GEPAEngine", "GEPA reflective prompt evolution")
    add("engine", "simba", "verifirst.optimizers.simba:SIMBAEngine", "SIMBA stochastic introspective mini-batch ascent")
    add("public", "AutoRefine", "verifirst.optimizers.teleprompter:AutoRefine", "AutoRefine as a DSPy teleprompter")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    if name == "ENGINES":  # the registered engine names, and "none" (evaluate only)
        from verifirst.core.registry import ENGINES as registered

        return tuple(registered) + ("none",)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_engine(name: str, **options: Any) -> Engine | None:
    """The engine registered under `name` built with `options`; None for "none".

    Args:
        name: "gepa", "simba", "autorefine", "none", or another registered name.
        options: the engine constructor's keyword arguments.
    """
    from verifirst.core.engine import resolve_engine
    from verifirst.core.registry import ENGINES as registered

    if name != "none" and name not in registered and ":" not in name:
        raise ValueError(f"unknown optimizer {name!r}; one of {', '.join((*registered, 'none'))}")
    return resolve_engine(name, options)
