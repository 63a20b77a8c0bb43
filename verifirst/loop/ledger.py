"""The test-reuse ledger: every evaluation of a test split, appended to one JSONL file in the workdir.

A held-out split stays honest only while it decides nothing. Scoring many programs on the same
test split and keeping the best is adaptive reuse: the split turns into a validation split. The
ledger makes that visible: each report says how many other programs were scored on its test split.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

LEDGER_FILE = "test_ledger.jsonl"


def program_hash(program: Any) -> str:
    """sha256 of what an optimizer can change in a program: instructions and demos per predictor.

    Args:
        program: a DSPy module (anything with `named_predictors()`), or a prompt text.
    """
    if isinstance(program, str):
        body = program
    elif hasattr(program, "named_predictors"):
        state = {name: {"instructions": getattr(p.signature, "instructions", ""),
                        "demos": [dict(d) if hasattr(d, "keys") else str(d) for d in getattr(p, "demos", [])]}
                 for name, p in program.named_predictors()}
        body = json.dumps(state, sort_keys=True, default=str)
    else:
        body = repr(program)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


class TestLedger:
    """Append-only JSONL of test-split evaluations: split digest, program hash, time, run dir."""

    __test__ = False  # not a pytest class

    def __init__(self, path: str | os.PathLike):
        """Args:
            path: the ledger file (usually WORKDIR/test_ledger.jsonl); created on first record.
        """
        self.path = Path(path)

    def entries(self) -> list[dict]:
        """Every recorded evaluation; a line cut by a kill is skipped."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "digest" in rec and "program" in rec:
                out.append(rec)
        return out

    def record(self, digest: str, program: str, run_dir: str | os.PathLike, what: str = "") -> bool:
        """Append one evaluation (once per digest, program, run dir and label: a resumed run
        scoring the same program again is not a new use of the split, whether the run dir is
        spelled relative or absolute).

        Args:
            digest: the split manifest digest.
            program: program_hash() of the program or prompt scored on the test split.
            run_dir: the run that scored it.
            what: a short label (e.g. "before", "after", "calibrated").

        Returns:
            True when a line was appended.
        """
        rec = {"digest": digest, "program": program, "run_dir": os.path.abspath(run_dir), "what": what,
               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        line = (json.dumps(rec, sort_keys=True) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # two runs in one workdir: whole lines, no duplicates
            if any(self._same(e, rec) for e in self.entries()):
                return False
            if os.fstat(fd).st_size and not self._ends_with_newline():
                os.write(fd, b"\n")  # a line cut by a kill: end it so ours stays whole
            os.write(fd, line)  # one write of one line under O_APPEND
            os.fsync(fd)
            return True
        finally:
            os.close(fd)  # releases the lock

    def programs_of(self, run_dir: str | os.PathLike) -> set[str]:
        """The programs a run directory scored on a test split.

        Args:
            run_dir: the run directory (relative or absolute).
        """
        mine = os.path.abspath(run_dir)
        return {e["program"] for e in self.entries() if os.path.abspath(str(e.get("run_dir", ""))) == mine}

    @staticmethod
    def _same(a: dict, b: dict) -> bool:
        return (all(a.get(k) == b.get(k) for k in ("digest", "program", "what"))
                and os.path.abspath(str(a.get("run_dir", ""))) == os.path.abspath(str(b.get("run_dir", ""))))

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"

    def reuse(self, digest: str, programs: list[str]) -> dict:
        """How often this test split was scored, and for how many programs other than `programs`.

        Args:
            digest: the split manifest digest.
            programs: hashes of the programs this run scored on it.

        Returns:
            {"digest", "other_programs": N, "evaluations": M, "message"}; message is empty when
            no other program was scored on the split.
        """
        mine = [e for e in self.entries() if e["digest"] == digest]
        others = {e["program"] for e in mine} - set(programs)
        msg = (f"test split {digest} was already scored for {len(others)} other program(s): adaptive reuse "
               f"({len(mine)} evaluations in {self.path}); its numbers are no longer an unbiased estimate"
               if others else "")
        return {"digest": digest, "other_programs": len(others), "evaluations": len(mine), "message": msg}


def ledger_for_run_dir(run_dir: str | os.PathLike) -> TestLedger:
    """The ledger of the workdir a run directory lives in: WORKDIR/runs/NAME -> WORKDIR, else
    the run directory's parent.

    Args:
        run_dir: a run directory.
    """
    run_dir = Path(run_dir)
    workdir = run_dir.parent.parent if run_dir.parent.name == "runs" else run_dir.parent
    return TestLedger(workdir / LEDGER_FILE)
