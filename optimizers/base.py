"""One interface over every optimizer engine.

An engine gets a program, a metric, train and validation examples (already admitted by the
split guard), a budget and a run context; it returns the optimized program plus its
per-iteration history. The driver (`optimizers.optimize`) does everything around it:
guard, before/after evaluation on every split, paired tests, tracking.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol


@dataclass
class Budget:
    max_metric_calls: int | None = None
    auto: str | None = None  # "light" | "medium" | "heavy" (GEPA)
    max_iters: int | None = None  # AutoRefine iterations, SIMBA steps
    num_threads: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class EngineResult:
    program: Any
    history: list[dict] = field(default_factory=list)  # one dict per iteration: metrics
    details: dict[str, Any] = field(default_factory=dict)  # engine-specific, JSON-able


@dataclass
class EngineContext:
    """What an engine may use besides the data: LMs by role, a run dir, a logger."""

    run_dir: Path
    reflection_lm: Any = None
    teacher_lm: Any = None
    task_lm: Any = None
    log_metrics: Callable[[dict, int], None] = lambda metrics, step: None
    log_artifact: Callable[[Path], None] = lambda path: None
    seed: int = 0


class Engine(Protocol):
    name: str

    def compile(self, program: Any, metric: Any, trainset: list, valset: list, budget: Budget,
                ctx: EngineContext) -> EngineResult: ...
