"""Outcome records for judge calibration: the judge's view `x` plus a label PASS/FAIL.

Every source returns a `verifirst.core.task.Suite`; each Item has
  inputs = the view fields (text the judge reads), gold = {"label": "PASS"|"FAIL"},
  group = what splits keep together (task, problem, repository), meta = anything else.

File format (JSONL: one object per line; CSV: one row per record, header first):
  required  id     unique record id (string or integer)
  required  label  PASS or FAIL (case-insensitive); optional where records are only judged
                   (`verifirst judge`: require_label=False)
  view      the text fields the judge sees. JSONL: either an object under `view`, or
            top-level fields named in VIEW_FIELDS (title, summary, diff, code, test_plan,
            task, command, reference). CSV: columns named in VIEW_FIELDS.
            Pass `view_fields=[...]` to name other fields. Every record needs the same set.
  optional  group  split group (default: the id)
  optional  meta   JSONL object of metadata; any other top-level field / column is metadata
            too (CSV columns may be written `meta.stage`). Metadata never reaches the judge.

Example line:
  {"id": "d1", "label": "FAIL", "title": "Cache keys", "diff": "...", "group": "repo-a",
   "stage": "after_review"}
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from verifirst.core.textfile import read_jsonl, read_text
from verifirst.core.errors import InputError
from verifirst.core.task import Item, Suite
from verifirst.core.verdicts import LABELS  # noqa: F401 - re-exported
from verifirst.core.verdicts import normalize_label as read_label
VIEW_FIELDS = ("title", "summary", "diff", "code", "test_plan", "task", "command", "reference")
RESERVED = ("id", "label", "group", "meta", "view")

ICE_SCORE_RELPATH = Path("ice-score") / "humaneval_python_grade.json"


def shared_data_dir() -> Path:
    """../shared/data beside the repository root (override with VERIFIRST_SHARED_DATA)."""
    env = os.environ.get("VERIFIRST_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def normalize_label(value: Any, *, path: str | None = None, line: int | None = None) -> str:
    """A record's label as PASS or FAIL (verifirst.core.verdicts reads it: merged/landed/true/yes are
    PASS, abandoned/rejected/false/no are FAIL); anything else is an InputError naming the place.

    Args:
        value: the recorded label.
        path: the outcomes file (for the error).
        line: the record's line (for the error).
    """
    label = read_label(value)
    if label is not None:
        return label
    raise InputError(f"label {value!r} is not PASS or FAIL", path=path, line=line, field="label",
                     expected="PASS or FAIL (or passed/failed, merged/abandoned, true/false, yes/no)")


def _blank(value: Any) -> bool:
    return value is None or str(value).strip() == ""


def _record_label(rec: dict, *, path: str, line: int, raw_label: bool) -> str | None:
    """The record's label as PASS/FAIL (raw: as recorded, a LabelRule reads it); None when it has none."""
    if _blank(rec.get("label")):
        return None
    return rec["label"] if raw_label else normalize_label(rec["label"], path=path, line=line)


def _record_to_item(rec: dict, view_fields: Sequence[str] | None, *, path: str, line: int,
                    raw_label: bool = False, require_label: bool = True) -> Item:
    required = ("id", "label") if require_label else ("id",)
    for key in required:
        if key not in rec or _blank(rec[key]):
            raise InputError(f"missing required field {key!r}", path=path, line=line, field=key,
                             expected="every record has " + " and ".join(f"`{k}`" for k in required))
    if isinstance(rec["id"], bool) or not isinstance(rec["id"], (str, int)):
        raise InputError(f"id is a {type(rec['id']).__name__}", path=path, line=line, field="id",
                         expected="a string or an integer")
    rid = str(rec["id"]).strip()
    label = _record_label(rec, path=path, line=line, raw_label=raw_label)
    if "view" in rec:
        view = rec["view"]
        if not isinstance(view, dict) or not view:
            raise InputError("`view` must be a non-empty object of text fields", path=path, line=line,
                             field="view", expected='e.g. {"title": "...", "diff": "..."}')
        extra = {k: v for k, v in rec.items() if k not in RESERVED}
    else:
        names = list(view_fields) if view_fields else [k for k in rec if k in VIEW_FIELDS]
        if not names:
            raise InputError("record has no view field", path=path, line=line, field="view",
                             expected=f"a `view` object or at least one of {', '.join(VIEW_FIELDS)}")
        missing = [n for n in names if n not in rec]
        if missing:
            raise InputError(f"missing view field(s) {missing}", path=path, line=line,
                             field=missing[0], expected=f"view fields {names}")
        view = {n: rec[n] for n in names}
        extra = {k: v for k, v in rec.items() if k not in RESERVED and k not in names}
    clean_view = {}
    for k, v in view.items():
        if v is None:
            v = ""
        if isinstance(v, (dict, list)):
            raise InputError(f"view field {k!r} is not text", path=path, line=line, field=k,
                             expected="a string")
        clean_view[str(k)] = str(v)
    meta = {}
    if "meta" in rec and rec["meta"] not in (None, ""):
        if not isinstance(rec["meta"], dict):
            raise InputError("`meta` must be an object", path=path, line=line, field="meta",
                             expected='e.g. {"stage": "draft"}')
        meta.update(rec["meta"])
    for k, v in extra.items():
        meta[k[5:] if k.startswith("meta.") else k] = v
    group = rec.get("group")
    group = None if group in (None, "") else str(group)
    return Item(id=rid, inputs=clean_view, gold={"label": label}, group=group, meta=meta)


