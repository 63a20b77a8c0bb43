"""Progress as plain lines, for a run whose output is not a terminal (a log file, cron, CI, nohup).

A progress bar on a terminal redraws one line; written to a file it is nothing (rich draws no bar
there) or a flood of carriage returns. Here each phase says when it starts and ends, and each
evaluation says how far it is every `every` items (or every `heartbeat_s` seconds of a slow one),
with counts and the time since the run started:

    [    0s] before val: 0/30 items
    [   41s] before val: 10/30 items (4 pass, 1 no verdict)
    [  118s] before val: done, 30 items, 11 pass, 2 no verdict (118 s)
    [  118s] optimize GEPA: started
    [  560s] optimize GEPA: iteration 3

`PhaseLines` observes the typed events of the one run loop (verifirst.core.callbacks); the loop
knows nothing of it. `wanted()` is the rule the console observer applies: lines when stdout is not
a terminal, none under quiet (`-q`, or VERIFIRST_QUIET=1 in the environment). `study_lines` is the same
for a `verifirst bench` study, whose own loop tells no events: started, a line a minute with its LM
calls, done with its exit status.
"""
from __future__ import annotations

import math
import os
import sys
import threading
import time
from typing import Callable

from verifirst.core.callbacks import (EvaluationEnd, EvaluationStart, Iteration, OptimizerEnd, OptimizerStart,
                                      ReportWritten, RowScored, RunCallback, RunEnd, RunStart)

QUIET_ENV = "VERIFIRST_QUIET"
LINES_PER_SPLIT = 10  # an evaluation says how far it is about ten times
HEARTBEAT_S = 60.0  # and at least once a minute while items finish
_QUIET = [False]


def set_quiet(quiet: bool) -> None:
    """Quiet (`verifirst -q`): no progress lines, whatever the output is.

    Args:
        quiet: True for `-q`.
    """
    _QUIET[0] = bool(quiet)


def is_quiet() -> bool:
    """Whether progress lines are off: set_quiet(True), or VERIFIRST_QUIET set to 1/true/yes."""
    return _QUIET[0] or os.environ.get(QUIET_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def wanted(stream=None) -> bool:
    """Whether plain progress lines should be printed: not quiet, and `stream` (stdout) not a terminal,
    where a progress display already draws itself.

    Args:
        stream: the output the lines go to (default sys.stdout).
    """
    stream = stream if stream is not None else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-like stream without a descriptor
        tty = False
    return not is_quiet() and not tty


class PhaseLines(RunCallback):
    """One line per phase and per `every` items of an evaluation, with counts and elapsed time.

    Args:
        echo: where lines go (print, typer.echo).
        every: items between lines (default: a tenth of the split, at least 1).
        heartbeat_s: a line also when this many seconds passed since the last one, at the next item.
        clock: seconds, monotonic (tests pass their own).
        announce: a line when the run starts (off where another observer already says it).
        iterations: a line per optimizer iteration (off where another observer prints them, as
            calibration's steps do).
    """

    def __init__(self, echo: Callable[[str], None], every: int | None = None, heartbeat_s: float = HEARTBEAT_S,
                 clock: Callable[[], float] = time.monotonic, announce: bool = True, iterations: bool = True):
        self.echo, self.every, self.heartbeat_s, self.clock = echo, every, heartbeat_s, clock
        self.announce, self.iterations = announce, iterations
        self._lock = threading.Lock()  # rows arrive from the evaluation's worker threads
        self._t0 = self._last = clock()
        self._sizes: dict = {}
        self._counts: dict = {}
        self._phase_t0: dict = {}
        self._engine = "optimizer"

    def _say(self, text: str) -> None:
        self._last = self.clock()
        self.echo(f"[{self._last - self._t0:6.0f}s] {text}")

    def _total(self, split: str) -> int | None:
        n = self._sizes.get(split)
        return n if isinstance(n, int) else None

    def on_run_start(self, event: RunStart) -> None:
        self._t0 = self._last = self.clock()
        self._sizes = dict(event.sizes or {})
        sizes = ", ".join(f"{k} {v}" for k, v in self._sizes.items())
        if self.announce:
            self._say(f"run {event.name}: {event.n_items} items ({sizes}); optimizer {event.optimizer}"
                      + ("; resuming" if event.resumed else ""))
        return None

    def on_evaluation_start(self, event: EvaluationStart) -> None:
        key = (event.phase, event.split)
        with self._lock:
            self._counts[key] = {"done": 0, "pass": 0, "unscored": 0}
            self._phase_t0[key] = self.clock()
            total = self._total(event.split)
            self._say(f"{event.phase} {event.split}: 0/{total if total is not None else '?'} items")

    def on_row(self, event: RowScored) -> None:
        key = (event.phase, event.split)
        status = getattr(event.row, "status", None)
        with self._lock:
            c = self._counts.setdefault(key, {"done": 0, "pass": 0, "unscored": 0})
            c["done"] += 1
            c["pass"] += status == "PASS"
            c["unscored"] += status in ("ERROR", "INCONCLUSIVE")
            total = self._total(event.split)
            step = self.every or max(1, math.ceil((total or LINES_PER_SPLIT) / LINES_PER_SPLIT))
            due = c["done"] % step == 0 or self.clock() - self._last >= self.heartbeat_s
            if due and c["done"] != total:  # the last item is the end line's
                self._say(f"{event.phase} {event.split}: {c['done']}/{total if total is not None else '?'} items "
                          f"({_counts(c['pass'], c['unscored'])})")

    def on_evaluation_end(self, event: EvaluationEnd) -> None:
        key = (event.phase, event.split)
        with self._lock:
            took = self.clock() - self._phase_t0.get(key, self._t0)
            res = event.result
            if res is None:
                self._say(f"{event.phase} {event.split}: stopped by an error ({took:.0f} s)")
                return
            rows = list(getattr(res, "rows", None) or [])
            n_pass = sum(getattr(r, "status", None) == "PASS" for r in rows)
            unscored = sum(getattr(r, "status", None) in ("ERROR", "INCONCLUSIVE") for r in rows)
            self._say(f"{event.phase} {event.split}: done, {len(rows)} items, {_counts(n_pass, unscored)} "
                      f"({took:.0f} s)")

    def on_optimizer_start(self, event: OptimizerStart) -> None:
        self._engine = event.engine
        self._phase_t0["optimize"] = self.clock()
        self._say(f"optimize {event.engine}: started")

    def on_iteration(self, event: Iteration) -> None:
        if not self.iterations:
            return
        shown = [f"{k} {v:g}" for k, v in (event.metrics or {}).items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)][:4]
        with self._lock:
            self._say(f"optimize {self._engine}: iteration {event.step}" + (f" ({', '.join(shown)})" if shown else ""))

    def on_optimizer_end(self, event: OptimizerEnd) -> None:
        took = self.clock() - self._phase_t0.get("optimize", self._t0)
        self._say(f"optimize {self._engine}: {'failed' if event.failed else 'done'} ({took:.0f} s)")

    def on_report_written(self, event: ReportWritten) -> None:
        self._say(f"report written: {event.run_dir}")

    def on_run_end(self, event: RunEnd) -> None:
        why = f": {event.stopped_by or event.failure}" if (event.stopped_by or event.failure) else ""
        self._say(f"run {event.status.lower()}{why}")


