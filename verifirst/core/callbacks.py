"""What the run loop tells its observers: one callback protocol, one typed event per hook.

Tracking (MLflow), console progress and a domain's own post-steps (a calibrated judge's champion,
review queue, anchors) all observe the one loop (`verifirst.loop.driver.run`) through `RunCallback`;
nothing hands a tracker to the loop. The events, in the order a run sends them:

    RunStart -> (EvaluationStart -> item* -> EvaluationEnd)* for every split before
    -> OptimizerStart -> (Iteration | ArtifactWritten)* -> OptimizerEnd
    -> (EvaluationStart -> item* -> EvaluationEnd)* after
    -> ReportReady (observers may add sections) -> ReportWritten -> RunEnd

where an item is `item_scope(ItemStart)` entered, the item's program attempts and scoring run,
RowScored sent, the scope left, all in one thread.

A run that fails still sends RunEnd (status FAILED or KILLED), and an evaluation that raised
still sends its EvaluationEnd (result None), so every scope an observer opened is closed.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence


@dataclass(frozen=True)
class RunStart:
    """A run begins: its name, directory, what it runs on, and the parameters a tracker logs."""

    name: str
    run_dir: Path
    suite: str
    n_items: int
    sizes: dict
    split_digest: str
    optimizer: str
    resumed: bool
    params: dict
    tags: dict
    config: dict | None = None  # the experiment file's settings (credentials masked), when there is one
    # {split: {"digest", "records"}}: the evaluated splits' items, for a tracker's datasets
    datasets: dict | None = None


@dataclass(frozen=True)
class EvaluationStart:
    phase: str  # "before" or "after"
    split: str


@dataclass(frozen=True)
class ItemStart:
    """One item's evaluation begins, in the thread that runs its program (every attempt) and scores it."""

    phase: str
    split: str
    item: Any


@dataclass(frozen=True)
class RowScored:
    """One evaluated item, sent in the thread that ran the program, inside the item's item_scope."""

    phase: str
    split: str
    item: Any
    row: Any


@dataclass(frozen=True)
class EvaluationEnd:
    phase: str
    split: str
    result: Any  # an EvalResult, or None when the evaluation raised
    checkpoint: Path


@dataclass(frozen=True)
class OptimizerStart:
    engine: str


@dataclass(frozen=True)
class Iteration:
    """One optimizer iteration's metrics (from EngineContext.log_metrics)."""

    metrics: dict
    step: int


@dataclass(frozen=True)
class ArtifactWritten:
    """A file the engine wrote (from EngineContext.log_artifact)."""

    path: Path


@dataclass(frozen=True)
class OptimizerEnd:
    history: list
    details: dict
    failed: bool = False  # the engine raised (history and details are then empty)


@dataclass
class ReportReady:
    """The run's report before its files are written: observers may add their sections to `report`."""

    report: dict
    run_dir: Path
    result: Any  # the driver's OptimizationResult (program, before, after)


@dataclass(frozen=True)
class ReportWritten:
    """The report files in the run directory (report.json, report.md, report.html, plots)."""

    report: dict
    run_dir: Path
    paths: Sequence[Path] = field(default_factory=tuple)


@dataclass(frozen=True)
class RunEnd:
    status: str  # FINISHED, FAILED or KILLED
    run_dir: Path
    report: dict | None = None
    stopped_by: str | None = None  # why a run that did not finish stopped (e.g. "stopped by budget: ...")
    failure: str | None = None  # the message of the exception that ended the run, credentials masked


class RunCallback:
    """An observer of the run loop; every hook is a no-op here. Subclass the ones you need.

    A hook that raises stops the run (it is part of the run), except `on_run_end`.
    """

    def on_run_start(self, event: RunStart) -> str | None:
        """A run begins; a tracker returns its run id (it goes into the report)."""
        return None

    def on_evaluation_start(self, event: EvaluationStart) -> None:
        """An evaluation of one split begins."""

    def item_scope(self, event: ItemStart) -> contextlib.AbstractContextManager:
        """A context around one item's evaluation (its program attempts, its scoring, its RowScored),
        entered and left in the thread that runs them; it is left also when the item raises. A
        tracker opens the item's trace here, so that every attempt's calls are in it. None here."""
        return contextlib.nullcontext()

    def on_row(self, event: RowScored) -> None:
        """One item was evaluated."""

    def on_evaluation_end(self, event: EvaluationEnd) -> None:
        """An evaluation ended (result None when it raised)."""

    def on_optimizer_start(self, event: OptimizerStart) -> None:
        """The engine's compile begins."""

    def on_iteration(self, event: Iteration) -> None:
        """One optimizer iteration's metrics."""

    def on_artifact(self, event: ArtifactWritten) -> None:
        """The engine wrote a file."""

    def on_optimizer_end(self, event: OptimizerEnd) -> None:
        """The engine finished."""

    def on_report(self, event: ReportReady) -> None:
        """The report is complete but not yet written: add a section to event.report here."""

    def on_report_written(self, event: ReportWritten) -> None:
        """The report files exist."""

    def on_run_end(self, event: RunEnd) -> None:
        """The run ended (also after a failure)."""


HOOKS = ("on_run_start", "on_evaluation_start", "on_row", "on_evaluation_end", "on_optimizer_start",
         "on_iteration", "on_artifact", "on_optimizer_end", "on_report", "on_report_written", "on_run_end")


class CallbackList(RunCallback):
    """Several observers as one, told in order; the first run id any returns is the run's.

    Args:
        callbacks: the observers (None entries are skipped).
    """

    def __init__(self, callbacks: Sequence[RunCallback | None] = ()):
        self.callbacks = [c for c in callbacks if c is not None]

    def on_run_start(self, event: RunStart) -> str | None:
        ids = [c.on_run_start(event) for c in self.callbacks]
        return next((i for i in ids if i), None)

    @contextlib.contextmanager
    def item_scope(self, event: ItemStart):
        with contextlib.ExitStack() as stack:  # nested in order, left in reverse
            for c in self.callbacks:
                stack.enter_context(c.item_scope(event))
            yield

    def on_run_end(self, event: RunEnd) -> None:
        first: BaseException | None = None
        for c in self.callbacks:  # every observer closes what it opened, even when one fails
            try:
                c.on_run_end(event)
            except Exception as e:  # noqa: BLE001 - re-raised after the others ran
                first = first or e
        if first is not None:
            raise first


def _fan_out(hook: str):
    def call(self: CallbackList, event: Any) -> None:
        for c in self.callbacks:
            getattr(c, hook)(event)

    call.__name__ = hook
    call.__doc__ = getattr(RunCallback, hook).__doc__
    return call


for _hook in HOOKS:
    if _hook not in ("on_run_start", "on_run_end"):
        setattr(CallbackList, _hook, _fan_out(_hook))


def as_callback(observers: RunCallback | Sequence[RunCallback | None] | None) -> RunCallback:
    """One RunCallback from None, one observer or a list of them.

    Args:
        observers: what the caller passed as `callbacks`.
    """
    if observers is None:
        return RunCallback()
    if isinstance(observers, RunCallback):
        return observers
    return CallbackList(list(observers))
