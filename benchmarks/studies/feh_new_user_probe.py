"""FEH on held-out bash scripts, tried as a new user would: each InterCode-Bash gold command
judged against another task's gold (rotated by `offset`, never equivalent) and against itself.

Run from benchmarks/studies/feh_quality.py (it passes the parameters fitted on NL2SH-ALFA: InterCode
is never fitted on). Each pair runs in the task's own fixture and in the empty one (a script
whose files are missing: the setting where quiet or failing golds matched anything). Counts
false equivalences with INCONCLUSIVE off (`before`) and on (`after`).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from verifirst.verifiers.bash._feh_compare import FehParams, decide

FIXTURES = ("own", "empty")


def default_intercode_dir() -> Path:
    """../shared/data/intercode-bash next to the repository (read there, never copied in)."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "intercode-bash"


def probe_pairs(items, offset: int = 10, fixture: str = "own") -> list[dict]:
    """Rotated pairs (gold_i vs gold_{i+offset}, label False) and self pairs (label True).

    Args:
        items: suite items with gold command and fixture.
        offset: how far the other task is; pairs whose commands happen to be equal are skipped.
        fixture: "own" (the item's fixture) or a fixture name for every pair.
    """
    n, out = len(items), []
    for i, it in enumerate(items):
        fx = it.gold["fixture"] if fixture == "own" else fixture
        gold, other = it.gold["command"], items[(i + offset) % n].gold["command"]
        out.append({"id": f"{it.id}:self", "gold": gold, "candidate": gold, "fixture": fx, "label": True})
        if other.strip() != gold.strip():
            out.append({"id": f"{it.id}:rot{offset}", "gold": gold, "candidate": other, "fixture": fx,
                        "label": False})
    return out


def count(feats, pairs, params: FehParams) -> dict:
    """Verdict counts per kind of pair: equivalent, not_equivalent, inconclusive."""
    out = {kind: {"pairs": 0, "equivalent": 0, "not_equivalent": 0, "inconclusive": 0}
           for kind in ("rotated", "self")}
    for f, p in zip(feats, pairs):
        d = decide(f, params)
        row = out["self" if p["label"] else "rotated"]
        row["pairs"] += 1
        row["inconclusive" if d.inconclusive else "equivalent" if d.equivalent else "not_equivalent"] += 1
    rot = out["rotated"]
    rot["false_equivalent"] = rot.pop("equivalent")
    rot["false_equivalence_rate"] = round(rot["false_equivalent"] / rot["pairs"], 3) if rot["pairs"] else 0.0
    return out


def new_user_probe(data_dir: Path, before: FehParams, after: FehParams, cache, embed: Callable,
                   offset: int = 10, workers: int = 2) -> dict:
    """Run the probe; `before`/`after` are the NL2SH-fitted parameters of each mode.

    Args:
        data_dir: the InterCode-Bash data dir (nl2bash_fs_N.json, test_queries.json).
        before: parameters fitted with INCONCLUSIVE off (forced off here too).
        after: parameters fitted with INCONCLUSIVE on (forced on).
        cache: a RunCache (_feh_runs) for the sandbox runs.
        embed: texts -> vectors (an _feh_runs.EmbedCache).
        offset: rotation distance between a task and its wrong candidate.
        workers: sandbox runs in parallel.
    """
    from verifirst.benchmarks.studies._feh_runs import pair_features, run_pairs
    from verifirst.benchmarks.intercode import load_intercode

    items = load_intercode(data_dir).items
    report: dict = {"data": "InterCode-Bash (held out: never fitted on)", "tasks": len(items),
                    "offset": offset, "params_before": replace(before, inconclusive=False).as_dict(),
                    "params_after": replace(after, inconclusive=True).as_dict(), "before": {}, "after": {}}
    for fx in FIXTURES:
        pairs = probe_pairs(items, offset, fx)
        runs, info = run_pairs(pairs, cache, workers=workers)
        feats = pair_features(pairs, runs, embed)
        report["before"][fx] = count(feats, pairs, replace(before, inconclusive=False))
        report["after"][fx] = count(feats, pairs, replace(after, inconclusive=True))
        report.setdefault("run", {})[fx] = info
    return report
