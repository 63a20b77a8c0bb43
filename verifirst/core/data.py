"""A user's data as items: lists of dicts or dspy.Examples, a Suite, a JSONL/CSV file, a
Hugging Face dataset (an object, or an id loaded with `datasets`), a pandas DataFrame.

An item's id comes from its `id` field or, when there is none, from a hash of its content (the
same record gets the same id in every form, so it lands in the same split); a `group` field
keeps related items in one split, and copies of one record without an id share a group. Which keys reach the program: `inputs`, else the keys a
dspy.Example marks as inputs, else the program's input fields; the other keys stay with the metric.
"""
from __future__ import annotations

import csv
import hashlib
import io
import inspect
import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

from verifirst.core.errors import InputError
from verifirst.core.task import ITEM_ID, RECORD_KEYS, Item, Suite

FILE_SUFFIXES = (".jsonl", ".json", ".csv")
OWN_KEYS = ("id", "group")  # a record's own id and group: they name and group items


def content_id(record: dict) -> str:
    """A stable id from a record's content (sorted JSON), for data without an `id` field.

    Args:
        record: the record's fields (without `id`).
    """
    text = json.dumps(record, sort_keys=True, default=str, ensure_ascii=False)
    return "h" + hashlib.sha256(text.encode()).hexdigest()[:12]


def _forward_params(program: Any) -> list[inspect.Parameter]:
    """The named parameters of a program's forward (none for `forward(**kwargs)`)."""
    # Looked up statically: reading `module.forward` makes DSPy warn that it is called directly.
    fwd = inspect.getattr_static(program, "forward", None)
    if fwd is None:
        return []
    if hasattr(fwd, "__get__"):  # a function, staticmethod or classmethod on the class: bind it
        fwd = fwd.__get__(program, type(program))
    return [p for p in inspect.signature(fwd).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def program_inputs(program: Any) -> list[str]:
    """The input field names of a DSPy program: its signature's, else its forward's parameters.

    Args:
        program: a dspy.Module (or a Predict / ChainOfThought).
    """
    return _declared_inputs(program, required=False) or []


def required_inputs(program: Any) -> list[str] | None:
    """The input fields a program cannot run without, or None when they cannot be known.

    Its signature's input fields; else forward's parameters without a default; else, for a
    `forward(**kwargs)` around a single predictor, that predictor's input fields. With several
    predictors, later ones may take what earlier ones produce, so nothing is claimed.

    Args:
        program: a dspy.Module (or a Predict / ChainOfThought).
    """
    return _declared_inputs(program, required=True)


def _declared_inputs(program: Any, *, required: bool) -> list[str] | None:
    """The signature's input fields; else forward's parameters (only those without a default when
    `required`); else the first predictor's inputs (when `required`, only for a single predictor:
    None then means they cannot be known)."""
    sig = getattr(program, "signature", None)
    if sig is not None and getattr(sig, "input_fields", None):
        return list(sig.input_fields)
    params = _forward_params(program)
    if params:
        return [p.name for p in params if not required or p.default is p.empty]
    preds = program.predictors() if hasattr(program, "predictors") else []
    if required and len(preds) != 1:
        return None
    return list(preds[0].signature.input_fields) if preds else []


def check_inputs_cover_program(keys: Sequence[str], required: Sequence[str] | None, how: str) -> None:
    """Refuse inputs that leave out a field the program needs (DSPy would only log it and run).

    Args:
        keys: the fields that will reach the program.
        required: the program's required input fields (None: unknown, nothing is checked).
        how: where the keys came from, for the message.
    """
    missing = [k for k in required or () if k not in keys]
    if missing:
        raise InputError(f"the program needs input field(s) {', '.join(map(repr, missing))}, but {how} "
                         f"gives only {', '.join(map(repr, keys))}", field="inputs",
                         expected=f"inputs that include {', '.join(required)}")


def _read_jsonl(path: Path) -> list[dict]:
    from verifirst.core.textfile import iter_jsonl, read_text

    text = read_text(path, "data file")
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"not JSON: {e.msg}", path=str(path), line=e.lineno,
                             expected="a JSON list of objects") from None
        except RecursionError:  # thousands of nested brackets
            raise InputError("JSON nested too deeply", path=str(path), expected="a JSON list of objects") from None
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise InputError("not a list of objects", path=str(path), expected="a JSON list of objects")
        return data
    return [rec for _, rec in iter_jsonl(text, str(path))]


