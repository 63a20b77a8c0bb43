"""Run directories: the default name of a new one, and the lock a run holds on its directory.

A default run directory is new for every run (an existing directory means resume, which only an
explicit --run-dir asks for). While a run uses a directory it holds an exclusive OS lock on
RUN_DIR/run.lock (fcntl.flock): a second process wanting the same directory is refused at once,
naming the holder's pid. The lock dies with its process, so a `kill -9`ed run leaves no stale lock
and the next run resumes the directory.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Iterator

from verifirst.core.errors import VerifirstError
from verifirst.lm.call_journal import CALLS_FILE

LOCK_FILE = "run.lock"


def new_run_dir(workdir: str | Path, stem: str) -> Path:
    """workdir/runs/STEM-YYYYmmdd-HHMMSS, with -2, -3, ... when runs start within one second.
    Nothing is created here: bad input found later must leave nothing behind.

    Args:
        workdir: the experiment's workdir.
        stem: the run's name, used as the directory's prefix.
    """
    base = Path(workdir) / "runs" / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


class RunDirBusy(VerifirstError):
    """Another process holds the run directory; the run is refused and writes nothing."""


class RunDirLock:
    """A run's exclusive hold on its directory, from lock_run_dir() until release()."""

    def __init__(self, path: Path, fd: int, created: bool):
        self.path, self._fd, self.created = path, fd, created

    @property
    def fd(self) -> int | None:
        """The lock file's descriptor while held (its link count drops to 0 if the directory is deleted)."""
        return self._fd

    def release(self) -> None:
        """Give the directory up (idempotent). A directory this run created and left with nothing
        but its lock file (and an empty call journal) in it (a run refused after taking it) is
        removed, not left empty."""
        if self._fd is None:
            return
        try:
            found = {p.name: p for p in self.path.iterdir()}
            journal = found.pop(CALLS_FILE, None)  # opened at the start: empty if no call was made
            if self.created and list(found) == [LOCK_FILE] and (journal is None or journal.stat().st_size == 0):
                if journal is not None:
                    journal.unlink()
                (self.path / LOCK_FILE).unlink()
                self.path.rmdir()  # while still locked: no other run can be inside
        except OSError:
            pass  # something appeared in it meanwhile: it stays
        finally:
            os.close(self._fd)  # releases the flock
            self._fd = None

    def __enter__(self) -> "RunDirLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lock_run_dir(run_dir: str | Path, *, fresh: bool = False) -> RunDirLock:
    """Create (if needed) and lock a run directory for this process.

    Args:
        run_dir: the run directory.
        fresh: the directory was picked by new_run_dir(): if another run created it meanwhile,
            take the next free name (NAME-2, NAME-3, ...) instead of sharing it.

    Returns:
        The held lock; its `path` is the directory actually locked.

    Raises:
        RunDirBusy: another process (named by pid) holds the directory.
        VerifirstError: the directory cannot be created or is not a directory.
    """
    base = Path(run_dir)
    path, n = base, 1
    while True:
        try:
            path.mkdir(parents=True)
            created = True
            break
        except FileExistsError:
            if fresh:
                n += 1
                path = base.with_name(f"{base.name}-{n}")
                continue
            if not path.is_dir():
                raise VerifirstError(f"run directory {path} exists and is not a directory") from None
            created = False
            break
        except OSError as e:
            raise VerifirstError(f"cannot create run directory {path}: {e.strerror or e}") from None
    try:
        fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise VerifirstError(f"cannot lock run directory {path}: {e.strerror or e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        pid = holder.get("pid", "unknown")
        since = f" since {holder['since']}" if holder.get("since") else ""
        host = f" on {holder['host']}" if holder.get("host") else ""
        raise RunDirBusy(f"run directory {path} is in use by process {pid}{host}{since}; this run was refused "
                         "before writing to it or to MLflow. Wait for that run to end (or stop it), or use "
                         "another run directory") from None
    me = {"pid": os.getpid(), "host": socket.gethostname(),
          "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
    return RunDirLock(path, fd, created)


def _holder(fd: int, wait_s: float = 0.5) -> dict:
    """What the holder wrote into the lock file; it writes right after locking, so an empty
    file is read again for a moment."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            rec = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            if isinstance(rec, dict):
                return rec
        except ValueError:
            pass
        if time.monotonic() > deadline:
            return {}
        time.sleep(0.02)


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if its folder exists) for the block, waiting
    for another holder; a folder that does not exist leaves the block unlocked, so the caller's
    own error about it comes through.

    Args:
        path: the lock file.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except FileNotFoundError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
