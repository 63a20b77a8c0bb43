"""Judge records from MLflow traces, and the review queue back into MLflow.

`load_trace_suite` reads an experiment's traces as outcome records: a trace's root-span inputs and
outputs are the judge's view (`inputs`, `outputs`, and each key of a dict among them as its own
field) and its label is the assessment (human feedback or expectation) named `label`. Traces
without that label are counted and skipped, never guessed.

`review_queue_to_mlflow` logs the items a human should look at as traces (the view as inputs; the
judge's verdict and reasoning, the teacher's decision and justification and the recorded label as
assessments) and merges them into an MLflow evaluation dataset a labeling session can load; a
label a reviewer adds to such a trace is read back by `load_trace_suite`.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

from verifirst.core.errors import InputError
from verifirst.core.task import Item, Suite
from verifirst.judging.agreement import trace_labels
from verifirst.judge.labels import LabelRule

PAGE = 500
ITEM_ID_TAG = "verifirst.item_id"
GROUP_TAG = "verifirst.group"
QUEUE_SPAN = "review_item"


def _client(tracking_uri: str):
    import mlflow

    return mlflow.MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)


def _experiment_id(client, experiment: str) -> str:
    exp = client.get_experiment_by_name(experiment)
    if exp is None and experiment.isdigit():
        try:
            exp = client.get_experiment(experiment)
        except Exception:
            exp = None
    if exp is None:
        names = sorted(e.name for e in client.search_experiments(max_results=50))
        raise InputError(f"no MLflow experiment {experiment!r}", field="--from-mlflow",
                         expected="an experiment with labelled traces: " + (", ".join(names) or "none here"))
    return exp.experiment_id


def _root(trace):
    spans = list(getattr(trace.data, "spans", []) or [])
    roots = [s for s in spans if getattr(s, "parent_id", None) is None]
    return (roots or spans or [None])[0]


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=1, sort_keys=True, default=str)


def trace_view(trace) -> dict[str, str]:
    """The judge's view of one trace: `inputs`, `outputs` and the keys of dict inputs/outputs.

    Args:
        trace: an mlflow Trace (its root span's inputs and outputs are read).
    """
    root = _root(trace)
    ins = getattr(root, "inputs", None) if root is not None else None
    outs = getattr(root, "outputs", None) if root is not None else None
    view: dict[str, str] = {}
    if ins is not None:
        view["inputs"] = _as_text(ins)
    if outs is not None:
        view["outputs"] = _as_text(outs)
    for part in (ins, outs):
        if isinstance(part, dict):
            for k, v in part.items():
                view.setdefault(str(k), _as_text(v))
    return view


def default_view(trace) -> list[str]:
    """The fields a judge without template variables reads: each key of dict inputs/outputs, else
    `inputs` / `outputs` themselves (so no text reaches the judge twice).

    Args:
        trace: an mlflow Trace.
    """
    root = _root(trace)
    out: list[str] = []
    for name in ("inputs", "outputs"):
        part = getattr(root, name, None) if root is not None else None
        if isinstance(part, dict) and part:
            out += [str(k) for k in part]
        elif part is not None:
            out.append(name)
    return out


def trace_label(trace, name: str, rule: LabelRule | None = None) -> tuple[str | None, Any]:
    """(PASS/FAIL, the raw value) of the trace's assessment `name`; a human one wins, then the latest.

    Args:
        trace: an mlflow Trace.
        name: the assessment (feedback or expectation) name; (None, None) when the trace has none.
        rule: how the value reads as PASS/FAIL (default: PASS/FAIL words and booleans).
    """
    found = [a for a in (getattr(trace.info, "assessments", None) or [])
             if a.name == name and getattr(a, "valid", True) is not False]
    if not found:
        return None, None

    def rank(a):
        human = str(getattr(getattr(a, "source", None), "source_type", "")).upper().endswith("HUMAN")
        return (human, getattr(a, "last_update_time_ms", None) or getattr(a, "create_time_ms", 0) or 0)

    best = max(found, key=rank)
    value = best.feedback.value if getattr(best, "feedback", None) is not None else (
        best.expectation.value if getattr(best, "expectation", None) is not None else getattr(best, "value", None))
    return (rule or LabelRule()).read(value), value


def _traces(client, experiment_id: str) -> list:
    out, token = [], None
    while True:
        page = client.search_traces(locations=[experiment_id], max_results=PAGE, page_token=token)
        out.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return out


def load_trace_suite(experiment: str, tracking_uri: str, label: str = "label",
                     limit: int | None = None, rule: LabelRule | None = None,
                     labellers: bool = False) -> tuple[Suite, dict]:
    """An experiment's labelled traces as outcome records, and what was read and skipped.

    Args:
        experiment: the MLflow experiment name (or id).
        tracking_uri: the MLflow tracking URI.
        label: the assessment name holding the label (feedback or expectation; PASS/FAIL, true/false,
            or words normalize_label reads).
        limit: keep the first N labelled traces (oldest first).
        rule: how recorded values read as PASS/FAIL (--pass-at, --label-map); a value it does not
            cover refuses the read, naming the traces, never a guess.
        labellers: keep every human's assessment (`--labels`): item.meta["labels"] is {labeller: value},
            the latest valid human assessment named `label` per labeller (an LLM judge's is none); the
            label policy reads them (verifirst.judge.labellers), so no single label is chosen here.

    Returns:
        (suite, {"n_traces", "n_labelled", "skipped_unlabelled", "skipped_unreadable" (no view)}).
    """
    client = _client(tracking_uri)
    exp_id = _experiment_id(client, experiment)
    traces = sorted(_traces(client, exp_id), key=lambda t: (t.info.request_time or 0, t.info.trace_id))
    rule = rule or LabelRule()
    items, unlabelled, unreadable, raw_labels = [], 0, 0, []
    for t in traces:
        several = trace_labels(t, label) if labellers else None
        lab, raw = (None, several or None) if labellers else trace_label(t, label, rule)
        if raw is None:
            unlabelled += 1
            continue
        tags = dict(getattr(t.info, "tags", {}) or {})
        view = trace_view(t)
        if not view:
            unreadable += 1
            continue
        iid = tags.get(ITEM_ID_TAG) or t.info.trace_id
        if not labellers:
            raw_labels.append((str(iid), raw))
        items.append(Item(str(iid), view, {"label": lab}, group=tags.get(GROUP_TAG),
                          meta={"trace_id": t.info.trace_id, "view": default_view(t),
                                **({"labels": several} if labellers else {})}))
    rule.require(raw_labels, where=f"experiment {experiment!r}", field_name=f"--label {label}")
    stats = {"n_traces": len(traces), "n_labelled": len(items), "skipped_unlabelled": unlabelled,
             "skipped_unreadable": unreadable, "label_rule": rule.describe()}
    if not items:
        raise InputError(f"experiment {experiment!r} has no trace labelled {label!r} ({len(traces)} traces, "
                         f"{unlabelled} without that assessment, {unreadable} without a view)",
                         field="--label", expected="traces with a human feedback or expectation of that name")
    if limit:
        items = items[:limit]
    fields = sorted({k for it in items for k in it.inputs})
    for it in items:  # one view for every record (a field a trace lacks is empty)
        for k in fields:
            it.inputs.setdefault(k, "")
    suite = Suite(f"mlflow:{experiment}", items, f"labelled traces of {experiment}",
                  meta={"default_view": sorted(set().union(*(it.meta.pop("view") for it in items)))})
    return suite, stats


def review_queue_to_mlflow(rows: Sequence[dict], tracking_uri: str, experiment: str, dataset_name: str,
                        run_id: str | None = None) -> dict:
    """The review queue as traces in `experiment` and an evaluation dataset of them.

    Args:
        rows: queue rows (id, split, reason, label, view, verdict, judge_reasoning, teacher_decision,
            teacher_justification).
        tracking_uri: the MLflow tracking URI.
        experiment: the experiment the queue's traces go to (created if missing).
        dataset_name: the evaluation dataset's name.
        run_id: the calibration run the queue comes from (a tag on each trace).

    Returns:
        {"experiment", "experiment_id", "dataset", "dataset_id", "trace_ids"}.
    """
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType
    from mlflow.genai.datasets import create_dataset

    client = _client(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment)
    judge_src = AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id="verifirst-judge")
    teacher_src = AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id="verifirst-teacher")
    outcome_src = AssessmentSource(source_type=AssessmentSourceType.CODE, source_id="verifirst-outcome")
    prev = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(tracking_uri)
    ids = []
    try:
        for row in rows:
            tags = {ITEM_ID_TAG: str(row["id"]), "verifirst.queue_reason": row["reason"],
                    "verifirst.split": row["split"], **({"verifirst.run_id": run_id} if run_id else {})}
            span = client.start_trace(QUEUE_SPAN, inputs=dict(row.get("view") or {}), tags=tags,
                                      experiment_id=exp_id)
            client.end_trace(span.trace_id)
            ids.append(span.trace_id)
        _flush()  # assessments need their trace in the store
        for tid, row in zip(ids, rows):
            if row.get("verdict") or row.get("judge_reasoning"):
                mlflow.log_feedback(trace_id=tid, name="judge", value=row.get("verdict"),
                                    rationale=row.get("judge_reasoning") or None, source=judge_src)
            if row.get("teacher_decision"):
                mlflow.log_feedback(trace_id=tid, name="teacher", value=row["teacher_decision"],
                                    rationale=row.get("teacher_justification") or None, source=teacher_src)
            mlflow.log_expectation(trace_id=tid, name="recorded_label", value=row["label"], source=outcome_src)
        ds = create_dataset(name=dataset_name, experiment_id=[exp_id],
                            tags={"verifirst.kind": "review_queue", **({"verifirst.run_id": run_id} if run_id else {})})
        if ids:
            ds.merge_records([client.get_trace(t) for t in ids])
    finally:
        mlflow.set_tracking_uri(prev)
    return {"experiment": experiment, "experiment_id": exp_id, "dataset": dataset_name,
            "dataset_id": getattr(ds, "dataset_id", None), "trace_ids": ids}


def _flush() -> None:
    import mlflow

    try:
        mlflow.flush_trace_async_logging()
    except Exception:  # synchronous logging: nothing to flush
        pass
