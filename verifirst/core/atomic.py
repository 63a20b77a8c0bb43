"""Atomic artifact writes: a reader sees the old file or the new one, never half of one.

A written file gets the mode a plain open() would give it (0666 less the umask), not the 0600 of
the temporary file it starts as; text and JSON lose every registered credential on the way out
(verifirst.core.redaction).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterable


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where Linux shows it (/proc), else set and reset."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` atomically, with the mode the umask gives a new file.

    Args:
        path: the destination (its parent directories are created).
        data: the whole content.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes 0600 whatever the umask says
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write text (UTF-8) atomically, every registered credential masked.

    Args:
        path: the destination.
        text: the content.
    """
    from verifirst.core.redaction import redact_text

    return write_bytes(path, redact_text(text).encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2, strict: bool = False) -> Path:
    """Write one JSON document atomically.

    Args:
        path: the destination.
        obj: the document (values JSON cannot hold are written as their str()).
        indent: as json.dumps.
        strict: refuse NaN and infinities (ValueError) instead of writing them: reports are read
            by browsers and jq, which reject them; checkpoints keep Python's reading of them.
    """
    return write_text(path, json.dumps(obj, indent=indent, sort_keys=False, default=str,
                                       allow_nan=not strict) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> Path:
    return write_text(path, "".join(json.dumps(r, default=str) + "\n" for r in rows))


def publish_dir(dest: str | os.PathLike, build: Callable[[Path], None], prefix: str = ".tmp.") -> Path:
    """A directory built once, beside `dest`, and renamed into place (mode 0755); returns `dest`.

    Args:
        dest: the directory to publish; when it exists already it is returned as it is.
        build: fills the temporary directory it is given.
        prefix: the temporary directory's name prefix.

    A writer that loses the race to another (the rename fails, `dest` now exists) keeps the winner's.
    """
    dest = Path(dest)
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=dest.parent))
    try:
        build(tmp)
        os.chmod(tmp, 0o755)
        os.rename(tmp, dest)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not dest.is_dir():
            raise
    return dest
