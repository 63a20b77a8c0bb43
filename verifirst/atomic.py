"""Atomic artifact writes: a reader sees the old file or the new one, never half of one."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
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
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2) -> Path:
    return write_text(path, json.dumps(obj, indent=indent, sort_keys=False, default=str) + "\n")


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
