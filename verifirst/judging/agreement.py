"""Do the humans agree with each other? Krippendorff's α among labellers, and which labels a judge fits.

Records that carry two or more human labels of one item (several MLflow assessments of one trace,
or an outcome record's {labeller: label} mapping) are measured before a judge is fitted to them:
Krippendorff's α (nominal, any number of labellers, missing labels allowed) with a percentile
bootstrap interval over items, and the items the labellers disagree on. A label policy then
decides which items keep which label (and so which items train and test):

- "majority": the label most labellers gave, when it is a strict plurality (a tie drops the item);
- "unanimous": items whose two or more labels all agree (one label cannot show agreement: dropped);
- a labeller's name: that labeller's label (items they did not label are dropped).

α (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability"): with o_ck the coincidence
counts (each pair of labels within an item weighted 1 / (m_u − 1), m_u the item's label count) and
n_c their margins, α = 1 − (n − 1) Σ_{c≠k} o_ck / Σ_{c≠k} n_c n_k. Items with fewer than two
labels are not pairable and do not enter α.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from verifirst.core.errors import InputError

POLICIES = ("majority", "unanimous")


def krippendorff_alpha(units: Sequence[Sequence[Hashable]]) -> float:
    """Krippendorff's α (nominal) of items given as lists of their labels (missing ones left out).

    Args:
        units: one list of labels per item; items with fewer than two labels are skipped.

    Returns:
        α (NaN when fewer than two labels are pairable or only one value occurs).
    """
    o: Counter = Counter()
    for labels in units:
        m = len(labels)
        if m < 2:
            continue
        counts = Counter(labels)
        for c, nc in counts.items():
            for k, nk in counts.items():
                o[(c, k)] += (nc * (nk - (c == k))) / (m - 1)
    n_c: Counter = Counter()
    for (c, _), v in o.items():
        n_c[c] += v
    n = sum(n_c.values())
    disagree = sum(v for (c, k), v in o.items() if c != k)
    expected = sum(n_c[c] * n_c[k] for c in n_c for k in n_c if c != k)
    if n <= 1 or expected == 0:
        return float("nan")
    return float(1 - (n - 1) * disagree / expected)


def alpha_interval(units: Sequence[Sequence[Hashable]], n_boot: int = 2000, seed: int = 0,
                   confidence: float = 0.95) -> list[float]:
    """Percentile bootstrap interval of α over items resampled with replacement (NaN resamples dropped).

    Args:
        units: one list of labels per pairable item.
        n_boot: bootstrap resamples.
        seed: the bootstrap seed.
        confidence: the interval's level.
    """
    units = [list(u) for u in units if len(u) >= 2]
    if not units:
        return [float("nan"), float("nan")]
    rng = np.random.default_rng(seed)
    vals = [v for v in (krippendorff_alpha([units[j] for j in rng.integers(0, len(units), len(units))])
                        for _ in range(n_boot)) if v == v]
    if not vals:
        return [float("nan"), float("nan")]
    a = (1 - confidence) / 2
    lo, hi = np.quantile(vals, [a, 1 - a])
    return [float(lo), float(hi)]


def _human(a: Any) -> bool:
    return str(getattr(getattr(a, "source", None), "source_type", "")).upper().endswith("HUMAN")


def trace_labels(trace: Any, name: str = "label") -> dict[str, Any]:
    """{labeller: value} of a trace's valid human assessments named `name` (the latest per labeller).

    Args:
        trace: an mlflow Trace (read through trace.info.assessments).
        name: the assessment name.
    """
    found = sorted((a for a in (getattr(trace.info, "assessments", None) or [])
                    if a.name == name and getattr(a, "valid", True) is not False and _human(a)),
                   key=lambda a: getattr(a, "last_update_time_ms", None) or getattr(a, "create_time_ms", 0) or 0)
    out: dict[str, Any] = {}
    for a in found:
        value = a.feedback.value if getattr(a, "feedback", None) is not None else (
            a.expectation.value if getattr(a, "expectation", None) is not None else getattr(a, "value", None))
        out[str(getattr(a.source, "source_id", None) or "unknown")] = value
    return out


def _record_labels(records: Sequence[Any], field: str, name: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(records):
        if hasattr(r, "info") and hasattr(r.info, "assessments"):  # an MLflow trace
            rid, labels = str(getattr(r.info, "trace_id", None) or getattr(r.info, "request_id", i)), trace_labels(r, name)
        elif isinstance(r, Mapping):
            rid, labels = str(r.get("id", i)), r.get(field)
        elif hasattr(r, "gold") and hasattr(r, "id"):  # a vf.Item
            rid, labels = str(r.id), r.gold.get(field)
        else:
            raise InputError(f"record {i} is a {type(r).__name__}", field="records",
                             expected=f"a dict with {field!r}, a vf.Item with gold[{field!r}] or an MLflow trace")
        if not isinstance(labels, Mapping):
            raise InputError(f"record {rid!r} has no {field!r} mapping", field=field,
                             expected="{labeller: label}, e.g. {'alice': 'PASS', 'bob': 'FAIL'}")
        if rid in out:
            raise InputError(f"record id {rid!r} repeats", field="records", expected="one record per item")
        out[rid] = {str(k): v for k, v in labels.items() if v is not None}
    if not out:
        raise InputError("no records", field="records", expected="records with two or more labels each")
    return out


def select(labels: Mapping[str, Mapping[str, Any]], policy: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The label each item keeps under a policy: ({id: label}, {dropped id: why}).

    Args:
        labels: item id -> {labeller: label}.
        policy: "majority", "unanimous" or a labeller's name.
    """
    names = sorted({k for v in labels.values() for k in v})
    if policy not in POLICIES and policy not in names:
        raise InputError(f"unknown label policy {policy!r}", field="policy",
                         expected=f"majority | unanimous | a labeller ({', '.join(names)})")
    kept, dropped = {}, {}
    for i, by in labels.items():
        counts = Counter(by.values()).most_common()
        if policy == "majority":
            if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
                dropped[i] = "no majority (a tie)" if counts else "no label"
            else:
                kept[i] = counts[0][0]
        elif policy == "unanimous":
            if len(by) < 2 or len(counts) > 1:
                dropped[i] = "one label: agreement unknown" if len(by) < 2 else "labellers disagree"
            else:
                kept[i] = counts[0][0]
        elif policy in by:
            kept[i] = by[policy]
        else:
            dropped[i] = f"not labelled by {policy}"
    return kept, dropped


