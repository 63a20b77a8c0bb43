"""What keeps a run's accounting whole when it is stopped from outside or its storage fails.

- `open_meter`: every run has a spend meter (one without limits when the budget sets none) with
  the run directory's call journal attached (verifirst.lm.call_journal): each LM request is
  written before it goes out, and a resumed run counts the requests of every earlier invocation,
  against its limits too.
- `stop_on_signals`: SIGINT and SIGTERM (in the main thread) ask the run to stop: no new request
  or item starts, the requests in flight finish; a second signal, or GRACE_S seconds without the
  run having stopped, abandons the work in flight at once (verifirst.core.interrupts).
- `storage_failure`: a full disk, a run directory deleted under the run, an unwritable store, as
  one StorageError naming what failed and what to do (exit 74), not a traceback.
- `RunDirGuard`: notices a run directory deleted mid-run at the next item (the run's lock file is
  gone), before more work is paid for that nothing could record.
"""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
from pathlib import Path
from typing import Any, Iterator

from verifirst.core.callbacks import EvaluationStart, ItemStart, Iteration, RunCallback
from verifirst.core.interrupts import (StorageError, StopRequested, clear_stop, request_stop, signal_name,
                                       stop_requested)
from verifirst.lm.call_journal import CALLS_FILE, CallJournal

GRACE_S = 10.0  # after the first signal: time for the requests in flight to finish
SIGNALS = (signal.SIGINT, signal.SIGTERM)
STORAGE_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
                  errno.EROFS: "the file system is read-only", errno.EIO: "an I/O error"}


def open_meter(budget: Any, run_dir: Path, spend_meter: Any) -> tuple[Any, CallJournal]:
    """The run's spend meter with the run directory's call journal attached.

    Args:
        budget: the run's Budget.
        run_dir: the run directory (RUN_DIR/calls.jsonl is the journal).
        spend_meter: the loop's `spend_meter(budget)` (None without limits).

    Raises:
        StorageError: the journal cannot be opened.
    """
    from verifirst.lm.spend import Limits, SpendMeter

    meter = spend_meter(budget) or SpendMeter(Limits())
    try:
        journal = CallJournal(Path(run_dir) / CALLS_FILE)
    except OSError as e:
        raise StorageError(f"cannot open the run's call journal {Path(run_dir) / CALLS_FILE}: "
                           f"{e.strerror or e}") from None
    meter.attach_journal(journal)
    return meter, journal


@contextlib.contextmanager
def stop_on_signals(grace_s: float = GRACE_S) -> Iterator[None]:
    """SIGINT and SIGTERM become a stop request for the block (the main thread only; elsewhere the
    handlers cannot be set and the block runs as it is).

    Args:
        grace_s: seconds after the first signal before the work in flight is abandoned.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    timers: list[threading.Timer] = []

    def handler(signum, frame):
        if stop_requested() is not None:  # a second signal, or the grace ran out: now
            raise StopRequested(stop_requested())
        request_stop(signum)
        timer = threading.Timer(grace_s, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timers.append(timer)
        timer.start()

    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for t in timers:
            t.cancel()
        for s, h in previous.items():
            signal.signal(s, h)
        clear_stop()


def interrupted_message(signum: int, run_dir: Path, journal: CallJournal | None) -> str:
    """The one line a run stopped by a signal ends with.

    Args:
        signum: the signal.
        run_dir: the run directory.
        journal: the call journal (for the count of requests sent), if open.
    """
    sent = ""
    if journal is not None:
        t = journal.totals()
        sent = f"; {t['requests']} LM requests sent in all (usage and spend in {run_dir / 'run_state.json'})"
    return (f"interrupted by {signal_name(signum)}: stopped after the requests in flight{sent}. "
            f"Rerun with --run-dir {run_dir} (or the same run_dir) to resume")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def storage_failure(exc: BaseException, run_dir: Path) -> StorageError | None:
    """The StorageError `exc` amounts to (a full disk, a read-only or failing file system, a run
    directory that no longer exists, a store that reports its disk full), or None.

    Args:
        exc: what ended the run.
        run_dir: the run directory.
    """
    if isinstance(exc, StorageError):
        return exc
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in STORAGE_ERRNOS:
            where = f" ({e.filename})" if getattr(e, "filename", None) else ""
            return StorageError(f"storage failed: {STORAGE_ERRNOS[e.errno]}{where}. What was written before "
                                f"is kept in {run_dir}; free space (or fix the file system), then rerun with "
                                f"--run-dir {run_dir} to resume")
        text = str(e).lower()
        if "database or disk is full" in text or "disk i/o error" in text:
            why = "database or disk is full" if "full" in text else "disk I/O error"
            return StorageError(f"storage failed: the MLflow store's disk failed ({why}). What was written before "
                                f"is kept in {run_dir}; free space (or fix the disk), then rerun with --run-dir "
                                f"{run_dir} to resume")
    if not Path(run_dir).is_dir():
        return StorageError(f"the run directory {run_dir} was deleted while the run was going; nothing more could "
                            "be recorded. Start the run again (a new run directory)")
    return None


class RunDirGuard(RunCallback):
    """Stops the run at the next item (or optimizer iteration) once its run directory is gone.

    Args:
        lock_fd: the descriptor of the run's lock file (its link count drops to 0 when deleted).
        run_dir: the run directory.
    """

    def __init__(self, lock_fd: int | None, run_dir: Path):
        self.fd, self.run_dir = lock_fd, Path(run_dir)

    def check(self) -> None:
        """Raise StorageError when the run directory was deleted."""
        if self.fd is None:
            return
        try:
            gone = os.fstat(self.fd).st_nlink == 0
        except OSError:
            gone = True
        if gone:
            raise StorageError(f"the run directory {self.run_dir} was deleted while the run was going; nothing "
                               "more could be recorded. Start the run again (a new run directory)")

    def on_evaluation_start(self, event: EvaluationStart) -> None:
        self.check()

    @contextlib.contextmanager
    def item_scope(self, event: ItemStart):
        self.check()
        yield

    def on_iteration(self, event: Iteration) -> None:
        self.check()
