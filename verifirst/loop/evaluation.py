"""Run a program over items, verify each output, keep per-item rows.

LM failures (after bounded retries), verifier crashes and the program's own exceptions are ERROR
rows (error_kind "lm", "verifier" or "program"), counted apart from FAIL and never scored. Only an
exception that came from an LM call (marked by AccountedLM, or one of DSPy's LM and parse error
types) is an LM error and retried; anything else the program raised is a bug of the program,
which asking the model again would not fix: it is not retried. A verdict that nothing observable could
decide is an INCONCLUSIVE row: kept (a checkpoint does not retry it), left out of pass rates.
A retry asks the LM afresh (another cache entry): a malformed answer in the disk cache would
otherwise come back on every retry and every rerun.

Two rules stop an evaluation whose model fails (ErrorRateExceeded, exit 1 from the CLI), both on
when `max_error_rate` is set: from the first items, when the first FIRST_CALLS_ALL_FAILED (5)
requests to the model all failed or came back unusable and no item got an output (checked after
every failed attempt, so an item's own retries stop there too); and, once
`min_items_for_rate` items are done, when the share of LM-error items exceeds `max_error_rate`.

Rows are appended to an optional JSONL checkpoint, by this process as results arrive (whatever
the executor), so a killed evaluation resumes where it was and loses at most the items in flight.
"""
from __future__ import annotations

import contextvars
import json
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from verifirst.core.errors import ErrorRateExceeded
from verifirst.core.interrupts import check_stop
from verifirst.lm.spend import BudgetExceeded
from verifirst.lm import USAGE, is_lm_error, usage_split
from verifirst.core.metric import Metric
from verifirst.core.redaction import redact_text
from verifirst.loop.splits import SplitManifest
from verifirst.core.task import ERROR, FAIL, INCONCLUSIVE, PASS, Item

UNSCORED = (ERROR, INCONCLUSIVE)  # rows that are no verdict: out of pass rates and means
DONE = (PASS, FAIL, INCONCLUSIVE)  # rows a checkpoint keeps; ERROR rows are retried on resume
_sleep = time.sleep  # tests replace it to see the backoff
RETRY_ROLLOUT_BASE = 7_000_000  # rollout ids of retries, far from those optimizers use
FIRST_CALLS_ALL_FAILED = 5  # requests that all failed, with no item answered, stop an evaluation early
NO_OUTPUT_KINDS = ("lm", "program")  # ERROR rows whose program gave no output


def error_line(exc: BaseException) -> str:
    """`Type: message` on one line (it ends up in messages), at most 300 characters."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _library_dirs() -> tuple[str, ...]:
    """Where verifirst and DSPy live: their frames are not where a program's bug is."""
    import os

    import dspy
    import verifirst

    return tuple(os.path.dirname(m.__file__) + os.sep for m in (verifirst, dspy))


def _raised_at(exc: BaseException) -> str | None:
    """`file:line in function` of the innermost frame of `exc` outside verifirst and DSPy."""
    import os
    import traceback

    libraries = _library_dirs()
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not os.path.abspath(frame.filename).startswith(libraries):
            return f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"
    return None


def program_error_line(exc: BaseException) -> str:
    """`Type: message (at file:line in function)`: a program's own exception and where it was raised."""
    where = _raised_at(exc)
    return error_line(exc) + (f" (at {where})" if where else "")


def backoff_delays(retries: int, backoff_s: float, max_backoff_s: float) -> list[float]:
    """Exponential, capped: the waits before retry 1..retries."""
    return [min(max_backoff_s, backoff_s * (2 ** k)) for k in range(retries)]


def _fresh_answer(attempt: int):
    """A context in which the current LM answers anew instead of from its cache."""
    import contextlib

    import dspy

    lm = dspy.settings.lm
    if attempt == 0 or lm is None or not hasattr(lm, "copy"):
        return contextlib.nullcontext()
    base = (getattr(lm, "kwargs", None) or {}).get("rollout_id") or 0
    fresh = lm.copy(rollout_id=RETRY_ROLLOUT_BASE + int(base) * 100 + attempt)
    # DSPy warns that rollout_id does nothing at temperature 0; it still keys the cache, which is all we need
    fresh._warned_zero_temp_rollout = True
    return dspy.context(lm=fresh)


