"""A run stopped from outside: SIGINT or SIGTERM, and the storage it writes to failing.

The run loop turns the first SIGINT or SIGTERM into a stop request (`request_stop`): no new LM
request is admitted after it (the spend meter raises `StopRequested`), the evaluation starts no
new item, and the requests in flight finish and are accounted. The loop then ends every MLflow
run it opened as KILLED, writes usage and spend into run_state.json and raises `RunInterrupted`,
whose exit code is the shell's for the signal (130 for SIGINT, 143 for SIGTERM). A second signal,
or the grace period running out, abandons the item in flight at once.

`StopRequested` is a BaseException, as KeyboardInterrupt is: an optimizer's `except Exception`
(GEPA, SIMBA score a failing call as a failed rollout) must not swallow it.

Exit codes of the CLI (docs/failures.md): 0 done, 1 a run with no result to trust or stopped by
its budget, 2 bad input (nothing written), 74 storage failed (full disk, deleted or unreadable
run directory, corrupt store), 130 SIGINT, 143 SIGTERM.
"""
from __future__ import annotations

import signal
import threading

from verifirst.core.errors import VerifirstError

EXIT_STORAGE = 74  # EX_IOERR of sysexits.h
_lock = threading.Lock()
_stop: list[int | None] = [None]  # the signal number of the stop request, if one came


def signal_name(signum: int) -> str:
    """SIGINT, SIGTERM, ... for a signal number.

    Args:
        signum: the signal number.
    """
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_code_for(signum: int) -> int:
    """The shell's exit code for a process ended by `signum` (128 + the number).

    Args:
        signum: the signal number.
    """
    return 128 + int(signum)


class StopRequested(BaseException):
    """A stop was requested (a signal): raised where the run would start new work.

    Args:
        signum: the signal that asked for it.
    """

    def __init__(self, signum: int):
        self.signum = int(signum)
        super().__init__(f"stop requested by {signal_name(signum)}")


class RunInterrupted(VerifirstError):
    """The run was stopped by a signal after accounting its calls; the run directory resumes.

    Attributes:
        signum: the signal; exit_code is 128 + signum (130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, signum: int, message: str):
        self.signum = int(signum)
        self.exit_code = exit_code_for(signum)
        super().__init__(message)


class StorageError(VerifirstError):
    """The disk or a store failed under the run (full, deleted, unreadable); exit code 74."""

    exit_code = EXIT_STORAGE


def request_stop(signum: int) -> None:
    """Ask the running loop to stop: no new LM request or item is started from now on.

    Args:
        signum: the signal that asked.
    """
    with _lock:
        if _stop[0] is None:
            _stop[0] = int(signum)


def stop_requested() -> int | None:
    """The signal of the pending stop request, or None."""
    return _stop[0]


def check_stop() -> None:
    """Raise StopRequested when a stop was requested (call where new work would start)."""
    signum = _stop[0]
    if signum is not None:
        raise StopRequested(signum)


def clear_stop() -> None:
    """Forget the stop request (the loop that handled it has ended)."""
    with _lock:
        _stop[0] = None