def _counts(n_pass: int, unscored: int) -> str:
    return f"{n_pass} pass" + (f", {unscored} no verdict" if unscored else "")


class StudyLines:
    """Progress lines for a `verifirst bench` study, whose own loop tells no run-loop events: a line
    when it starts, one every `heartbeat_s` seconds with the LM calls made so far, and one when it ends
    with its exit status. Use `study_lines`, which prints nothing where lines are not wanted.

    Args:
        name: the study's name.
        echo: where lines go.
        heartbeat_s: seconds between the lines while the study runs.
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(self, name: str, echo: Callable[[str], None], heartbeat_s: float = HEARTBEAT_S,
                 clock: Callable[[], float] = time.monotonic):
        self.name, self.echo, self.heartbeat_s, self.clock = name, echo, heartbeat_s, clock
        self.rc: int | None = None  # the study's exit status, set by the caller before the block ends
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0, self._calls0 = 0.0, (0, 0)  # the clock and the LM counts when the block starts

    @staticmethod
    def _calls() -> tuple[int, int]:
        from verifirst.lm import USAGE

        total = USAGE.total()
        return total.calls, total.errors

    def _say(self, text: str) -> None:
        self.echo(f"[{self.clock() - self._t0:6.0f}s] bench {self.name}: {text}")

    def _used(self) -> str:
        calls, errors = self._calls()
        calls, errors = calls - self._calls0[0], errors - self._calls0[1]
        return f"{calls} LM call(s)" + (f", {errors} failed" if errors else "")

    def tick(self) -> None:
        """The line said every heartbeat_s seconds while the study runs."""
        self._say(f"running, {self._used()}")

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            self.tick()

    def __enter__(self) -> "StudyLines":
        self._t0, self._calls0 = self.clock(), self._calls()
        self._say("started")
        self._thread = threading.Thread(target=self._beat, name=f"bench-lines-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind, exc, tb) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        took = self.clock() - self._t0
        if kind is None or issubclass(kind, SystemExit):  # a study's argparse exits (--help, a bad flag)
            rc = self.rc if kind is None else (exc.code if isinstance(exc.code, int) else 1 if exc.code else 0)
            self._say(f"done, exit {rc or 0}, {self._used()} ({took:.0f} s)")
        else:
            self._say(f"stopped: {getattr(kind, '__name__', kind)}, {self._used()} ({took:.0f} s)")


def study_lines(name: str, echo: Callable[[str], None] | None = None, heartbeat_s: float = HEARTBEAT_S):
    """StudyLines for `verifirst bench NAME` when lines are wanted (stdout not a terminal, not `-q`),
    else a block that prints nothing. The lines go to stderr by default: a study's own output on stdout
    (a JSON document, a table) stays whole.

    Args:
        name: the study's name.
        echo: where lines go (default: stderr).
        heartbeat_s: seconds between the lines while the study runs.
    """
    if not wanted():
        return _Silent()
    return StudyLines(name, echo or (lambda line: print(line, file=sys.stderr, flush=True)), heartbeat_s)


class _Silent:
    rc: int | None = None

    def __enter__(self) -> "_Silent":
        return self

    def __exit__(self, *exc) -> None:
        return None
