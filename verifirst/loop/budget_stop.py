"""What a run stopped by its budget leaves: the optimizer's best so far, and the test split scored
with what was held back for it.

Before the optimizer starts, the loop holds back from the run's limits what scoring the test split
costs (measured on the start program's own test evaluation, with a margin for longer prompts), so
a refused call stops the optimizer while the test split can still be scored once. An engine that
stops at its last completed iteration returns the best of those on validation
(`EngineResult.stopped == "budget"`); any other engine's result is not kept, and the start program
stands. The train and validation splits are not scored again ("not scored: budget"); if the test
evaluation itself is refused, the report says "test not scored: budget" and nothing is claimed.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from verifirst.core import atomic

TEST_COST_FILE = "test_cost.json"  # what scoring the test split cost the start program (kept for resumes)
MARGIN = 1.5  # an optimized prompt may be longer than the start program's (instructions, demos)
NOT_SCORED = "budget"


class TestCost:
    """Measures what one evaluation of the test split spends, and holds that much back.

    Args:
        meter: the run's SpendMeter (None: no budget, nothing to hold).
        run_dir: the run directory, where the measured cost is kept for a resumed run.
    """

    def __init__(self, meter: Any, run_dir: Path):
        self.meter = meter
        self.path = Path(run_dir) / TEST_COST_FILE
        self._t0 = 0.0
        self._run0: dict | None = None

    def start(self) -> None:
        """Call before the start program's test evaluation."""
        if self.meter is not None:
            self._t0, self._run0 = time.monotonic(), self.meter.spent()["run"]

    def stop(self) -> None:
        """Call after it: keeps the cost (a resumed evaluation that sent fewer calls keeps the old one)."""
        if self.meter is None or self._run0 is None:
            return
        run = self.meter.spent()["run"]
        cost = {"usd": run["usd"] - self._run0["usd"], "tokens": run["tokens"] - self._run0["tokens"],
                "lm_calls": run["lm_calls"] - self._run0["lm_calls"], "wall_s": time.monotonic() - self._t0}
        old = self.load()
        if old is None or cost["lm_calls"] >= old.get("lm_calls", 0):
            atomic.write_json(self.path, cost)

    def load(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None

    def hold_back(self) -> dict | None:
        """Hold back the measured cost (with MARGIN) from the run's limits; returns what is held."""
        cost = self.load() if self.meter is not None else None
        if not cost:
            return None
        from verifirst.lm.spend import Limits

        held = Limits(max_usd=cost["usd"] * MARGIN, max_tokens=math.ceil(cost["tokens"] * MARGIN),
                      max_lm_calls=math.ceil(cost["lm_calls"] * MARGIN), max_wall_s=cost["wall_s"] * MARGIN)
        self.meter.hold_back(held)
        return held.as_dict()

    def release(self) -> None:
        if self.meter is not None:
            self.meter.release()


def stopped_section(refusal: Any, kept: str, held: dict | None, not_scored: dict[str, str]) -> dict:
    """The report's `stopped` section.

    Args:
        refusal: the first refused call (BudgetExceeded).
        kept: what the run returns ("the best of N completed iterations" or "the start program").
        held: what was held back for the test split (None: nothing was measured).
        not_scored: {split: "budget"} for the splits not scored after the stop.
    """
    return {"by": refusal.message, "limit": refusal.limit, "role": refusal.role, "kept": kept,
            "held_for_test": held, "not_scored": dict(not_scored),
            "test": "not scored: budget" if "test" in not_scored else "scored"}


def test_claimed(report: dict) -> bool:
    """Whether the report may claim a result: not when a budget stop left its test split unscored
    (nothing is registered or promoted from it).

    Args:
        report: the run report.
    """
    return (report.get("stopped") or {}).get("test", "scored") == "scored"
