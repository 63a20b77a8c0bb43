"""Progress lines for the judge's passes outside the run loop (`verifirst monitor`'s judge and teacher).

`verifirst run` and `calibrate` print a line per phase and per tenth of a split when stdout is not a
terminal (verifirst.report.progress.PhaseLines, on the run loop's events). Monitoring runs the judge
and the informed teacher over the records itself, not through the loop; here each pass is told to
PhaseLines as the loop would tell an evaluation (start, one row per record, end), so cron logs read
the same and `-q` silences them the same way:

    [    0s] judge records: 0/40 items
    [    1s] judge records: 4/40 items (3 pass)
    [    9s] judge records: done, 40 items, 25 pass, 1 no verdict (9 s)
    [    9s] teacher records: 0/40 items

For the judge a row is its verdict (pass: the judge said PASS); for the teacher, one it could not
give (an abstention or an LM error) is "no verdict".
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

from verifirst.core.callbacks import EvaluationEnd, EvaluationStart, RowScored, RunStart

SPLIT = "records"


def _judge_status(row: dict) -> str | None:
    return "ERROR" if row.get("error") is not None or row.get("verdict") is None else str(row["verdict"])


def _teacher_status(decision: Any) -> str | None:
    return {"error": "ERROR", "skip": "INCONCLUSIVE"}.get(str(getattr(decision, "decision", "")).lower())


class Passes:
    """PhaseLines for a monitor's passes over `n` records, or nothing when lines are not wanted
    (stdout a terminal, `-q`, or no echo).

    Args:
        echo: where lines go (None: nowhere).
        n: the records each pass goes over.
    """

    def __init__(self, echo: Callable[[str], None] | None, n: int):
        from verifirst.report.progress import PhaseLines, wanted

        self.n = n
        self.lines = PhaseLines(echo, announce=False, iterations=False) if echo is not None and wanted() else None
        if self.lines is not None:
            self.lines.on_run_start(RunStart(name="monitor", run_dir=Path("."), suite="", n_items=n,
                                             sizes={SPLIT: n}, split_digest="", optimizer="none", resumed=False,
                                             params={}, tags={}))

    @contextlib.contextmanager
    def judge(self) -> Iterator[Callable[[Any, dict], None] | None]:
        """The judge's pass: yields run_judge's on_item (None when no lines are wanted)."""
        with self._pass("judge", _judge_status) as on_item:
            yield on_item

    @contextlib.contextmanager
    def teacher(self) -> Iterator[Callable[[Any, Any], None] | None]:
        """The informed teacher's pass: yields review_items' on_item (None when no lines are wanted)."""
        with self._pass("teacher", _teacher_status) as on_item:
            yield on_item

    @contextlib.contextmanager
    def _pass(self, phase: str, status: Callable[[Any], str | None]) -> Iterator[Callable | None]:
        lines = self.lines
        if lines is None:
            yield None
            return
        rows: list = []

        def on_item(item: Any, result: Any) -> None:
            row = SimpleNamespace(status=status(result))
            rows.append(row)
            lines.on_row(RowScored(phase, SPLIT, item, row))

        lines.on_evaluation_start(EvaluationStart(phase, SPLIT))
        try:
            yield on_item
        except BaseException:
            lines.on_evaluation_end(EvaluationEnd(phase, SPLIT, None, Path(".")))
            raise
        # records a fail-fast pass did not send (a dead endpoint) got no verdict either
        rows += [SimpleNamespace(status="ERROR")] * max(0, self.n - len(rows))
        lines.on_evaluation_end(EvaluationEnd(phase, SPLIT, SimpleNamespace(rows=rows), Path(".")))