class Scorer(Metric):
    """Verifier + the program's output field: (item, prediction) -> Verdict (a `Metric`)."""

    def __init__(self, verifier: Any, output_field: str):
        super().__init__(verifier, output_field)


@dataclass
class Row:
    id: str
    split: str
    status: str  # PASS | FAIL | ERROR | INCONCLUSIVE
    score: float | None
    stage: str | None = None
    error_classes: list[str] = field(default_factory=list)
    feedback: str = ""
    output: Any = None
    error: str | None = None
    error_kind: str | None = None  # "lm" | "verifier" | "program"
    wall_s: float = 0.0
    attempts: int = 1

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> "Row":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__ if k in d})


@dataclass
class EvalResult:
    """Rows of one split; `hook_failures` counts per-item hook (tracing) calls that raised."""

    split: str
    rows: list[Row]
    hook_failures: int = 0
    hook_error: str | None = None

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def scored(self) -> list[Row]:
        return [r for r in self.rows if r.status not in UNSCORED]

    @property
    def n_pass(self) -> int:
        return sum(r.passed for r in self.rows)

    @property
    def n_errors(self) -> int:
        return sum(r.status == ERROR for r in self.rows)

    def n_errors_of(self, kind: str) -> int:
        """ERROR rows whose error_kind is `kind` ("lm", "verifier" or "program")."""
        return sum(r.status == ERROR and (r.error_kind or "lm") == kind for r in self.rows)

    @property
    def n_inconclusive(self) -> int:
        return sum(r.status == INCONCLUSIVE for r in self.rows)

    def unscored_counts(self) -> dict[str, int]:
        """Items without a verdict by cause: "lm", "program", "verifier", "inconclusive"."""
        counts = {kind: self.n_errors_of(kind) for kind in ("lm", "program", "verifier")}
        return {**counts, "inconclusive": self.n_inconclusive}

    def dominant_unscored(self) -> str | None:
        """The most frequent cause of no verdict (ties: in unscored_counts' order), or None."""
        counts = self.unscored_counts()
        kind = max(counts, key=counts.get)
        return kind if counts[kind] else None

    def first_unscored(self, kind: str) -> Row | None:
        """The first row without a verdict for `kind` (an error_kind, or "inconclusive").

        Args:
            kind: "lm", "program", "verifier" or "inconclusive".
        """
        for r in self.rows:
            if (kind == "inconclusive" and r.status == INCONCLUSIVE) or \
                    (r.status == ERROR and (r.error_kind or "lm") == kind):
                return r
        return None

    @property
    def pass_rate(self) -> float:
        """PASS over scored items (errors and inconclusive items excluded, reported apart)."""
        s = self.scored
        return sum(r.passed for r in s) / len(s) if s else 0.0

    @property
    def mean_score(self) -> float:
        s = self.scored
        return sum(float(r.score or 0.0) for r in s) / len(s) if s else 0.0

    def by_id(self) -> dict[str, Row]:
        return {r.id: r for r in self.rows}

    def summary(self) -> dict:
        from verifirst.core.stats import wilson

        k, n = self.n_pass, len(self.scored)
        lo, hi = wilson(k, n)
        stages: dict[str, int] = {}
        for r in self.rows:
            key = r.status if r.status in UNSCORED else r.stage
            stages[key or "-"] = stages.get(key or "-", 0) + 1
        return {"split": self.split, "n": self.n, "scored": n, "pass": k, "errors": self.n_errors,
                "lm_errors": self.n_errors_of("lm"), "verifier_errors": self.n_errors_of("verifier"),
                "program_errors": self.n_errors_of("program"),
                "inconclusive": self.n_inconclusive, "hook_failures": self.hook_failures,
                "pass_rate": self.pass_rate, "ci_lo": lo, "ci_hi": hi,
                "mean_score": self.mean_score, "stages": stages}


