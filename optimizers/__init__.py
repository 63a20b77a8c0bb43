"""Optimizer engines (GEPA, SIMBA, AutoRefine) behind the kernel's one interface.

The run loop (`verifirst.loop.driver`: `vf.optimize` is its only entry), the engine protocol
(`verifirst.core.engine`) and the metric (`verifirst.core.metric`) live in the kernel; the engine names
below stay importable from here.
Engines are found by name through `verifirst.core.registry.ENGINES`.
"""
from __future__ import annotations

from typing import Any

from verifirst.loop.driver import OptimizationResult, compare
from verifirst.core.engine import Budget, Engine, EngineContext, EngineResult, TeleprompterEngine, resolve_engine
from verifirst.core.registry import ENGINES as _REGISTERED

from .metric import VerifierMetric

__all__ = ["Budget", "Engine", "EngineContext", "EngineResult", "TeleprompterEngine", "VerifierMetric",
           "get_engine", "OptimizationResult", "compare"]

ENGINES = tuple(_REGISTERED) + ("none",)


def get_engine(name: str, **options: Any) -> Engine | None:
    """The engine registered under `name` built with `options`; None for "none".

    Args:
        name: "gepa", "simba", "autorefine", "none", or another registered name.
        options: the engine constructor's keyword arguments.
    """
    if name != "none" and name not in _REGISTERED and ":" not in name:
        raise ValueError(f"unknown optimizer {name!r}; one of {', '.join(ENGINES)}")
    return resolve_engine(name, options)