def label_agreement(records: Sequence[Any], policy: str = "majority", *, field: str = "labels",
                    name: str = "label", rule: Any = None, n_boot: int = 2000, seed: int = 0,
                    confidence: float = 0.95, verdicts: Mapping[str, Any] | None = None) -> dict:
    """Agreement among labellers, the items they disagree on, and the labels a policy keeps.

    Args:
        records: dicts {"id", field: {labeller: label}}, vf.Item with gold[field] = {labeller: label},
            or MLflow traces (their valid human assessments named `name`, one per labeller).
        policy: "majority", "unanimous" or a labeller's name (see the module's docstring).
        field: the records' {labeller: label} field.
        name: the traces' assessment name.
        rule: a LabelRule-like object (the judge domain's --pass-at / --label-map rule) with
            .read(value) -> PASS/FAIL applied to each label first (None: labels compared as given).
        n_boot: bootstrap resamples for α's interval.
        seed: the bootstrap seed.
        confidence: the interval's level.
        verdicts: a judge's verdict per item id: its Scott's π against the labels the policy kept, with a
            95% bootstrap interval, is reported beside the humans' α ("judge"; None verdicts left out).

    Returns:
        {"n_items", "n_pairable", "labellers", "alpha", "alpha_ci", "confidence", "disagreements":
        [{"id", "labels"}], "policy", "selected": {id: label}, "dropped": {id: why}, "judge"}.
    """
    labels = _record_labels(records, field, name)
    if rule is not None:
        labels = {i: {k: rule.read(v) for k, v in by.items()} for i, by in labels.items()}
    units = [list(by.values()) for by in labels.values()]
    kept, dropped = select(labels, policy)
    return {"n_items": len(labels), "n_pairable": sum(len(u) >= 2 for u in units),
            "labellers": sorted({k for by in labels.values() for k in by}),
            "alpha": krippendorff_alpha(units), "alpha_ci": alpha_interval(units, n_boot, seed, confidence),
            "confidence": confidence,
            "disagreements": [{"id": i, "labels": dict(by)} for i, by in labels.items() if len(set(by.values())) > 1],
            "policy": policy, "selected": kept, "dropped": dropped,
            "judge": None if verdicts is None else judge_against(kept, verdicts, n_boot, seed)}


def judge_against(labels: Mapping[str, Any], verdicts: Mapping[str, Any], n_boot: int = 2000, seed: int = 0) -> dict:
    """A judge's Scott's π against the kept labels, with its 95% bootstrap interval (core.stats).

    Args:
        labels: item id -> the label a policy kept.
        verdicts: item id -> the judge's verdict (None or absent: left out).
        n_boot: bootstrap resamples.
        seed: the bootstrap seed.
    """
    from verifirst.core.stats import judge_pi, pi_interval

    ids = [i for i in labels if verdicts.get(i) is not None]
    if not ids:
        return {"n": 0, "pi": None, "pi_ci95": None}
    y, pred = [labels[i] for i in ids], [verdicts[i] for i in ids]
    return {"n": len(ids), "pi": judge_pi(y, pred), "pi_ci95": pi_interval(y, pred, n_boot, seed)}