def _with_reason(feedback: str, reason: str) -> str:
    """The verifier's feedback, leading with the inconclusive reason when it does not say it."""
    return feedback if reason in feedback else f"inconclusive: {reason}" + (f"\n{feedback}" if feedback else "")


def _load_checkpoint(path: Path) -> dict[str, Row]:
    done: dict[str, Row] = {}
    if not path.exists():
        return done
    for line in path.read_text().splitlines():
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill: redo that item
        if d.get("status") in DONE:  # errors are retried on resume
            done[d["id"]] = Row.from_dict(d)
    return done


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(-1, 2)
        return fh.read(1)


def _progress(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    prog = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("pass {task.fields[passed]} err {task.fields[errors]}"),
                    TimeRemainingColumn(), transient=True)
    prog.start()
    prog.add_task(desc, total=total, passed=0, errors=0)
    return prog


def evaluate(program: Any, items: Sequence[Item], scorer: Callable[[Item, Any], Any], *,
             split: str, threads: int = 1, manifest: SplitManifest | None = None,
             retries: int = 2, backoff_s: float = 0.5, max_backoff_s: float = 8.0,
             max_error_rate: float | None = None,
             min_items_for_rate: int = 10, checkpoint: str | Path | None = None,
             progress: bool | None = None, desc: str | None = None,
             on_row: Callable[[Item, Row], None] | None = None, executor: Any = None,
             first_calls_all_failed: int = FIRST_CALLS_ALL_FAILED,
             item_scope: Callable[[Item], Any] | None = None) -> EvalResult:
    """Evaluate `program` on `items`; test splits pass the held-out guard first.

    Args:
        on_row: called with each item and its row, in the thread that ran the item.
        item_scope: a context manager for each item, around its attempts, its scoring and on_row,
            in that thread (a tracker's per-item trace).
        max_error_rate: share of LM-error items that stops the evaluation once `min_items_for_rate`
            are done (None: never stop); also turns on the early stop below.
        first_calls_all_failed: stop as soon as this many requests to the model were made in this
            evaluation and every one failed or came back unusable, before any item got an output.
        executor: where verifier calls run (vf.Threads, the default, or vf.Ray); the program runs
            in this process's threads either way, `threads` of them, or as many as the Ray workers.
            The caller closes it.
    """
    if executor is not None:
        scorer = executor.metric(scorer)
        threads = executor.concurrency(threads)
    if split == "test" and manifest is not None:
        manifest.check_test([it.id for it in items])
    ckpt = Path(checkpoint) if checkpoint else None
    done = _load_checkpoint(ckpt) if ckpt else {}
    todo = [it for it in items if it.id not in done]
    rows: dict[str, Row] = {i: r for i, r in done.items() if i in {it.id for it in items}}
    if progress is None:
        progress = sys.stderr.isatty()
    bar = _progress(len(items), desc or f"eval {split}", progress)
    if bar:
        bar.update(bar.task_ids[0], advance=len(rows))
    delays = backoff_delays(retries, backoff_s, max_backoff_s)
    lock = threading.Lock()
    ck_fh = open(ckpt, "a") if ckpt else None
    if ck_fh and ckpt.stat().st_size and _last_byte(ckpt) != b"\n":
        ck_fh.write("\n")  # a line cut by a kill: end it, or the next row would be glued to it
    stop = threading.Event()
    hook_failures: list[str] = []
    usage0 = USAGE.total()
    early: list[str] = []  # why the early stop fired

    def first_calls_failed() -> int:
        """Requests made in this evaluation if there are enough and all failed, else 0."""
        u = USAGE.total()
        made = u.attempts - usage0.attempts
        bad = (u.failed_attempts - usage0.failed_attempts) + (u.unusable - usage0.unusable)
        return made if made >= first_calls_all_failed and bad >= made else 0

    def early_stop_due() -> int:
        """first_calls_failed() while no item got an output and the rule is on and unfired (lock held)."""
        if max_error_rate is None or not first_calls_all_failed or early:
            return 0
        if not all(r.status == ERROR and r.error_kind in NO_OUTPUT_KINDS for r in rows.values()):
            return 0
        return first_calls_failed()

    def one(item: Item) -> Row:
        check_stop()  # a signal asked the run to stop: no new item
        with item_scope(item) if item_scope is not None else nullcontext():
            row = _one(item)
            if on_row is not None:
                try:
                    on_row(item, row)  # same thread as the program call, inside the item's scope
                except Exception as e:  # the row stands; the report counts what the hook lost
                    with lock:
                        hook_failures.append(f"{item.id}: {type(e).__name__}: {str(e)[:200]}")
        return row

    def _one(item: Item) -> Row:
        t0 = time.perf_counter()
        pred, err, attempts, kind = None, None, 0, "lm"
        for attempt in range(retries + 1):
            attempts = attempt + 1
            if stop.is_set():
                break
            try:
                with usage_split(split), _fresh_answer(attempt):
                    pred = program(**item.inputs)
                err = None
                break
            except BudgetExceeded:  # the budget refused the call: the run stops, no item is blamed
                raise
            except Exception as e:
                if not is_lm_error(e):  # the program's own bug: asking the model again would not fix it
                    err, kind = program_error_line(e), "program"
                    break
                err = error_line(e)
                if attempt < retries:
                    with lock:
                        if early_stop_due():  # no retry: this item's error is the early stop's
                            break
                    _sleep(delays[attempt])
        if err is not None or pred is None:
            return Row(item.id, split, ERROR, None, error=err or "stopped", error_kind=kind,
                       wall_s=time.perf_counter() - t0, attempts=attempts)
        cand = scorer.candidate(pred) if hasattr(scorer, "candidate") else pred
        try:
            v = scorer(item, pred)
        except BudgetExceeded:  # a judge LM inside the verifier was refused: the run stops
            raise
        except Exception as e:
            return Row(item.id, split, ERROR, None, output=cand, error=f"{type(e).__name__}: {e}"[:300],
                       error_kind="verifier", wall_s=time.perf_counter() - t0, attempts=attempts)
        if getattr(v, "inconclusive", None):
            return Row(item.id, split, INCONCLUSIVE, None, stage=v.stage or INCONCLUSIVE,
                       error_classes=list(getattr(v, "error_classes", [])),
                       feedback=_with_reason(v.feedback or "", v.inconclusive)[:2000],
                       output=cand, wall_s=time.perf_counter() - t0, attempts=attempts)
        if getattr(v, "passed", False) is None:  # a verdict that is no verdict (stage ERROR): never a FAIL
            return Row(item.id, split, ERROR, None, stage=v.stage, output=cand, error=(v.feedback or v.stage)[:300],
                       error_kind="verifier", wall_s=time.perf_counter() - t0, attempts=attempts)
        return Row(item.id, split, PASS if v.passed else FAIL, float(v.score), stage=v.stage,
                   error_classes=list(getattr(v, "error_classes", [])), feedback=(v.feedback or "")[:2000],
                   output=cand, wall_s=time.perf_counter() - t0, attempts=attempts)

    def record(row: Row) -> None:
        with lock:
            rows[row.id] = row
            if ck_fh:
                # an error message may quote a key the provider echoed
                ck_fh.write(redact_text(json.dumps(row.as_dict(), default=str)) + "\n")
                ck_fh.flush()
            if bar:
                n_err = sum(r.status == ERROR for r in rows.values())
                bar.update(bar.task_ids[0], advance=1, passed=sum(r.passed for r in rows.values()),
                           errors=n_err)
            if max_error_rate is not None and len(rows) >= min_items_for_rate:
                n_err = sum(r.status == ERROR and r.error_kind == "lm" for r in rows.values())
                if n_err / len(rows) > max_error_rate:
                    stop.set()
            made = early_stop_due()
            if made:
                early.append(f"the first {made} requests to the model all failed or came back unusable "
                             f"(first error: {row.error})")
                stop.set()

    try:
        if threads <= 1:
            for it in todo:
                if stop.is_set():
                    break
                record(one(it))
        else:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                pending = set()
                queue = list(todo)
                while queue or pending:
                    while queue and len(pending) < threads * 2 and not stop.is_set():
                        ctx = contextvars.copy_context()
                        pending.add(pool.submit(ctx.run, one, queue.pop(0)))
                    if not pending:
                        break
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in finished:
                        record(f.result())
                    if stop.is_set():
                        queue.clear()
    finally:
        if bar:
            bar.stop()
        if ck_fh:
            ck_fh.close()
    ordered = [rows[it.id] for it in items if it.id in rows]
    result = EvalResult(split, ordered, hook_failures=len(hook_failures),
                        hook_error=hook_failures[0] if hook_failures else None)
    if stop.is_set() and early:
        raise ErrorRateExceeded(
            f"{split}: {early[0]}; stopped with {len(ordered)} of {len(items)} items kept"
            + (f" in {ckpt}" if ckpt else "") + ". Check the model endpoint (api_base, key, the role's timeout_s), "
            "then rerun to resume.")
    if stop.is_set():
        n_err = sum(r.status == ERROR and r.error_kind == "lm" for r in ordered)
        raise ErrorRateExceeded(
            f"{split}: {n_err} of {len(ordered)} items failed with LM errors, above the allowed rate "
            f"{max_error_rate:.0%}; stopped with {len(ordered)} of {len(items)} items kept"
            + (f" in {ckpt}" if ckpt else "") + ". Check the model endpoint, then rerun to resume.")
    return result


