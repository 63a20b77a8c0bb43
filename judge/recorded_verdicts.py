"""Monitor a deployed judge from the verdicts it recorded on the traces: no model call for π.

In production the judge has already judged each trace and logged its verdict as an MLflow
assessment (`mlflow.log_feedback(trace_id=..., name="judge", value="PASS")`, or a judge scorer's
own feedback on the trace); only the outcome arrives later. `monitor_recorded` (`verifirst
monitor --from-mlflow EXPERIMENT --recorded judge`) reads those verdicts, joins the outcomes, and
computes the windows, Scott's π and the drift verdict with verifirst.judge.monitoring's functions
(one implementation of each statistic), making 0 judge calls. Outcomes join in one of two ways:

- **outcome assessments** logged later on the same traces (`label`, default "label": as
  `monitor --from-mlflow` reads it, a human's feedback or expectation first, then the latest);
- **an outcome file** (`outcomes`, JSONL or CSV): each record's `key` field names its trace. With
  the default key `trace_id` it holds the trace id; with another key KEY the trace's value is its
  tag KEY, else its request metadata KEY, else KEY of its root span's inputs. The record's
  `label` field holds the outcome (`pass_at` / `label_map` read it as for `monitor`).

Incremental: a state file (`state`, default WORKDIR/monitor-state/EXPERIMENT.JUDGE.json) keeps
the newest trace time read, the joined records (time, verdict, outcome, the teacher's decision)
and the traces still waiting for their outcome or verdict. A later run asks the store only for
traces from that time on (less `OVERLAP_MS`, so a trace that reached the store a little late is
not missed; ids already read are skipped), re-reads waiting traces by id only when it must (the
assessment join, or a trace whose verdict had not arrived), and computes the windows over
everything joined so far. The state is written after the report; a run refused as bad input
writes nothing. A trace's time is its request time, as `monitor --from-mlflow` reads it.

The informed teacher's abstention stays optional (`teacher=MODEL`): one teacher call for each
joined record without a kept decision (never twice: decisions stay in the state); `dry_run`
says how many before any is made. Without it the abstention part of the drift rule decides
nothing (the report's `teacher` is "off"). A trace without the judge's assessment is no record
(counted as `unjudged`, kept waiting); a verdict the judge logged as an error (an
AssessmentError) is counted apart like an LM error, never PASS or FAIL.
"""
from __future__ import annotations

import csv
import io
import json
import re
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from verifirst.api import DEFAULT_WORKDIR, MLflow
from verifirst.core import atomic
from verifirst.core.errors import InputError
from verifirst.core.stats import FAIL, PASS
from verifirst.core.task import Item
from verifirst.core.textfile import iter_jsonl, read_text
from verifirst.judge.labels import LabelRule
from verifirst.judge.monitoring import (DriftRule, MonitorResult, _baseline, _run_lm_failure, _time_outliers,
                                        _window_row, print_monitor, save, verdict_fields)
from verifirst.judge.traces import ITEM_ID_TAG, _client, _experiment_id, _root, default_view, trace_label, \
    trace_view

STATE_KIND = "verifirst.monitor-recorded"
STATE_VERSION = 1
TRACE_ID = "trace_id"
OVERLAP_MS = 10 * 60 * 1000  # re-ask for the last 10 minutes: a trace exported late is still read once
PAGE = 500
EXPECTED_STATE = "the state file a previous `verifirst monitor --recorded` run wrote (or a new path to start over)"


def _fail_state(path: Path, why: str, field: str | None = None) -> InputError:
    return InputError(f"state file {why}", path=str(path), field=field, expected=EXPECTED_STATE)


def _identity(exp_id: str, experiment: str, judge: str, join: dict) -> dict:
    return {"experiment": experiment, "experiment_id": exp_id, "judge": judge, "join": join}


