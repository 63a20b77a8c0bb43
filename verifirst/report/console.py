"""Progress lines for a person at a terminal, as an observer of the run loop."""
from __future__ import annotations

from typing import Callable

from verifirst.core.callbacks import RunCallback, RunStart


class Console(RunCallback):
    """Say what a run is about to do: the data, the splits, the optimizer, the run directory.

    Args:
        echo: where lines go (print, typer.echo, a logger's info).
    """

    def __init__(self, echo: Callable[[str], None]):
        self.echo = echo

    def on_run_start(self, event: RunStart) -> None:
        s = event.sizes
        self.echo(f"suite {event.suite}: {event.n_items} items; splits train {s['train']} / val {s['val']} / test "
                  f"{s['test']} (digest {event.split_digest}); optimizer {event.optimizer}; run dir {event.run_dir}"
                  + (" (resuming)" if event.resumed else ""))
        return None
