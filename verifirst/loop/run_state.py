"""What a run is and what its directory says about it: the checked request (`RunRequest`), the
resume key (`run_digest`, `check_resume`), run_state.json's body, the parameters a tracker logs,
the spend meter of a budget, and the usage a report carries.

`verifirst.loop.driver` re-exports every name here (`driver.run_digest` keeps working).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from verifirst.core import atomic
from verifirst.core.engine import Budget, Engine, EngineContext
from verifirst.core.metric import Metric
from verifirst.core.task import Item
from verifirst.lm import USAGE
from verifirst.loop.ledger import TestLedger, program_hash
from verifirst.loop.splits import SPLITS, SplitManifest


USAGE_KEYS = ("calls", "lm_calls", "cache_hits", "errors", "prompt_tokens", "completion_tokens", "attempts",
              "failed_attempts", "unusable")


@dataclass
class RunRequest:
    """One run: the checked request it came from, handed whole, and what the caller built from it.

    request: the OptimizeRequest (verifirst.requests) `vf.optimize`, `vf.run` or `verifirst run`
        built: the program, threads, progress, max_error_rate and executor are read from it.
    scorer, items, manifest, engine, budget, ctx: built from it, as `optimize` takes them.
    name: the run's name (the request's, else the data's); suite: the data's name.
    digest: what a run directory may be resumed with (see `run_digest`).
    fresh: the run directory was made for this run (not given by the user).
    config: the experiment file's settings with credentials masked, kept in run_state.json.
    models: the model spec by role (for the report and the tracker's parameters).
    eval_splits: the request's eval_splits that have items.
    lm_scope: a context the program runs in (dspy.context with the task LM and adapter), or None.
    """

    request: Any
    scorer: Metric
    items: Sequence[Item]
    manifest: SplitManifest
    engine: Engine | None
    budget: Budget
    ctx: EngineContext
    name: str
    suite: str
    digest: str
    fresh: bool = False
    config: dict | None = None
    models: dict = field(default_factory=dict)
    eval_splits: Sequence[str] = SPLITS
    ledger: TestLedger | None = None
    lm_scope: Any = None


def _add_usage(report: dict, usage_before: Any, meter: Any) -> None:
    """The run's LM usage so far (and its spend, under a budget) into the report."""
    used = USAGE.total()
    report.update({"usage": USAGE.as_dict(), "usage_endpoints": USAGE.endpoints_as_dict(),
                   "usage_this_run": {k: getattr(used, k) - getattr(usage_before, k) for k in USAGE_KEYS}})
    if meter is not None and getattr(meter, "limited", True):
        report["spend"] = meter.spent()
    journal = getattr(meter, "journal", None)
    if journal is not None:  # every invocation of the run directory, killed ones included
        report["usage_run_dir"] = journal.totals()


def spend_meter(budget: Budget):
    """The meter that admits every LM call of a run against `budget`'s spend limits; None without any.

    Args:
        budget: the run's budget (max_usd, max_tokens, max_lm_calls, max_wall_s, per_role, prices).
    """
    if not getattr(budget, "spend_limited", False):
        return None
    from verifirst.lm.spend import Limits, Prices, SpendMeter

    total = Limits(budget.max_usd, budget.max_tokens, budget.max_lm_calls, budget.max_wall_s)
    return SpendMeter(total, {r: Limits(**lim) for r, lim in budget.per_role.items()}, Prices(budget.prices))


def run_digest(program: Any, manifest: SplitManifest, scorer: Metric, optimizer: str, splits: Sequence[str],
               config: dict | None = None) -> str:
    """What a run directory may be resumed with: the same program, splits, metric, optimizer and
    (for an experiment file) the same settings, credentials masked so a rotated key still resumes.

    Args:
        program: the program before optimization.
        manifest: the split manifest.
        scorer: the run's Metric.
        optimizer: the engine's name.
        splits: the splits evaluated.
        config: the experiment file's settings (masked), or None.
    """
    import hashlib

    body = {"program": program_hash(program), "split_digest": manifest.digest, "metric": scorer.name,
            "output_field": scorer.output_field, "threshold": scorer.threshold, "optimizer": optimizer,
            "splits": list(splits), "config": config}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:12]


def check_resume(run_dir: Path, digest: str) -> bool:
    """Whether run_dir holds this run to resume; another run's directory is refused.

    Args:
        run_dir: the run directory.
        digest: this run's `run_digest`.

    Raises:
        InputError: the directory's run_state.json names another run.
    """
    from verifirst.core.errors import InputError

    state = Path(run_dir) / "run_state.json"
    if not state.exists():
        return False
    try:
        old = json.loads(state.read_text()).get("digest")
    except (OSError, ValueError):
        old = None
    if old != digest:
        raise InputError("this run directory belongs to another run (program, data, metric, optimizer or "
                         "experiment settings differ)", path=str(state), field="digest",
                         expected="the same arguments or experiment file to resume, or a new run directory")
    return True


def _state(req: RunRequest, status: str, run_id: str | None = None) -> dict:
    body: dict[str, Any] = {"status": status, "digest": req.digest}
    if req.config is not None:
        body["config"] = req.config
    if run_id:
        body["run_id"] = run_id
    return body


def budget_params(budget: Budget) -> dict:
    """The budget's limits that are set (a limit left unset is no parameter to compare runs on).

    Args:
        budget: the run's budget.
    """
    return {k: v for k, v in budget.__dict__.items() if v is not None and v != {}}


def run_params(req: RunRequest, optimizer: str) -> dict:
    """The parameters a tracker logs for a run: what runs are compared on (budget, splits, seed)
    beside the split digest, models, suite size, optimizer, metric and the experiment file's settings.

    Args:
        req: the run.
        optimizer: the engine's name.
    """
    m = req.manifest
    splits = {**m.sizes(), "ratios": ", ".join(f"{r:g}" for r in m.ratios)}
    return {"split_digest": m.digest, "models": req.models, "suite_size": len(req.items), "optimizer": optimizer,
            "metric": req.scorer.name, "budget": budget_params(req.budget), "splits": splits, "seed": m.seed,
            **({"config": req.config} if req.config else {})}


def failure_message(exc: BaseException) -> str:
    """What ended a run, for run_state.json and the tracker: the exception's type and message,
    credentials masked.

    Args:
        exc: the exception the run raised to its caller.
    """
    from verifirst.core.redaction import redact_text

    text = str(exc).strip()
    return redact_text(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:4000]


def _record_failure(req: RunRequest, run_dir: Path, failure: str) -> None:
    """Mark a started run as failed in run_state.json; its digest stays, so a rerun still resumes it."""
    if (run_dir / "run_state.json").exists():  # a run refused before it started has no state to update
        atomic.write_json(run_dir / "run_state.json", {**_state(req, "failed"), "failure": failure})