def _check_consistent(items_lines: list[tuple[Item, int]], path: str) -> None:
    seen: dict[str, int] = {}
    first_fields: tuple[list[str], int] | None = None
    for item, line in items_lines:
        if item.id in seen:
            raise InputError(f"duplicate id {item.id!r} (first on line {seen[item.id]})", path=path,
                             line=line, field="id", expected="unique ids")
        seen[item.id] = line
        fields = sorted(item.inputs)
        if first_fields is None:
            first_fields = (fields, line)
        elif fields != first_fields[0]:
            raise InputError(f"view fields {fields} differ from {first_fields[0]} on line "
                             f"{first_fields[1]}", path=path, line=line, field="view",
                             expected="the same view fields in every record")


def _suite(name: str, items_lines: list[tuple[Item, int]], path: str) -> Suite:
    if not items_lines:
        raise InputError("no records", path=path, expected="at least one outcome record")
    _check_consistent(items_lines, path)
    items = [it for it, _ in items_lines]
    return Suite(name=name, items=items, description=f"outcome records from {path}",
                 meta={"source": str(path), "view_fields": sorted(items[0].inputs),
                       "lines": {it.id: n for it, n in items_lines}})  # errors about a record name its line


def load_jsonl(path: str | os.PathLike, view_fields: Sequence[str] | None = None, raw_label: bool = False,
               require_label: bool = True) -> Suite:
    p = str(path)
    out: list[tuple[Item, int]] = []
    # missing, a directory, a loop, binary, not UTF-8, a line not a JSON object: InputError
    for n, rec in read_jsonl(path, "outcomes file"):
        out.append((_record_to_item(rec, view_fields, path=p, line=n, raw_label=raw_label,
                                    require_label=require_label), n))
    return _suite(Path(path).stem, out, p)