def load_state(path: str | Path, identity: dict) -> dict:
    """The state a previous run left at `path` (a new one when there is none), checked.

    Args:
        path: the state file.
        identity: experiment, experiment_id, judge and join this run reads; a state written for
            other ones is refused (its windows would mix two sources).

    Raises:
        InputError: the file is not JSON, not a state, another version, or for another source.
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return {"kind": STATE_KIND, "version": STATE_VERSION, **identity, "watermark_ms": None,
                "records": {}, "pending": {}, "runs": 0}
    text = read_text(path, "state file")
    try:
        state = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"state file is not JSON: {e.msg} at column {e.colno}", path=str(path), line=e.lineno,
                         expected=EXPECTED_STATE) from None
    if not isinstance(state, dict) or state.get("kind") != STATE_KIND:
        raise _fail_state(path, "is not a recorded-verdicts monitor state", "kind")
    if state.get("version") != STATE_VERSION:
        raise _fail_state(path, f"has version {state.get('version')!r}, this verifirst reads {STATE_VERSION}",
                          "version")
    for key, want in identity.items():
        if state.get(key) != want:
            raise _fail_state(path, f"was written for {key} {state.get(key)!r}, this run reads {want!r}", key)
    wm = state.get("watermark_ms")
    if wm is not None and (isinstance(wm, bool) or not isinstance(wm, int)):
        raise _fail_state(path, f"has watermark_ms {wm!r}, not a time in ms", "watermark_ms")
    for part, need in (("records", ("t", "verdict", "label")), ("pending", ("t",))):
        rows = state.get(part)
        if not isinstance(rows, dict):
            raise _fail_state(path, f"has no {part} object", part)
        for tid, row in rows.items():
            if not isinstance(row, dict) or any(k not in row for k in need) \
                    or not isinstance(row["t"], (int, float)) or isinstance(row["t"], bool):
                raise _fail_state(path, f"{part} entry {tid!r} lacks {'/'.join(need)}", f"{part}.{tid}")
            if part == "records" and (row["label"] not in (PASS, FAIL) or row["verdict"] not in (PASS, FAIL, None)):
                raise _fail_state(path, f"record {tid!r} has verdict {row['verdict']!r}, outcome {row['label']!r}",
                                  f"records.{tid}")
    return state


def default_state_path(workdir: Path, experiment: str, judge: str) -> Path:
    """WORKDIR/monitor-state/EXPERIMENT.JUDGE.json (characters a file name cannot hold become _)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{experiment}.{judge}").strip(".") or "state"
    return workdir / "monitor-state" / f"{safe}.json"


def recorded_verdict(trace, name: str, rule: LabelRule) -> tuple[str, str | None, Any]:
    """("absent" | "error" | "PASS" | "FAIL", the error text, the raw value) of the judge's assessment
    `name` on the trace: its latest valid one not from a human (a human's is no judge verdict),
    else the latest.

    Args:
        trace: an mlflow Trace.
        name: the assessment the deployed judge logs.
        rule: how its value reads as PASS/FAIL (a rubric judge's score: pass_at).
    """
    found = [a for a in (getattr(trace.info, "assessments", None) or [])
             if a.name == name and getattr(a, "valid", True) is not False]
    if not found:
        return "absent", None, None

    def rank(a):
        human = str(getattr(getattr(a, "source", None), "source_type", "")).upper().endswith("HUMAN")
        return (not human, getattr(a, "last_update_time_ms", None) or getattr(a, "create_time_ms", 0) or 0)

    best = max(found, key=rank)
    fb = getattr(best, "feedback", None)
    err = getattr(fb, "error", None) if fb is not None else getattr(best, "error", None)
    if err is not None:
        text = getattr(err, "error_message", None) or getattr(err, "error_code", None) or str(err)
        return "error", str(text), None
    value = fb.value if fb is not None else (best.expectation.value if getattr(best, "expectation", None)
                                             is not None else getattr(best, "value", None))
    verdict = rule.read(value)
    return (verdict or "unread"), None, value


def trace_key(trace, key: str) -> str | None:
    """The trace's value of the join key: its id for `trace_id`, else its tag, request metadata or
    root-span input of that name (None when it has none).

    Args:
        trace: an mlflow Trace.
        key: the join key.
    """
    if key == TRACE_ID:
        return trace.info.trace_id
    for part in (getattr(trace.info, "tags", None), getattr(trace.info, "request_metadata", None)):
        if isinstance(part, dict) and part.get(key) not in (None, ""):
            return str(part[key])
    root = _root(trace)
    ins = getattr(root, "inputs", None) if root is not None else None
    if isinstance(ins, dict) and ins.get(key) not in (None, ""):
        return str(ins[key])
    return None


