"""NL2SH-ALFA test suite: 300 prompts, each with two gold commands (gold, gold2).

Read from the files the PyPI package icalfa 0.3.6 ships (`assets/datasets/nl2bash_fs_N.json`,
file N runs in fixture "nl2sh-fsN"), located with find_spec so the package (which pulls in
docker) is never imported; or from a Hugging Face dataset (local dir or hub name).
"""
from __future__ import annotations

import csv
import importlib.util
import io
import json
from pathlib import Path
from typing import Any, Iterable

from verifirst.core.textfile import read_text
from verifirst.core.errors import InputError
from verifirst.core.task import Item, Suite

NL2SH_FILES = 5
# Rows per icalfa file, in order: a flat HF test split of 300 rows maps onto fixtures by these.
NL2SH_SPLITS = (153, 49, 57, 23, 18)
HF_NAME = "westenfelder/NL2SH-ALFA"
_ALIASES = {"query": ("query", "nl", "prompt", "task"), "gold": ("gold", "bash", "command"),
            "gold2": ("gold2", "bash2", "alt", "gold_2"), "difficulty": ("difficulty",)}


def json_array_with_lines(path: str | Path) -> list[tuple[int, Any]]:
    """Parse a JSON array; return (line of element start, element) pairs for error messages."""
    p = Path(path)
    text = read_text(p, "JSON file")
    dec = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    if pos >= len(text) or text[pos] != "[":
        raise InputError("not a JSON array", path=str(p), line=text.count("\n", 0, pos) + 1,
                         expected="a JSON array of task objects")
    out: list[tuple[int, Any]] = []
    pos = _skip_ws(text, pos + 1)
    while pos < len(text) and text[pos] != "]":
        line = text.count("\n", 0, pos) + 1
        try:
            obj, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(f"invalid JSON: {e.msg}", path=str(p), line=e.lineno) from None
        out.append((line, obj))
        pos = _skip_ws(text, end)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
        elif pos < len(text) and text[pos] != "]":
            raise InputError("expected ',' or ']' between array elements", path=str(p),
                             line=text.count("\n", 0, pos) + 1)
    if pos >= len(text):
        raise InputError("unterminated JSON array", path=str(p), line=text.count("\n") + 1)
    return out


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def require_str(row: Any, key: str, *, path: str, line: int | None, index: int,
                aliases: Iterable[str] | None = None, optional: bool = False) -> str | None:
    """The string under `key` (or an alias); InputError naming file, line and field otherwise."""
    if not isinstance(row, dict):
        raise InputError(f"element {index} is {type(row).__name__}", path=path, line=line,
                         field=f"[{index}]", expected="an object")
    for k in (aliases or (key,)):
        if k in row:
            v = row[k]
            if not isinstance(v, str) or not v.strip():
                raise InputError(f"'{k}' is {'empty' if isinstance(v, str) else type(v).__name__}",
                                 path=path, line=line, field=f"[{index}].{k}", expected="a non-empty string")
            return v
    if optional:
        return None
    raise InputError(f"missing '{key}'", path=path, line=line, field=f"[{index}].{key}",
                     expected="a non-empty string")


def icalfa_dataset_dir() -> Path:
    spec = importlib.util.find_spec("icalfa")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the NL2SH-ALFA test set ships in the PyPI package icalfa",
                         field="icalfa", expected="pip install --no-deps icalfa==0.3.6")
    d = Path(list(spec.submodule_search_locations)[0]) / "assets" / "datasets"
    if not d.is_dir():
        raise InputError("icalfa is installed but has no assets/datasets", path=str(d),
                         expected="icalfa==0.3.6")
    return d


def _item(index: int, row: dict, fixture: str, source: str, line: int | None) -> Item:
    q = require_str(row, "query", path=source, line=line, index=index, aliases=_ALIASES["query"])
    g = require_str(row, "gold", path=source, line=line, index=index, aliases=_ALIASES["gold"])
    g2 = require_str(row, "gold2", path=source, line=line, index=index, aliases=_ALIASES["gold2"],
                     optional=True)
    diff = next((row[k] for k in _ALIASES["difficulty"] if k in row), None)
    iid = f"nl2sh-{index:03d}"
    gold = {"command": g, "fixture": fixture}
    if g2 is not None:
        gold["command2"] = g2
    meta = {"source": source, "difficulty": diff}
    if line is not None:
        meta["line"] = line
    return Item(id=iid, inputs={"task": q}, gold=gold, group=iid, meta=meta)


def load_nl2sh(source: str | Path | None = None) -> Suite:
    """The 300-item test suite. `source`: None (icalfa package), a dir of nl2bash_fs_N.json,
    a Hugging Face dataset dir (csv/json/jsonl/parquet) or a hub name like westenfelder/NL2SH-ALFA."""
    if source is None:
        return _from_icalfa_dir(icalfa_dataset_dir())
    p = Path(source)
    if p.is_dir() and (p / "nl2bash_fs_1.json").exists():
        return _from_icalfa_dir(p)
    if p.is_dir():
        return _from_flat_rows(_hf_dir_rows(p), str(p))
    if p.exists():
        return _from_flat_rows(_read_table(p), str(p))
    if "/" in str(source) and not str(source).startswith((".", "/")):
        return _from_flat_rows(_hf_hub_rows(str(source)), f"hf:{source}")
    raise InputError("no such dataset path", path=str(source),
                     expected="a dir with nl2bash_fs_N.json, a dataset file, or a Hugging Face name")