def _read_csv(path: Path) -> list[dict]:
    from verifirst.core.textfile import read_text

    with io.StringIO(read_text(path, "data file"), newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames:
            raise InputError("no header row", path=str(path), line=1, expected="a CSV with a header")
        rows = []
        for row in reader:
            if None in row:  # more cells than the header names
                raise InputError("more cells than header columns", path=str(path), line=reader.line_num,
                                 expected=f"{len(reader.fieldnames)} cells")
            rows.append(dict(row))
        return rows


def load_hf(dataset_id: str, split: str | None = None) -> list[dict]:
    """Records of a Hugging Face dataset by id (online or from the local cache).

    Args:
        dataset_id: the dataset id, optionally `id:split` (default split: train, else the first).
        split: the split to load (overrides one in the id).
    """
    name, _, id_split = dataset_id.partition(":")
    split = split or id_split or None
    try:
        import datasets
    except ImportError:
        raise InputError(f"{dataset_id!r} is neither a file nor loadable: the `datasets` package is not "
                         f"installed", field="data", expected="a JSONL/CSV path, records, or `pip install "
                         "datasets` for a Hugging Face dataset id") from None
    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as e:
        raise InputError(f"Hugging Face dataset {name!r} could not be loaded: {type(e).__name__}: {str(e)[:300]}",
                         field="data", expected="a dataset id available online or in the local cache") from None
    if isinstance(ds, datasets.DatasetDict):  # no split named: train, else the first
        splits = list(ds.keys())
        ds = ds["train"] if "train" in splits else ds[splits[0]]
    return _records_of_dataset(ds)


def _records_of_dataset(ds: Any) -> list[dict]:
    return ds.to_list() if hasattr(ds, "to_list") else [dict(r) for r in ds]


def _is_dataset(data: Any) -> bool:
    """A datasets.Dataset (or anything shaped like one: column names and dict rows)."""
    return isinstance(getattr(data, "column_names", None), list) and hasattr(data, "__iter__")


def _is_dataframe(data: Any) -> bool:
    """A pandas DataFrame (recognised by shape, so pandas need not be installed)."""
    return hasattr(data, "columns") and hasattr(data, "iloc") and callable(getattr(data, "to_dict", None))


def records_of(data: Any) -> tuple[list, str, str | None]:
    """(records, a name for the data, the file they came from).

    Args:
        data: records, a path, a dataset object, a DataFrame or a Hugging Face dataset id.
    """
    if _is_dataset(data):
        return _records_of_dataset(data), getattr(getattr(data, "info", None), "dataset_name", None) or "dataset", None
    if _is_dataframe(data):  # iterating one yields its column names, not its rows
        return data.to_dict("records"), "dataframe", None
    if isinstance(data, (str, Path)):
        path = Path(data)
        if path.is_dir():  # a directory of task folders (prompt.md, policies): suite "iac-tasks"
            from verifirst.core.registry import component

            suite = component("suite", "iac-tasks")(path)
            return list(suite.items), path.name, str(path)
        if path.suffix.lower() in FILE_SUFFIXES or path.exists():
            if not path.is_file() and path.is_symlink():  # a loop or a broken link: say which
                from verifirst.core.textfile import read_text

                read_text(path, "data file")
            if not path.is_file():
                raise InputError("no such file", path=str(path), field="data", expected="a JSONL, JSON or CSV file")
            recs = _read_csv(path) if path.suffix.lower() == ".csv" else _read_jsonl(path)
            return recs, path.stem, str(path)
        return load_hf(str(data)), str(data), None
    if isinstance(data, Iterable) and not isinstance(data, (dict, bytes)):
        return list(data), "data", None
    raise InputError(f"cannot read data from a {type(data).__name__}", field="data",
                     expected="records (dicts or dspy.Examples), a Suite, a JSONL/CSV path or a dataset")


def to_suite(data: Any, *, inputs: Sequence[str] | None = None, program: Any = None,
             name: str | None = None) -> Suite:
    """The data as a Suite of Items.

    Args:
        data: a Suite, a list of Items, dicts or dspy.Examples, a JSONL/JSON/CSV path, a
            directory of task folders (suite "iac-tasks"), a datasets.Dataset, a pandas
            DataFrame, or a Hugging Face dataset id.
        inputs: the keys that reach the program (default: an Example's input keys, else the
            program's input fields).
        program: the program, for its input fields.
        name: the suite's name (default: from the file or dataset).
    """
    if isinstance(data, Suite):
        return data
    records, default_name, source = records_of(data)
    if records and all(isinstance(r, Item) for r in records):
        return Suite(name or default_name, list(records))
    keys = list(inputs) if inputs else None
    items: list[Item] = []
    seen: dict[str, int] = {}
    contents: list[str | None] = []  # each item's content id; None where the record has an id
    required = required_inputs(program) if program is not None else None
    declared = program_inputs(program) if program is not None else []
    if keys is not None:
        check_inputs_cover_program(keys, required, "inputs=")
    for n, rec in enumerate(records, 1):
        where = {"path": source, "line": n + 1 if source and source.endswith(".csv") else n} if source \
            else {"field": f"data[{n - 1}]"}
        rec_keys = keys
        if hasattr(rec, "toDict") and hasattr(rec, "inputs"):  # a dspy.Example
            if rec_keys is None and getattr(rec, "_input_keys", None):
                rec_keys = list(rec._input_keys)
                check_inputs_cover_program(rec_keys, required, f"data[{n - 1}].with_inputs()")
            rec = rec.toDict()
        if not isinstance(rec, dict):
            raise InputError(f"a {type(rec).__name__}, not a record", **where, expected="a dict or dspy.Example")
        rec = {k: v for k, v in rec.items() if k != ITEM_ID}
        if rec_keys is None:
            rec_keys = declared
        if not rec_keys:
            raise InputError("which fields are inputs is unknown", **where,
                             expected="inputs=[...], Examples with .with_inputs(), or a program with input fields")
        missing = [k for k in rec_keys if k not in rec]
        if missing:
            raise InputError(f"record has no input field {missing[0]!r}", **where,
                             expected=f"fields {', '.join(rec_keys)}")
        taken = [k for k in rec_keys if k in OWN_KEYS]
        if taken:  # the item's id and split group, never what the program reads
            raise InputError(f"input {taken[0]!r} is the record's {'id' if taken[0] == 'id' else 'split group'}, "
                             "not a field the program reads", field="inputs",
                             expected="input fields other than id and group (rename the field if the program "
                                      "needs it)")
        own = {k: rec.pop(k) for k in OWN_KEYS if k in rec}
        raw_id, group = own.get("id"), own.get("group")
        content = content_id(rec) if raw_id in (None, "") else None
        iid = str(raw_id) if content is None else content
        if content is not None and iid in seen:  # the same content twice: stable, distinct ids
            seen[iid] += 1
            iid = f"{iid}-{seen[iid]}"
        else:
            seen.setdefault(iid, 0)
        items.append(_item(iid, rec, rec_keys, group=str(group) if group not in (None, "") else None, own=own))
        contents.append(content)
    if not items:
        raise InputError("no records", path=source, field="data", expected="at least one record")
    _group_repeated_content(items, contents)
    return Suite(name or default_name, items)


def _item(iid: str, rec: dict, input_keys: Sequence[str], group: str | None, own: dict) -> Item:
    """One record as an Item; the record's own id or group kept for its example (for the metric)."""
    inputs = {k: rec[k] for k in input_keys}
    gold = {k: v for k, v in rec.items() if k not in input_keys}
    return Item(iid, inputs, gold, group=group, meta={RECORD_KEYS: own} if own else {})


def _group_repeated_content(items: list[Item], contents: list[str | None]) -> None:
    """Copies of one record (no id, no group of their own) share a group: their content id.

    Each copy has its own item id, so without a shared group the splitter would place the copies
    apart and the same record would be both trained on and held out.
    """
    counts = Counter(c for c in contents if c is not None)
    for item, content in zip(items, contents):
        if content is not None and counts[content] > 1 and item.group is None:
            item.group = content