def read_outcome_file(path: str | Path, key: str, label: str, rule: LabelRule) -> dict[str, str]:
    """Join key value -> PASS/FAIL from an outcome file (JSONL or CSV, a header row).

    Args:
        path: the file.
        key: the field naming each record's trace (trace_id, or the user's key).
        label: the field holding the outcome.
        rule: how outcome values read as PASS/FAIL.

    Raises:
        InputError: naming file:line for a record without the key or label, a key given twice with
            different outcomes, or values the rule does not cover.
    """
    path = Path(path)
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".csv"):
        raise InputError(f"unknown outcomes format {path.suffix!r}", path=str(path), field="--outcomes",
                         expected="a .jsonl or .csv file")
    text = read_text(path, "outcomes file")
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        rows = [(reader.line_num, dict(r)) for r in reader]
    else:
        rows = list(iter_jsonl(text, str(path)))
    raw: dict[str, tuple[int, Any]] = {}
    for line, rec in rows:
        for f in (key, label):
            if rec.get(f) in (None, ""):
                raise InputError(f"record has no {f!r}", path=str(path), line=line, field=f,
                                 expected=f"each outcome record with its {key!r} and its {label!r}")
        k = str(rec[key])
        if k in raw and str(raw[k][1]) != str(rec[label]):
            raise InputError(f"{key} {k!r} has outcome {raw[k][1]!r} at line {raw[k][0]} and {rec[label]!r} here",
                             path=str(path), line=line, field=label, expected="one outcome per record")
        raw[k] = (line, rec[label])
    return rule.require(((k, v) for k, (_, v) in raw.items()), where=str(path), field_name=label)


def _search(client, exp_id: str, since_ms: int | None) -> list:
    """The experiment's traces from `since_ms` on (all when None), oldest first, every page."""
    out, token = [], None
    flt = f"trace.timestamp_ms >= {int(since_ms)}" if since_ms is not None else None
    while True:
        page = client.search_traces(locations=[exp_id], filter_string=flt, order_by=["timestamp_ms ASC"],
                                    max_results=PAGE, page_token=token)
        out.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return out


def _entry(trace, judge: str, judge_rule: LabelRule, key: str) -> dict:
    """What the state keeps of a trace read: its time (request time, seconds), item id, verdict."""
    status, err, raw = recorded_verdict(trace, judge, judge_rule)
    tags = dict(getattr(trace.info, "tags", None) or {})
    return {"t": float(trace.info.request_time or 0) / 1000.0, "ms": int(trace.info.request_time or 0),
            "id": tags.get(ITEM_ID_TAG) or trace.info.trace_id, "status": status, "error": err,
            "raw": raw if isinstance(raw, (str, int, float, bool)) or raw is None else str(raw),
            "key": trace_key(trace, key)}


