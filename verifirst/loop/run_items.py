"""What a run ran on: run_dir/items.jsonl, one line per item of the run's splits.

The driver writes it for every run (the Python API, an experiment file, a calibration), so the
reports and the inspection view show each item's inputs without rebuilding the suite. Each line
holds what a reviewer needs: the item's id, its split, its inputs and gold, its group when it has
one, and its meta when that is small JSON. Credentials are masked before anything is written.

This module sits low in the kernel: it imports only atomic and redaction.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from verifirst.core import atomic
from verifirst.core.redaction import redact, register_env_secrets

ITEMS_FILE = "items.jsonl"
SPLIT_ORDER = ("train", "val", "test")
META_MAX_CHARS = 2000  # an item's meta longer than this (as JSON) is left out of the file


def _meta(meta: Any) -> dict | None:
    """The item's meta when it is a non-empty dict that JSON holds as it is and is small; else None."""
    if not isinstance(meta, dict) or not meta:
        return None
    try:
        text = json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return meta if len(text) <= META_MAX_CHARS else None


def item_record(item: Any, split: str) -> dict:
    """One line of items.jsonl for an item, its credentials masked.

    Args:
        item: a verifirst Item (id, inputs, gold, group, meta).
        split: the split the manifest puts it in.
    """
    rec: dict[str, Any] = {"id": str(item.id), "split": split,
                           "inputs": dict(getattr(item, "inputs", None) or {}),
                           "gold": dict(getattr(item, "gold", None) or {})}
    group = getattr(item, "group", None)
    if group is not None:
        rec["group"] = str(group)
    meta = _meta(getattr(item, "meta", None))
    if meta is not None:
        rec["meta"] = meta
    return redact(rec)


def write_items(run_dir: str | Path, items: Sequence[Any], manifest: Any) -> Path:
    """Write run_dir/items.jsonl atomically: one JSON line per item in the manifest's splits,
    train first, then val and test, each in the order of `items`; items in no split are left out.

    Values pass through verifirst.core.redaction.redact (a credential-named key's value becomes ***,
    every registered secret inside a string is masked, the values of credential-named environment
    variables set by now among them); values JSON cannot hold are written as their str(). The
    file is deterministic, so a resumed run rewrites the same bytes.

    Args:
        run_dir: the run directory.
        items: every item of the run (those the manifest splits).
        manifest: the run's SplitManifest (its split_of(id) names each item's split).

    Returns:
        The path written.
    """
    register_env_secrets()  # a key exported after the first scan is masked here too
    by_split: dict[str, list[dict]] = {}
    for it in items:
        split = manifest.split_of(str(it.id))
        if split is not None:
            by_split.setdefault(split, []).append(item_record(it, split))
    order = [s for s in SPLIT_ORDER if s in by_split] + sorted(set(by_split) - set(SPLIT_ORDER))
    return atomic.write_jsonl(Path(run_dir) / ITEMS_FILE, [r for s in order for r in by_split[s]])


def read_items(run_dir: str | Path) -> dict[str, dict]:
    """The records of run_dir/items.jsonl by item id ({} when the file is missing or unreadable);
    lines that are not JSON objects with an id are skipped, and a repeated id keeps its last line.

    Args:
        run_dir: the run directory.
    """
    path = Path(run_dir) / ITEMS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, dict] = {}
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "id" in rec:
            out[str(rec["id"])] = rec
    return out