def _csv_rows(text: str, path: str) -> Iterable[tuple[int, list[str]]]:
    """(line where the row ends, cells) per non-empty row, header first. Strict quoting: a quote never
    closed (which would swallow the rest of the file into one cell) or text after a closing quote is
    an InputError naming the line where the row starts."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    while True:
        first_line = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            why = "a quoted cell is never closed" if "end of data" in str(e) else f"malformed CSV ({e})"
            raise InputError(why, path=path, line=first_line,
                             expected='quoted cells closed on their row or a later one; a quote inside a '
                                      'quoted cell written twice ("")') from None
        if cells:  # a blank line
            yield reader.line_num, cells


def _check_cells(cells: list[str], header: list[str], path: str, line: int) -> None:
    """One cell per header column: a short row is never padded with empty fields, a long one never cut."""
    if len(cells) != len(header):
        raise InputError(f"row has {len(cells)} cells, header has {len(header)}", path=path, line=line,
                         expected="one cell per header column: " + ",".join(header))


def load_csv(path: str | os.PathLike, view_fields: Sequence[str] | None = None, raw_label: bool = False,
             require_label: bool = True) -> Suite:
    """Outcome records from a CSV file, header first (see the module docstring); a row with too few
    or too many cells, or an unclosed quote, is an InputError naming its line.

    Args:
        path: the file.
        view_fields: the columns the judge reads (default: those of VIEW_FIELDS in the header).
        raw_label: keep labels as recorded (a LabelRule reads them).
        require_label: False: the label column and cells are optional (see load_outcomes).
    """
    p = str(path)
    text = read_text(path, "outcomes file")
    rows = iter(_csv_rows(text, p))
    header = [h.strip() for h in next(rows, (1, []))[1]]
    if not header:
        raise InputError("empty CSV (no header)", path=p, line=1, expected="a header row")
    names = list(view_fields) if view_fields else [h for h in header if h in VIEW_FIELDS]
    missing = [c for c in (("id", "label") if require_label else ("id",)) if c not in header]
    missing += [c for c in names if c not in header]
    if missing or not names:
        raise InputError(f"missing column(s) {missing or ['<a view field>']}; header is {header}",
                         path=p, line=1, field=(missing or ["view"])[0],
                         expected=f"columns id, label and view fields (any of {', '.join(VIEW_FIELDS)})")
    out: list[tuple[Item, int]] = []
    for line, cells in rows:
        if all(c.strip() == "" for c in cells):
            continue
        _check_cells(cells, header, p, line)
        row = dict(zip(header, cells))
        rec = {k: v for k, v in row.items() if k in ("id", "label", "group") or k in names or v != ""}
        out.append((_record_to_item(rec, names, path=p, line=line, raw_label=raw_label,
                                    require_label=require_label), line))
    return _suite(Path(path).stem, out, p)


def load_outcomes(path: str | os.PathLike, view_fields: Sequence[str] | None = None, labels=None,
                  require_label: bool = True) -> Suite:
    """Outcome records from a JSONL or CSV file, by extension (.jsonl/.json lines or .csv).

    Args:
        path: the file.
        view_fields: the fields the judge reads (default: those of VIEW_FIELDS a record has).
        labels: a verifirst.judge.labels.LabelRule (--pass-at, --label-map) reading every record's
            label, uncovered ones refused together; None reads PASS/FAIL words.
        require_label: False for records that are only judged (`verifirst judge`): a record
            without a label gets gold label None; a label it has must still read as PASS or FAIL.
    """
    suffix = Path(path).suffix.lower()
    if suffix in (".csv", ".jsonl", ".ndjson", ".json"):
        suite = (load_csv if suffix == ".csv" else load_jsonl)(path, view_fields, raw_label=labels is not None,
                                                              require_label=require_label)
        if labels is not None:
            labelled = [it for it in suite.items if it.gold["label"] is not None]
            read = labels.require([(it.id, it.gold["label"]) for it in labelled], where=str(path))
            for it in labelled:
                it.gold["label"] = read[it.id]
        return suite
    raise InputError(f"unknown outcomes format {suffix!r}", path=str(path),
                     expected="a .jsonl or .csv file")


# -- other sources ------------------------------------------------------------------------
def from_oracle(records: Iterable[dict], oracle: Callable[[dict], bool], *, name: str = "oracle",
                id_key: str = "id", group_key: str | None = "group",
                view_fields: Sequence[str] | None = None) -> Suite:
    """Labels from an execution oracle: oracle(record) -> True (PASS) / False (FAIL).

    `records` hold the view fields plus whatever the oracle needs (those extra keys go
    to meta, never to the judge). Oracle exceptions propagate: an oracle error is not a FAIL.
    """
    items = []
    for n, rec in enumerate(records, start=1):
        fields = list(view_fields) if view_fields else [k for k in rec if k in VIEW_FIELDS]
        label = "PASS" if oracle(rec) else "FAIL"
        body = {"id": rec.get(id_key, n), "label": label,
                "group": rec.get(group_key) if group_key else None}
        body.update({k: rec[k] for k in fields})
        body["meta"] = {k: v for k, v in rec.items()
                        if k not in fields and k not in (id_key, group_key) and _jsonable(v)}
        items.append((_record_to_item(body, fields, path=name, line=n), n))
    return _suite(name, items, name)


def from_verifier(items: Iterable[Item], verifier, candidate_key: str, *,
                  view_fields: Sequence[str] | None = None, name: str | None = None) -> Suite:
    """Labels from any `Verifier`: the candidate in item.inputs[candidate_key] is verified."""
    out = []
    for n, it in enumerate(items, start=1):
        verdict = verifier.verify(it, it.inputs[candidate_key])
        if verdict.passed is None:  # INCONCLUSIVE or ERROR: no label either way
            continue
        fields = list(view_fields) if view_fields else list(it.inputs)
        view = {k: str(it.inputs[k]) for k in fields}
        meta = dict(it.meta, verifier=getattr(verifier, "name", type(verifier).__name__),
                    stage=verdict.stage)
        out.append((Item(it.id, view, {"label": "PASS" if verdict.passed else "FAIL"}, it.group, meta), n))
    return _suite(name or getattr(verifier, "name", "verifier"), out, name or "verifier")


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def _feedback_label(value: Any) -> str | None:
    """An MLflow feedback value as a label: a score of 0.5 or more is PASS."""
    return read_label(value, threshold=0.5)


def from_mlflow_assessments(experiment_id: str | None = None, *, assessment_name: str = "outcome",
                            traces: list | None = None, view_fields: Sequence[str] | None = None,
                            max_results: int = 10000) -> Suite:
    """Outcome labels logged as MLflow feedback assessments on traces.

    The view is the trace's request (its root span inputs); the label is the latest valid
    feedback named `assessment_name` (bool, 0/1, or pass/fail text). Traces without one are
    skipped and counted in suite.meta["skipped"].
    """
    if traces is None:
        import mlflow

        traces = mlflow.search_traces(locations=[experiment_id] if experiment_id else None,
                                      max_results=max_results, return_type="list")
    items, skipped = [], 0
    where = f"mlflow:{experiment_id or 'traces'}"
    for n, tr in enumerate(traces, start=1):
        label = None
        for a in sorted(tr.info.assessments or [], key=lambda a: getattr(a, "create_time_ms", 0) or 0):
            fb = getattr(a, "feedback", None)
            if a.name != assessment_name or fb is None or getattr(a, "valid", True) is False:
                continue
            got = _feedback_label(fb.value)
            if got is not None:
                label = got
        if label is None:
            skipped += 1
            continue
        inputs = tr.data.spans[0].inputs if tr.data and tr.data.spans else None
        if inputs is None:
            raw = tr.info.request_preview or tr.data.request
            try:
                inputs = json.loads(raw) if isinstance(raw, str) else raw
            except (TypeError, json.JSONDecodeError):
                inputs = {"summary": str(raw)}
        if not isinstance(inputs, dict):
            inputs = {"summary": str(inputs)}
        fields = list(view_fields) if view_fields else [k for k in inputs if k in VIEW_FIELDS] or list(inputs)
        rec = {"id": tr.info.trace_id, "label": label, **{k: inputs.get(k, "") for k in fields},
               "meta": {"trace_id": tr.info.trace_id}}
        items.append((_record_to_item(rec, fields, path=where, line=n), n))
    suite = _suite(f"mlflow-{experiment_id or 'traces'}", items, where)
    suite.meta["skipped"] = skipped
    return suite


def ice_score_language(path: str | os.PathLike) -> str:
    """The language an ICE-Score grade file holds, from its name: humaneval_<lang>_grade.json.

    Args:
        path: the grade file; a name that does not follow the pattern gives its stem.
    """
    stem = Path(path).name.split(".", 1)[0].lower()
    m = re.fullmatch(r"humaneval[_-](.+?)[_-]grade", stem)
    return re.sub(r"[^a-z0-9+#]+", "-", m.group(1) if m else stem).strip("-") or "unknown"


def load_ice_score(path: str | os.PathLike | None = None, *, problems: int | None = None,
                   snippets: int | None = None) -> Suite:
    """ICE-Score HumanEval grades: per problem, generated snippets with execution 0/1 (the
    Python file: 161 problems x 20 snippets). The language comes from the file name
    (humaneval_java_grade.json -> suite "ice-score-humaneval-java").

    View: task = the problem's one-paragraph description (`simplified`); code = the full
    function as run (signature + docstring + generated body), so the docstring is not sent
    twice. Group = problem, so splits never mix one problem's snippets across train and
    test. `problems` / `snippets` take the first N of each (small runs on slow models).
    """
    p = Path(path) if path else shared_data_dir() / ICE_SCORE_RELPATH
    lang = ice_score_language(p)
    if not p.exists() and not p.is_symlink():
        raise InputError("ICE-Score file not found", path=str(p),
                         expected="../shared/data/ice-score/humaneval_python_grade.json")
    try:
        data = json.loads(read_text(p, "ICE-Score file"))
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg}", path=str(p), line=e.lineno) from None
    if not isinstance(data, list):
        raise InputError("top level is not a list of problems", path=str(p), expected="a JSON list")
    items: list[tuple[Item, int]] = []
    for n, prob in enumerate(data[:problems] if problems else data, start=1):
        for key in ("intent", "task_id"):
            if key not in prob:
                raise InputError(f"problem {n} lacks {key!r}", path=str(p), field=key,
                                 expected="ICE-Score humaneval grade records")
        tid = str(prob["task_id"])
        keys = sorted((k for k in prob if k.isdigit()), key=int)
        for k in keys[:snippets] if snippets else keys:
            grade = prob.get(f"grade-{k}")
            if not isinstance(grade, dict) or grade.get("execution") not in (0, 1):
                raise InputError(f"problem {tid} snippet {k} has no execution grade 0/1", path=str(p),
                                 field=f"grade-{k}.execution", expected="0 or 1")
            body = prob[k]
            code = prob["intent"] + ("    " + body if not body.startswith((" ", "\t")) else body)
            task = str(prob.get("simplified") or prob["intent"])
            item = Item(id=f"he{tid}-{k}", inputs={"task": task, "code": code},
                        gold={"label": "PASS" if grade["execution"] == 1 else "FAIL"}, group=f"he{tid}",
                        meta={"problem": tid, "snippet": k, "source": "ice-score", "language": lang})
            items.append((item, n))
    suite = _suite(f"ice-score-humaneval-{lang}", items, str(p))
    suite.meta["language"] = lang
    suite.meta["oracle"] = "execution"
    return suite