def _read_store(client, exp_id: str, state: dict, *, judge: str, judge_rule: LabelRule, key: str,
                label: str | None, label_rule: LabelRule, file_outcomes: dict | None,
                max_wait_s: float | None = None) -> dict:
    """New traces and waiting ones, joined where their outcome is known. Returns the run's counts and
    the new state parts (nothing is written here)."""
    records, pending = dict(state["records"]), dict(state["pending"])
    since = state["watermark_ms"]
    fetched = _search(client, exp_id, None if since is None else max(0, since - OVERLAP_MS))
    new = [t for t in fetched if t.info.trace_id not in records and t.info.trace_id not in pending]
    traces: dict[str, Any] = {t.info.trace_id: t for t in new}
    entries = {t.info.trace_id: _entry(t, judge, judge_rule, key) for t in new}
    # waiting traces are read again only when what they wait for is on the trace itself
    recheck = [tid for tid, p in pending.items() if file_outcomes is None or p.get("status") == "absent"]
    for tid in recheck:
        try:
            t = client.get_trace(tid)
        except Exception as e:
            if getattr(e, "error_code", None) != "RESOURCE_DOES_NOT_EXIST":
                raise  # the store failed: the run fails, the state stays as it was
            pending.pop(tid)  # deleted from the store since: it no longer waits
            continue
        traces[tid] = t
        entries[tid] = _entry(t, judge, judge_rule, key)
    for tid, p in pending.items():
        entries.setdefault(tid, p)
    unread = [(tid, e["raw"]) for tid, e in entries.items() if e["status"] == "unread"]
    if unread:
        judge_rule.require(unread, where=f"the judge's assessment {judge!r}", field_name="--recorded")
    outcomes: dict[str, str] = {}
    if file_outcomes is not None:
        outcomes = {tid: file_outcomes[e["key"]] for tid, e in entries.items()
                    if e.get("key") is not None and e["key"] in file_outcomes}
    else:
        raw = [(tid, trace_label(traces[tid], label)[1]) for tid in entries if tid in traces]
        raw = [(tid, v) for tid, v in raw if v is not None]
        outcomes = label_rule.require(raw, where="the traces' outcome assessments", field_name=f"--label {label}")
    joined, waiting = {}, {}
    for tid, e in entries.items():
        if e["status"] != "absent" and tid in outcomes:
            joined[tid] = {"t": e["t"], "id": e["id"], "verdict": e["status"] if e["status"] in (PASS, FAIL) else None,
                           "error": e["error"], "label": outcomes[tid]}
        else:
            waiting[tid] = {k: e.get(k) for k in ("t", "id", "status", "error", "key")}
    records.update(joined)
    expired = []
    if max_wait_s is not None and waiting:  # bounds the state and the re-reads where most outcomes never come
        newest = max([e["t"] for e in entries.values()] + [r["t"] for r in records.values()])
        expired = [tid for tid, w in waiting.items() if newest - w["t"] > max_wait_s]
        for tid in expired:
            waiting.pop(tid)
    marks = [entries[t.info.trace_id]["ms"] for t in new] + ([since] if since is not None else [])
    watermark = max(marks) if marks else None
    return {"records": records, "pending": waiting, "watermark_ms": watermark, "traces": traces,
            "counts": {"traces_fetched": len(fetched), "traces_read": len(new), "waiting_rechecked": len(recheck),
                       "joined_now": len(joined), "waiting": len(waiting), "expired": len(expired),
                       "unjudged": sum(e["status"] == "absent" for e in entries.values())},
            "new_ids": [t.info.trace_id for t in new]}


def _teacher_review(lm: Any, client, todo: list[str], traces: dict, labels: dict, view: list[str] | None,
                    threads: int, progress: Callable[[str], None] | None = None) -> dict:
    """The informed teacher's decisions on the records without one (one teacher call each); progress lines as
    `monitor`'s teacher pass prints them (verifirst.judge.passes)."""
    import dspy

    from verifirst.judge.passes import Passes
    from verifirst.judge.teacher import review_items
    from verifirst.lm import FastJSONAdapter

    got = {tid: traces.get(tid) or client.get_trace(tid) for tid in todo}
    fields = view or sorted({f for t in got.values() for f in default_view(t)})
    items = []
    for tid, t in got.items():
        v = trace_view(t)
        items.append(Item(tid, {f: v.get(f, "") for f in fields}, {"label": labels[tid]}))
    with dspy.context(lm=lm, adapter=FastJSONAdapter()), Passes(progress, len(items)).teacher() as on_item:
        return review_items(fields, items, lm, threads, on_item=on_item)  # as monitor runs it: one call a record