def optimizer_saw_only_errors(metric_counts: dict, usage_before: Any) -> str | None:
    """Why an optimizer's result cannot be trusted, or None: it sent requests to the model and every
    one failed or came back unusable, and its metric judged no output.

    Args:
        metric_counts: the optimizer metric's counts (calls, verifier_errors, inconclusive).
        usage_before: USAGE.total() taken before the optimizer started.
    """
    u = USAGE.total()
    made = u.attempts - usage_before.attempts
    bad = (u.failed_attempts - usage_before.failed_attempts) + (u.unusable - usage_before.unusable)
    judged = (metric_counts.get("calls", 0) - metric_counts.get("verifier_errors", 0)
              - metric_counts.get("inconclusive", 0))
    if made and bad >= made and judged <= 0:
        return (f"the optimizer saw only errors: all {made} of its requests to the model failed or came back "
                f"unusable, and its metric judged no output")
    return None


def has_no_verdict(res: "EvalResult") -> bool:
    """Whether an evaluation had items and none of them got a verdict (its rates mean nothing).

    Args:
        res: one split's evaluation.
    """
    return bool(res.n) and not res.scored


def unscored_split(evaluations: dict[str, dict[str, "EvalResult"]]) -> tuple[str, str, "EvalResult"] | None:
    """The first evaluated split in which no item got a verdict, as (phase, split, result), or None.

    Args:
        evaluations: {phase: {split: EvalResult}}, e.g. {"before": ..., "after": ...}.
    """
    for phase, by_split in evaluations.items():
        for split, res in by_split.items():
            if has_no_verdict(res):
                return phase, split, res
    return None


def unscored_splits(evaluations: dict[str, dict[str, "EvalResult"]]) -> str | None:
    """Why a run has no result, or None: an evaluated split in which no item got a verdict.

    Args:
        evaluations: {phase: {split: EvalResult}}, e.g. {"before": ..., "after": ...}.
    """
    found = unscored_split(evaluations)
    return None if found is None else no_verdict_reason(*found)


def no_verdict_reason(phase: str, split: str, res: "EvalResult") -> str:
    """Why an evaluation in which no item got a verdict has no result: its counts by cause.

    Args:
        phase: "before" or "after".
        split: the split.
        res: the evaluation (has_no_verdict).
    """
    c = res.unscored_counts()
    program = f"{c['program']} program errors, " if c["program"] else ""  # named only when there are some
    return (f"{phase} {split}: none of its {res.n} items got a verdict ({c['lm']} LM errors, "
            f"{c['verifier']} verifier errors, {program}{c['inconclusive']} inconclusive)")
