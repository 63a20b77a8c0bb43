"""Progress lines for a person, as an observer of the run loop: what a run is about to do, and,
when stdout is not a terminal (a log file, cron, CI), one line per phase and per N items
(verifirst.report.progress; none under `-q`)."""
from __future__ import annotations

import contextlib
from typing import Any, Callable

from verifirst.core.callbacks import HOOKS, ItemStart, RunCallback, RunStart
from verifirst.report.progress import PhaseLines, wanted


class Console(RunCallback):
    """Say what a run is about to do: the data, the splits, the optimizer, the run directory; and
    where no progress display draws itself (stdout not a terminal), how far each phase is.

    Args:
        echo: where lines go (print, typer.echo, a logger's info).
        lines: plain progress lines (default: when stdout is not a terminal and not quiet).
    """

    def __init__(self, echo: Callable[[str], None], lines: bool | None = None):
        self.echo = echo
        self.lines = PhaseLines(echo, announce=False) if (wanted() if lines is None else lines) else None

    def on_run_start(self, event: RunStart) -> None:
        s = event.sizes
        self.echo(f"suite {event.suite}: {event.n_items} items; splits train {s['train']} / val {s['val']} / test "
                  f"{s['test']} (digest {event.split_digest}); optimizer {event.optimizer}; run dir {event.run_dir}"
                  + (" (resuming)" if event.resumed else ""))
        if self.lines is not None:
            self.lines.on_run_start(event)
        return None

    def item_scope(self, event: ItemStart) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


def _forward(hook: str):
    def call(self: Console, event: Any) -> None:
        if self.lines is not None:
            getattr(self.lines, hook)(event)

    call.__name__ = hook
    return call


for _hook in HOOKS:
    if _hook != "on_run_start":
        setattr(Console, _hook, _forward(_hook))