def monitor_recorded(experiment: str, *, judge: str = "judge", label: str = "label",
                     outcomes: str | Path | None = None, key: str = TRACE_ID, state: str | Path | None = None,
                     prompt: str | None = None, baseline_pi: float | None = None, drift: Any = None,
                     windows: str | int = "7d", time_field: str = "request_time", pass_at: float | None = None,
                     label_map: Any = None, judge_pass_at: float | None = None, teacher: Any = None,
                     view: str | None = None, max_wait: str | None = None, threads: int = 1, n_boot: int = 2000,
                     workdir: str | Path | None = None, tracking_uri: str | None = None,
                     tracking: MLflow | None = None, run_dir: str | Path | None = None, dry_run: bool = False,
                     echo: Callable[[str], None] | None = None,
                     progress: Callable[[str], None] | None = None) -> MonitorResult | dict:
    """The monitor's windows, π and drift verdict from the judge's recorded verdicts: 0 judge calls.

    Args:
        experiment: the MLflow experiment (name or id) whose traces carry the judge's verdicts.
        judge: the assessment name the deployed judge logs its verdict under.
        label: the outcome assessment name on the traces (used when `outcomes` is None), or the
            outcome file's field holding the outcome.
        outcomes: an outcome file (JSONL/CSV) joined to the traces by `key` (None: outcome assessments).
        key: the join key: trace_id, or a field named by a trace tag, request metadata or root input.
        state: the state file (default WORKDIR/monitor-state/EXPERIMENT.JUDGE.json).
        prompt: the deployed judge's prompt (a file or prompts:/...): its `val_pi` tag is the baseline.
        baseline_pi: the champion's validation π (overrides the rule's and the prompt's tag).
        drift: a DriftRule or a dict of baseline_pi, max_abstention, min_n.
        windows: a duration ("7d", "12h") or a count of equal windows.
        time_field: the name the report gives the traces' time (always their request time).
        pass_at: outcome ratings at or above it are PASS.
        label_map: categorical outcomes to PASS/FAIL ("merged=PASS,reverted=FAIL" or a dict).
        judge_pass_at: a rubric judge's recorded scores at or above it are PASS.
        teacher: a model string or dspy.LM for the informed teacher's abstention (None: off, no call).
        view: the fields the teacher reads (default: each trace's inputs/outputs, as monitor reads them).
        max_wait: a duration ("30d"): a trace still waiting for its outcome or verdict that much older
            than the newest trace read stops waiting (counted as `expired`); None: traces wait forever.
        threads: teacher threads.
        n_boot: bootstrap resamples for π's interval.
        workdir: the default state, the run directory and the local MLflow store (default .verifirst).
        tracking_uri: the store holding the traces (default: the workdir's local store).
        tracking: vf.MLflow(...) logs the windows as monitor does; None tracks nothing.
        run_dir: where report.json/md/html go (default WORKDIR/runs/monitor-TIME).
        dry_run: read the store, write nothing, call no model: return what a run would read and cost.
        echo: a callable for progress lines.
        progress: where the teacher pass's per-tenth lines go when stdout is not a terminal (default: echo).

    Returns:
        A MonitorResult (report["recorded"] says what was read and joined, report["model_calls"]
        what was called), or with dry_run the estimate: {"traces_read", "joined_now", "waiting",
        "records", "teacher_calls", "judge_calls": 0, "state"}.
    """
    from verifirst.judge.prompts import check_store_has, resolve_start_prompt
    from verifirst.config import RUN_DIR_EXPECTED, check_number, check_workdir
    from verifirst.lm import configure_cache, make_lm
    from verifirst.loop.timesplit import item_times, parse_windows, time_windows
    from verifirst.tracking import Tracker

    echo = echo or (lambda line: None)
    workdir = Path(workdir or DEFAULT_WORKDIR)
    check_workdir(workdir, "workdir")
    if run_dir is not None:
        check_workdir(run_dir, "run_dir", expected=RUN_DIR_EXPECTED)
    if not experiment or not str(experiment).strip():
        raise InputError("no experiment named", field="--from-mlflow", expected="the experiment the judge logs to")
    for name, value in (("--recorded", judge), ("--label", label), ("--join-key", key)):
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"{value!r} is no name", field=name, expected="an assessment or field name")
    rule = DriftRule.of(drift)
    if baseline_pi is not None:
        rule = DriftRule(baseline_pi, rule.max_abstention, rule.min_n)._checked("")
    parse_windows(windows)
    max_wait_s = None
    if max_wait is not None:
        unit, max_wait_s = parse_windows(max_wait, "--max-wait")
        if unit != "duration":
            raise InputError(f"max_wait {max_wait!r} is a count, not a duration", field="--max-wait",
                             expected="a duration such as 30d or 12h")
    check_number(threads, 1, None, "threads", integer=True)
    label_rule = LabelRule.of(pass_at, label_map)
    judge_rule = LabelRule.of(judge_pass_at, None)
    if key != TRACE_ID and outcomes is None:
        raise InputError(f"join key {key!r} needs an outcome file", field="--join-key",
                         expected="--outcomes FILE with a field of that name; outcome assessments join by trace")
    uri = tracking_uri or (tracking.uri if tracking is not None and tracking.uri else None) \
        or Tracker(workdir, enabled=False).uri
    tags: dict = {}
    start = None
    if prompt is not None:
        start = resolve_start_prompt(str(prompt), workdir, uri)
        tags = dict(start.tags or {})
    if rule.baseline_pi is None and prompt is None:
        raise InputError("no baseline π: recorded verdicts need the champion's validation π", field="--baseline-pi",
                         expected="--baseline-pi X, or --prompt whose version has a 'val_pi' tag")
    baseline, baseline_source = _baseline(rule, tags, str(prompt))
    file_outcomes = read_outcome_file(outcomes, key, label, label_rule) if outcomes is not None else None
    check_store_has(uri, f"MLflow experiment {experiment!r}", "--from-mlflow", "an experiment with judged traces")
    client = _client(uri)
    exp_id = _experiment_id(client, str(experiment))
    join = {"by": "file", "file": str(Path(outcomes).resolve()), "key": key, "label": label} \
        if outcomes is not None else {"by": "assessment", "label": label, "key": TRACE_ID}
    state_path = Path(state) if state is not None else default_state_path(workdir, str(experiment), judge)
    st = load_state(state_path, _identity(exp_id, str(experiment), judge, join))
    got = _read_store(client, exp_id, st, judge=judge, judge_rule=judge_rule, key=key,
                      label=label if outcomes is None else None, label_rule=label_rule, file_outcomes=file_outcomes,
                      max_wait_s=max_wait_s)
    records = got["records"]
    c = got["counts"]
    if not records and not got["pending"]:
        raise InputError(f"experiment {experiment!r} has no traces", field="--from-mlflow",
                         expected="an experiment the deployed judge logs its verdicts to")
    if not any(r.get("status") != "absent" for r in got["pending"].values()) and not records:
        names = sorted({a.name for t in got["traces"].values() for a in (t.info.assessments or [])})
        raise InputError(f"none of the {len(got['pending'])} traces in experiment {experiment!r} carries the judge's "
                         f"assessment {judge!r}", field="--recorded",
                         expected="the assessment name the deployed judge logs; names on these traces: "
                                  + (", ".join(names) or "none"))
    todo = [tid for tid, r in records.items() if "teacher" not in r] if teacher is not None else []
    if dry_run:
        return {"experiment": str(experiment), "state": str(state_path), **c, "records": len(records),
                "judge_calls": 0, "teacher_calls": len(todo), "teacher": "on" if teacher is not None else "off"}
    model_calls = {"judge": 0, "teacher": 0}
    if todo:
        configure_cache(workdir / "cache")
        lm = make_lm(teacher, role="teacher") if isinstance(teacher, (str, list)) else teacher
        decided = _teacher_review(lm, client, todo, got["traces"], {t: records[t]["label"] for t in todo},
                                  [f.strip() for f in view.split(",") if f.strip()] if view else None, threads,
                                  progress or echo)
        for tid, d in decided.items():
            records[tid] = {**records[tid], "teacher": d}
        model_calls["teacher"] = len(todo)
    items = [Item(tid, {}, {"label": r["label"]}, meta={"t": r["t"]})
             for tid, r in sorted(records.items(), key=lambda kv: (kv[1]["t"], kv[0]))]
    echo(f"mlflow:{experiment}: {c['traces_read']} new trace(s), {c['joined_now']} joined now, {len(records)} "
         f"records, {c['waiting']} waiting; 0 judge calls, {model_calls['teacher']} teacher call(s)")
    source = f"mlflow:{experiment}"
    wins = time_windows(items, "t", windows, key=lambda it: it.id, source=source) if items else []
    times = item_times(items, "t", lambda it: it.id, source=source)
    outliers = _time_outliers(wins, times) if items else None
    labels = {tid: r["label"] for tid, r in records.items()}
    verdicts = {tid: r["verdict"] for tid, r in records.items()}
    judge_errors = {tid: r["error"] or "no verdict" for tid, r in records.items() if r["verdict"] is None}
    reviews = {tid: r["teacher"] for tid, r in records.items() if teacher is not None and "teacher" in r}
    rows = [_window_row(k, w, labels, verdicts, reviews, rule, baseline, n_boot, judge_errors)
            for k, w in enumerate(wins)]
    lm_failure = _run_lm_failure(rows)
    verdict = verdict_fields(rows, rule, lm_failure, outliers)
    report: dict[str, Any] = {
        "kind": "monitor", "name": "monitor",
        "prompt": {"source": str(prompt) if prompt is not None else f"recorded:{judge}",
                   "name": start.name if start else judge, "version": start.version if start else None,
                   "alias": start.alias if start else None, "judge": "recorded", "threshold": judge_pass_at,
                   "view": view},
        "source": source, "n_records": len(items), "time_field": time_field, "windows_spec": str(windows),
        "labels": {"rule": label_rule.describe()},
        "drift_rule": {**asdict(rule), "baseline_pi": baseline, "baseline_source": baseline_source,
                       "text": rule.describe(baseline)},
        "windows": rows, **verdict, "lm_failure": lm_failure, "time_outliers": outliers, "limit": None,
        "judge_errors": sum(r["judge_errors"] for r in rows),
        "recorded": {"judge_assessment": judge, "join": join, "state": str(state_path), **c,
                     "teacher": "on" if teacher is not None else "off"},
        "model_calls": model_calls,
    }
    out_dir = save(report, workdir, tracking, run_dir)
    st.update({"watermark_ms": got["watermark_ms"], "records": records, "pending": got["pending"],
               "runs": int(st.get("runs") or 0) + 1})
    atomic.write_json(state_path, st)
    return MonitorResult(report, out_dir, report["drift"], report["exit_code"], report["recommendation"], rows,
                         lm_failure)


