"""The `judge` section of a calibration report, from the loop's before/after evaluations: per split the
calibrated judge against the uncalibrated one on the same items (Scott's π with a paired bootstrap
interval, FAIL/PASS recall, McNemar), the teacher's decisions, the validation verdicts that decide
between prompts, and the warnings (self-preference, one label class, LM errors left out)."""
from __future__ import annotations

from typing import Any, Sequence

import dspy

from verifirst.core.stats import confusion, pi_comparison, scotts_pi
from verifirst.core.task import Item
from verifirst.core.verdicts import FAIL, PASS, normalize_label
from verifirst.judge.autorefine import agreement, run_judge, verdicts_at
from verifirst.judge.programs import RubricJudge
from verifirst.judge.teacher import TeacherDecision, abstention_stats
from verifirst.judge.pool import Threads


# -- held-out report -----------------------------------------------------------------------
def verdict_metrics(labels: Sequence[str], verdicts: Sequence[str]) -> dict:
    c = confusion(labels, verdicts, labels=[PASS, FAIL])
    fail, pas = c.per_class[FAIL], c.per_class[PASS]
    return {"n": len(labels), "fail_recall": fail["recall"], "fail_precision": fail["precision"],
            "pass_recall": pas["recall"], "pi": scotts_pi(labels, verdicts), "accuracy": c.accuracy,
            "confusion": c.as_dict()}


def held_out_report(labels: dict[str, str], verdicts: dict[str, dict[str, str | None]], candidate: str,
                    baselines: Sequence[str], n_boot: int = 2000, seed: int = 0) -> dict:
    """Test-split report from per-item verdicts of several judges on the same items.

    Items where any compared judge has no verdict (LM error) are left out of every row and
    counted, so all rows and paired tests use one item set.
    """
    names = [candidate, *baselines]
    ids = [i for i in labels if all(verdicts[n].get(i) is not None for n in names)]
    out: dict[str, Any] = {"n_items": len(labels), "n_scored": len(ids),
                           "excluded_lm_errors": len(labels) - len(ids),
                           "label_counts": {l: sum(labels[i] == l for i in ids) for l in (PASS, FAIL)},
                           "judges": {}, "comparisons": {}}
    if not ids:
        return out
    y = [labels[i] for i in ids]
    for n in names:
        out["judges"][n] = verdict_metrics(y, [verdicts[n][i] for i in ids])
    cand = [verdicts[candidate][i] for i in ids]
    for b in baselines:
        out["comparisons"][f"{candidate}_vs_{b}"] = pi_comparison(y, cand, [verdicts[b][i] for i in ids],
                                                                  n_boot=n_boot, seed=seed)
    return out


# -- the judge section of a driver report ------------------------------------------------
def _verdicts_of(result) -> dict[str, str | None]:
    """A judge's verdict per item from the driver's rows; an unscored row (LM error) has none."""
    return {r.id: (normalize_label(r.output) if r.status in (PASS, FAIL) else None) for r in result.rows}


