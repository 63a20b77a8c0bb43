"""IaC-Eval suites: v1 CSV (and its Hugging Face copy) and the v2 CSV layout.

Every item: inputs = {"prompt"}, gold = {"reference", "rego_policy", "intent"},
group = the task id, meta = {"difficulty", "resource", "source", ...}.
"""
from __future__ import annotations

import csv
import hashlib
import os
from pathlib import Path
from typing import Iterable

from verifirst.core.errors import InputError
from verifirst.core.task import Item, Suite

V1_COLUMNS = ("Resource", "Prompt", "Rego intent", "Difficulty", "Reference output", "Intent")
V2_COLUMNS = ("task_id", "difficulty", "resource", "prompt", "intent", "rego_policy", "reference_output")
V2_OPTIONAL = ("suite", "opa_input_path")
HF_V1_DATASET = "autoiac-project/iac-eval"
HF_V1_FILE = "data.csv"
DEV40_RELPATH = Path("iac-eval-v1") / "iac_eval_v1_dev40.csv"


def shared_data_dir() -> Path:
    """../shared/data beside the repository root (tests and benchmarks read data from there)."""
    env = os.environ.get("VERIFIRST_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def dev40_path() -> Path:
    return shared_data_dir() / DEV40_RELPATH


def _rows(path: Path, required: Iterable[str]) -> list[dict]:
    csv.field_size_limit(1 << 28)  # reference configs and policies are long cells
    try:
        fh = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read CSV: {e.strerror}", path=str(path)) from None
    with fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        for col in required:
            if col not in header:
                raise InputError(f"missing column {col!r}", path=str(path), line=1, field=col,
                                 expected="columns " + ", ".join(required))
        return list(reader)


def _difficulty(value: str, path: Path, line: int) -> int | str:
    v = (value or "").strip()
    try:
        return int(float(v))
    except ValueError:
        if not v:
            raise InputError("empty difficulty", path=str(path), line=line, field="difficulty",
                             expected="an integer level") from None
        return v


def load_iac_eval_v1(path: str | os.PathLike, *, source: str = "iac-eval-v1") -> Suite:
    """IaC-Eval v1 CSV. Rows have no id column: the id is the row number plus a short hash of
    the prompt, so ids stay stable when a subset of rows is taken."""
    p = Path(path)
    items: list[Item] = []
    for n, row in enumerate(_rows(p, V1_COLUMNS)):
        line = n + 2  # header is line 1
        prompt = (row.get("Prompt") or "").strip()
        if not prompt:
            raise InputError("empty prompt", path=str(p), line=line, field="Prompt")
        digest = hashlib.sha1(prompt.encode()).hexdigest()[:8]
        tid = f"v1-{n:04d}-{digest}"
        items.append(Item(
            id=tid, inputs={"prompt": prompt},
            gold={"reference": row["Reference output"], "rego_policy": row["Rego intent"],
                  "intent": row["Intent"]},
            group=tid,
            meta={"difficulty": _difficulty(row["Difficulty"], p, line), "resource": row["Resource"],
                  "source": source, "row": n}))
    return Suite(source, items, description=f"IaC-Eval v1 from {p.name}")


def load_iac_eval_v2(path: str | os.PathLike, *, source: str = "iac-eval-v2") -> Suite:
    """IaC-Eval v2 CSV layout: task_id, suite, difficulty, resource, prompt, intent, rego_policy,
    reference_output, opa_input_path, ... (extra columns land in meta)."""
    p = Path(path)
    items: list[Item] = []
    seen: dict[str, int] = {}
    for n, row in enumerate(_rows(p, V2_COLUMNS)):
        line = n + 2
        tid = (row.get("task_id") or "").strip()
        if not tid:
            raise InputError("empty task_id", path=str(p), line=line, field="task_id")
        if tid in seen:
            raise InputError(f"duplicate task_id {tid!r} (first on line {seen[tid]})", path=str(p),
                             line=line, field="task_id", expected="unique task ids")
        seen[tid] = line
        if not (row.get("prompt") or "").strip():
            raise InputError("empty prompt", path=str(p), line=line, field="prompt")
        extra = {k: v for k, v in row.items() if k not in V2_COLUMNS and k is not None}
        items.append(Item(
            id=tid, inputs={"prompt": row["prompt"].strip()},
            gold={"reference": row["reference_output"], "rego_policy": row["rego_policy"],
                  "intent": row["intent"]},
            group=tid,
            meta={"difficulty": _difficulty(row["difficulty"], p, line), "resource": row["resource"],
                  "source": source, **extra}))
    return Suite(source, items, description=f"IaC-Eval v2 from {p.name}")


def load_iac_eval_v1_hf(revision: str | None = None, cache_dir: str | None = None) -> Suite:
    """The full IaC-Eval v1 (458 tasks) from Hugging Face; needs network or a warm HF cache."""
    from huggingface_hub import hf_hub_download

    local = hf_hub_download(HF_V1_DATASET, HF_V1_FILE, repo_type="dataset", revision=revision,
                            cache_dir=cache_dir)
    return load_iac_eval_v1(local, source="iac-eval-v1-hf")


def load_dev40() -> Suite:
    p = dev40_path()
    if not p.exists():
        raise InputError("IaC-Eval v1 dev40 CSV not found", path=str(p),
                         expected="../shared/data/iac-eval-v1/iac_eval_v1_dev40.csv or "
                                  "VERIFIRST_SHARED_DATA pointing at the data folder")
    return load_iac_eval_v1(p, source="iac-eval-v1-dev40")
