"""Default run directories: one per run started without --run-dir, never an existing one
(an existing directory means resume, which only an explicit --run-dir asks for)."""
from __future__ import annotations

import time
from pathlib import Path


def new_run_dir(workdir: str | Path, stem: str) -> Path:
    """workdir/runs/STEM-YYYYmmdd-HHMMSS, with -2, -3, ... when runs start within one second.
    Nothing is created here: bad input found later must leave nothing behind."""
    base = Path(workdir) / "runs" / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path