def judge_report(program, before: dict, after: dict, items: Sequence[Item], manifest, details: dict, *,
                 judge_lm=None, teacher_lm=None, threads: Threads = 1, n_boot: int = 2000) -> dict:
    """Judge statistics from the driver's before/after evaluations: the `judge` section of a report.

    Per split, the calibrated judge (after) against the uncalibrated one (before) on the same
    items: Scott's π with a paired bootstrap interval, FAIL recall/precision, PASS recall,
    McNemar; the teacher's keep/correct/abstain with abstention by label and metadata; the
    validation verdicts that decide between prompts; one-label-class warnings.

    Args:
        program: the uncalibrated judge the driver started from.
        before: the driver's evaluations of `program`, by split.
        after: the driver's evaluations of the calibrated judge, by split.
        items: every item of the suite (labels in gold["label"], metadata in meta).
        manifest: the split manifest.
        details: the AutoRefine engine's details (loop summary, teacher decisions).
        judge_lm: the judge LM (a rubric's train-threshold baseline is re-scored with it).
        teacher_lm: the teacher LM (named in the self-preference warning).
        threads: the run's Pool (or a count) for that re-scoring.
        n_boot: bootstrap resamples.
    """
    by_id = {it.id: it for it in items}
    loop = {k: v for k, v in details.items()
            if k not in ("teacher_decisions", "teacher_used", "teacher", "metric", "review_queue")}
    kind = getattr(program, "kind", "passfail")
    rubric = isinstance(program, RubricJudge)
    base_names = ["uncalibrated_default_threshold", "uncalibrated_train_threshold"] if rubric else ["uncalibrated"]
    splits: dict[str, dict] = {}
    verdicts_by_split: dict[str, dict] = {}
    for split in [s for s in after if s in before]:
        labels = {r.id: by_id[r.id].gold["label"] for r in before[split].rows}
        verdicts = {"calibrated": _verdicts_of(after[split]), base_names[0]: _verdicts_of(before[split])}
        if rubric:
            verdicts[base_names[1]] = _initial_at_train_threshold(program, before[split], by_id, manifest,
                                                                  loop.get("initial_threshold"), judge_lm,
                                                                  threads)
        verdicts_by_split[split] = verdicts
        splits[split] = held_out_report(labels, verdicts, "calibrated", base_names, n_boot=n_boot)
    decisions = {k: TeacherDecision(**v) for k, v in (details.get("teacher_decisions") or {}).items()}
    used = bool(details.get("teacher_used", decisions))
    train = manifest.select(items, "train")
    tstats = abstention_stats(train, decisions) if used else {}
    counts = tstats.get("overall", {})
    val_labels = {it.id: it.gold["label"] for it in manifest.select(items, "val")}
    val_verdicts = (verdicts_by_split.get("val") or {}).get("calibrated") or {}
    test_report = splits.get("test", {})
    test_labels = {it.id: it.gold["label"] for it in manifest.select(items, "test")} if "test" in splits else {}
    return {
        "kind": kind, "view_fields": list(getattr(program, "view_fields", [])),
        "teacher": {"used": used, "keep": counts.get("keep"), "correct": counts.get("correct"),
                    "abstain": counts.get("skip"), "error": counts.get("error"), "stats": tstats},
        "loop": loop, "splits": splits, "test": test_report,
        "calibrated_prompt": loop.get("calibrated_prompt"), "calibrated_threshold": loop.get("threshold"),
        "initial_prompt": program.prompt,
        "models": {"judge": _lm_name(judge_lm), "teacher": _lm_name(teacher_lm)},
        "warnings": _warnings(judge_lm, teacher_lm, test_report) + _degenerate_splits(
            {k: v for k, v in (("test", test_labels), ("validation", val_labels)) if v}),
        "test_verdicts": verdicts_by_split.get("test", {}),
        "review_queue": list(details.get("review_queue") or []),
        # what decides between prompts (e.g. the registry's champion): the selected prompt on validation
        "validation": {"pi": agreement(val_labels, val_verdicts)["pi"] if val_verdicts else None,
                       "n_items": len(val_labels), "labels": val_labels, "verdicts": {"calibrated": val_verdicts}},
    }


def _initial_at_train_threshold(program, before, by_id: dict, manifest, threshold: float | None, judge_lm,
                                 threads: Threads) -> dict[str, str | None]:
    """The starting rubric at the threshold chosen for it on train (scores the driver's rows lack).

    The same program and prompt the driver already scored on this split: with a caching LM
    these are cache hits, and no new program reaches the test split.
    """
    items = [by_id[r.id] for r in before.rows]
    if before.split == "test":
        manifest.check_test([it.id for it in items])
    if threshold is None:
        return _verdicts_of(before)
    return verdicts_at(run_judge(program, items, judge_lm, threads), threshold)


def _lm_name(lm) -> str | None:
    if lm is None:
        lm = dspy.settings.lm
    return getattr(lm, "model", None) if lm is not None else None


def _warnings(judge_lm, teacher_lm, test_report) -> list[str]:
    out = []
    j, t = _lm_name(judge_lm), _lm_name(teacher_lm)
    if j and t and j == t:
        out.append(f"teacher and judge share one model ({j}): risk of self-preference (S2 §VI)")
    if test_report.get("excluded_lm_errors"):
        out.append(f"{test_report['excluded_lm_errors']} test item(s) left out for judge LM errors")
    if test_report.get("n_scored", 0) < 50:
        out.append(f"only {test_report.get('n_scored', 0)} scored test items: wide intervals")
    return out


def _degenerate_splits(labels_by_split: dict[str, dict[str, str]]) -> list[str]:
    """A split whose labels are all one class: Scott's π there cannot tell judges apart."""
    out = []
    for split, labels in labels_by_split.items():
        classes = sorted(set(labels.values()))
        if len(classes) == 1:
            out.append(f"{split} split has one label class (all {classes[0]}): π is undefined/degenerate "
                       f"there (it only rewards agreeing with that class)")
    return out
