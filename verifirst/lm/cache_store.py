"""The LM response cache's files: a corrupt one is moved aside and the cache starts anew.

DSPy's disk cache is a diskcache FanoutCache: sqlite files (DIR/cache.db and DIR/NNN/cache.db).
A file that is not a database (a crash mid-write on a bad disk, a copy cut short, a stray file)
would stop every run at its first LM call with sqlite's `file is not a database`. A cache is
only a saving: `usable_cache_dir` checks each file's header before DSPy opens it and, when one is
unreadable, renames the whole directory to DIR.corrupt-TIMESTAMP (kept for a look, never read
again) with a one-line warning; the run then starts with an empty cache (its calls are paid again).
"""
from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

log = logging.getLogger("verifirst.lm.cache")


def _unreadable(db: Path) -> str | None:
    """sqlite's complaint about `db` when it is not a database (or a malformed one), else None.
    Opened as diskcache opens it (read-write: a journal a killed run left is rolled back, as it
    would be); a lock, a read-only file or an I/O error is no corruption and is left to the cache."""
    try:
        con = sqlite3.connect(str(db), timeout=10)
    except sqlite3.Error:
        return None
    try:
        con.execute("pragma schema_version").fetchone()
        con.execute("select count(*) from sqlite_master").fetchone()
        return None
    except sqlite3.OperationalError:
        return None
    except sqlite3.DatabaseError as e:  # "file is not a database", "database disk image is malformed"
        return str(e)
    finally:
        con.close()


def usable_cache_dir(directory: str | os.PathLike) -> Path:
    """`directory`, after moving it aside when one of its sqlite files is corrupt (a fresh empty
    directory takes its place).

    Args:
        directory: the LM cache directory (it exists).

    Returns:
        The directory to open the cache in (the same path).
    """
    directory = Path(directory)
    files = [directory / "cache.db", *sorted(directory.glob("*/cache.db"))]
    for db in files:
        if not db.is_file() or db.stat().st_size == 0:
            continue
        why = _unreadable(db)
        if why is None:
            continue
        name = db.relative_to(directory)
        aside = directory.with_name(f"{directory.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        n = 1
        while aside.exists():
            n += 1
            aside = aside.with_name(f"{aside.name.split('~')[0]}~{n}")
        os.replace(directory, aside)
        directory.mkdir(parents=True, exist_ok=True)
        log.warning("warning: the LM cache %s was corrupt (%s: %s); moved aside to %s, starting an empty cache "
                    "(calls it held are paid again)", directory, name, why, aside)
        break
    return directory
