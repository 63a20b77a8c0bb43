"""`calibrate --labels POLICY`: outcome records labelled by several people (a `labels` object per record,
{labeller: label}) are measured before a judge is fitted to them: Krippendorff's α among the labellers
with its bootstrap interval (verifirst.judging.agreement), said before fitting and kept in the report
(report["labels"]["agreement"]); the policy then decides which items train and test with which label:
majority (a tie drops the item), unanimous (items whose labels all agree), or a labeller's name."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from verifirst.core.errors import InputError
from verifirst.core.task import Suite

FIELD = "labels"  # the records' {labeller: label} object


def apply_label_policy(suite: Suite, policy: str, rule: Any, echo: Callable[[str], None],
                       n_boot: int = 2000) -> dict:
    """Keep the items the policy keeps, each with the label it keeps; return the agreement section.

    Args:
        suite: outcome records read without a single `label` (each item's meta holds its `labels`).
        policy: "majority", "unanimous" or a labeller's name.
        rule: the LabelRule reading each labeller's value (--pass-at, --label-map; PASS/FAIL words).
        echo: where the agreement line goes (before any model is called).
        n_boot: bootstrap resamples for α's interval.

    Returns:
        {"policy", "labellers", "n_items", "n_pairable", "alpha", "alpha_ci", "confidence",
        "disagreements" (count), "disagreeing_ids", "kept", "dropped": {id: why}}.
    """
    from verifirst.judging.agreement import label_agreement

    records = [{"id": it.id, FIELD: it.meta.get(FIELD)} for it in suite.items]
    try:
        rep = label_agreement(records, policy, field=FIELD, rule=rule, n_boot=n_boot)
    except InputError as e:
        field = "--labels" if e.field == "policy" else e.field
        raise InputError(e.message, path=suite.meta.get("source"), field=field, expected=e.expected) from None
    kept = rep["selected"]
    unread = sorted(i for i, v in kept.items() if v not in ("PASS", "FAIL"))
    if unread:
        raise InputError(f"labels {sorted({str(kept[i]) for i in unread})[:3]} of {len(unread)} record(s) "
                         f"(first {unread[0]!r}) are not PASS or FAIL", path=suite.meta.get("source"), field=FIELD,
                         expected="PASS/FAIL words, or --pass-at / --label-map for ratings and categories")
    suite.items = [dataclasses.replace(it, gold={**it.gold, "label": kept[it.id]})
                   for it in suite.items if it.id in kept]
    lo, hi = rep["alpha_ci"]
    echo(f"labellers {', '.join(rep['labellers'])}: Krippendorff's α {rep['alpha']:.3f} "
         f"[{lo:.3f}, {hi:.3f}] on {rep['n_pairable']} item(s) labelled twice or more; "
         f"{len(rep['disagreements'])} disagreement(s); --labels {policy} keeps {len(kept)}, drops "
         f"{len(rep['dropped'])}")
    return {"policy": policy, "labellers": rep["labellers"], "n_items": rep["n_items"],
            "n_pairable": rep["n_pairable"], "alpha": rep["alpha"], "alpha_ci": rep["alpha_ci"],
            "confidence": rep["confidence"], "disagreements": len(rep["disagreements"]),
            "disagreeing_ids": [d["id"] for d in rep["disagreements"]], "kept": len(kept),
            "dropped": rep["dropped"]}