RECORDED_FLAGS = "--dry-run, --state, --join-key, --teacher-abstention and --max-wait"


def cli_monitor_recorded(request: Any, *, recorded: str | None, state: Path | None = None,
                         join_key: str | None = None, teacher_abstention: bool = False, max_wait: str | None = None,
                         dry_run: bool = False) -> int:
    """`verifirst monitor --from-mlflow EXPERIMENT --recorded NAME`: the table or JSON report and the
    monitor's exit code (0 ok, 1 drift or LM failure, 3 no evidence); with --dry-run the estimate
    (what would be read, the teacher calls it would cost) and exit 0.

    Args:
        request: the monitor command's checked request (its flags; monitor_kwargs() gives the drift
            rule, the models and the tracking).
        recorded: --recorded, the judge's assessment name; None with another recorded-only flag is refused.
        state: --state.
        join_key: --join-key (None: trace_id).
        teacher_abstention: --teacher-abstention: ask the informed teacher (the --teacher model).
        max_wait: --max-wait.
        dry_run: print the estimate; write nothing, call no model.
    """
    from verifirst.report import report_json

    if recorded is None:
        raise InputError(f"{RECORDED_FLAGS} read the deployed judge's recorded verdicts", field="--recorded",
                         expected="--from-mlflow EXPERIMENT --recorded ASSESSMENT")
    if request.limit is not None:
        raise InputError("--limit caps the judge calls of a re-run; --recorded makes none", field="--limit",
                         expected="no --limit with --recorded")
    kw = request.monitor_kwargs()
    as_json = kw["as_json"]
    res = monitor_recorded(request.from_mlflow, judge=recorded, label=request.label, outcomes=request.outcomes,
                           key=join_key or TRACE_ID, state=state, prompt=request.prompt, drift=kw["drift"],
                           windows=request.windows, pass_at=request.pass_at, label_map=request.label_map,
                           view=request.view, max_wait=max_wait, threads=request.threads,
                           teacher=kw["models"]["teacher"] if teacher_abstention else None,
                           workdir=request.workdir, tracking_uri=request.tracking_uri, tracking=kw["tracking"],
                           run_dir=request.run_dir, dry_run=dry_run,
                           progress=None if as_json else print)  # lines only where stdout is no terminal
    if dry_run:
        print(json.dumps(res, indent=1) if as_json else
              f"dry run: {res['traces_read']} new trace(s) to read, {res['waiting_rechecked']} waiting to re-read, "
              f"{res['joined_now']} to join ({res['records']} records in all); judge calls 0, teacher calls "
              f"{res['teacher_calls']} (teacher {res['teacher']}); state {res['state']}")
        return 0
    if as_json:
        print(report_json(res.report))
    else:
        r = res.report["recorded"]
        print(f"recorded verdicts {r['judge_assessment']!r}: {r['traces_read']} new trace(s) read, {r['joined_now']} "
              f"joined, {r['waiting']} waiting for an outcome; model calls: judge 0, teacher "
              f"{res.report['model_calls']['teacher']}; state {r['state']}")
        print_monitor(res.report)
    if res.report.get("no_evidence") or res.lm_failure:
        print(f"error: {res.report['reason']}", file=sys.stderr)
    return res.exit_code