def _from_icalfa_dir(d: Path) -> Suite:
    items: list[Item] = []
    for n in range(1, NL2SH_FILES + 1):
        f = d / f"nl2bash_fs_{n}.json"
        for line, row in json_array_with_lines(f):
            items.append(_item(len(items), row, f"nl2sh-fs{n}", str(f), line))
    return Suite("nl2sh-alfa", items, description="NL2SH-ALFA test (icalfa 0.3.6)",
                 meta={"source": str(d)})


def fixture_for_row(index: int, total: int) -> str:
    """Flat HF rows keep icalfa's order; map a row to its file's fixture."""
    if total != sum(NL2SH_SPLITS):
        return "nl2sh-fs1"
    acc = 0
    for n, cnt in enumerate(NL2SH_SPLITS, start=1):
        acc += cnt
        if index < acc:
            return f"nl2sh-fs{n}"
    raise IndexError(index)


def _from_flat_rows(rows: list[tuple[int | None, dict]], source: str) -> Suite:
    items = [_item(i, row, fixture_for_row(i, len(rows)), source, line) for i, (line, row) in enumerate(rows)]
    if not items:
        raise InputError("dataset has no rows", path=source, expected="the 300-row test split")
    return Suite("nl2sh-alfa", items, description="NL2SH-ALFA test", meta={"source": source})


def _read_table(p: Path) -> list[tuple[int | None, dict]]:
    suf = p.suffix.lower()
    if suf == ".json":
        return json_array_with_lines(p)
    if suf == ".jsonl":
        rows = []
        for ln, text in enumerate(read_text(p, "dataset file").splitlines(), start=1):
            if text.strip():
                try:
                    rows.append((ln, json.loads(text)))
                except json.JSONDecodeError as e:
                    raise InputError(f"invalid JSON: {e.msg}", path=str(p), line=ln) from None
        return rows
    if suf == ".csv":
        with io.StringIO(read_text(p, "dataset file"), newline="") as fh:
            reader = csv.DictReader(fh)
            # line of a record = reader.line_num after it was read (multi-line cells span lines)
            rows = []
            start = 2
            for row in reader:
                rows.append((start, dict(row)))
                start = reader.line_num + 1
            return rows
    if suf == ".parquet":
        try:
            import pandas as pd
        except ImportError:
            raise InputError("reading parquet needs pandas and pyarrow", path=str(p)) from None
        return [(None, r) for r in pd.read_parquet(p).to_dict(orient="records")]
    raise InputError(f"unsupported file type {suf!r}", path=str(p), expected=".json, .jsonl, .csv or .parquet")


def _hf_dir_rows(d: Path) -> list[tuple[int | None, dict]]:
    """A dataset saved or cloned locally: prefer a file whose name says test."""
    files = sorted(f for f in d.rglob("*") if f.suffix.lower() in (".csv", ".json", ".jsonl", ".parquet"))
    tests = [f for f in files if "test" in f.name.lower()]
    pick = tests or files
    if not pick:
        raise InputError("no csv/json/jsonl/parquet file in the dataset dir", path=str(d))
    return _read_table(pick[0])


def _hf_hub_rows(name: str, split: str = "test") -> list[tuple[int | None, dict]]:
    try:
        import datasets  # noqa: F401
    except ImportError:
        raise InputError(f"loading {name!r} from the hub needs the `datasets` package and network",
                         field="source", expected="pip install datasets, or a local path") from None
    from datasets import load_dataset

    try:
        ds = load_dataset(name, split=split)
    except Exception as e:  # network, auth, missing split
        raise InputError(f"could not load {name!r} split {split!r}: {e}", field="source") from None
    return [(None, dict(r)) for r in ds]


def nl2sh_pairs(suite: Suite, offset: int = 10) -> list[dict]:
    """S1's FEH quality pairs: (gold, gold2) labelled equivalent, and (gold_i, gold2_{i+offset})
    labelled non-equivalent, both run in item i's fixture."""
    items = [it for it in suite.items if "command2" in it.gold]
    n = len(items)
    pairs = []
    for i, it in enumerate(items):
        pairs.append({"id": f"{it.id}:eq", "group": it.group_key, "task": it.inputs["task"],
                      "gold": it.gold["command"], "candidate": it.gold["command2"],
                      "fixture": it.gold["fixture"], "label": True})
    for i, it in enumerate(items):
        other = items[(i + offset) % n]
        pairs.append({"id": f"{it.id}:rot{offset}", "group": it.group_key, "task": it.inputs["task"],
                      "gold": it.gold["command"], "candidate": other.gold["command2"],
                      "fixture": it.gold["fixture"], "label": False})
    return pairs
