"""Recalibration against what is deployed (`--baseline`): the deployed prompt, the uncalibrated start
and the calibrated prompt per time window (report["baseline"]); it decides nothing."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any



from verifirst.loop.splits import SplitManifest
from verifirst.core.errors import InputError
from verifirst.loop.ledger import TestLedger, program_hash
from verifirst.core.task import Suite
from verifirst.judge.options import lm_spec
from verifirst.judge.prompts import StartPrompt, score_prompt, make_judge_program, resolve_start_prompt

if TYPE_CHECKING:  # steps imports this module
    from verifirst.judge.steps import CalibrationSettings


BASELINE_EXPECTED = "a prompt file, prompts:/NAME@ALIAS or prompts:/NAME/VERSION"


BASELINE_JUDGES = ("baseline", "uncalibrated", "calibrated")


def resolve_baseline(spec: str, workdir: Path, tracking_uri: str | None, judge: str, suite: Suite,
                     view: str | None) -> StartPrompt:
    """The `--baseline` prompt read and checked against the records, before any LM call.

    Args:
        spec: a prompt file, prompts:/NAME@ALIAS or prompts:/NAME/VERSION.
        workdir: the workdir (its local MLflow store when no tracking URI is given).
        tracking_uri: the MLflow tracking URI holding the prompt registry.
        judge: the judge kind the baseline is run as.
        suite: the records (their fields fill the prompt's variables).
        view: the run's --view, or None.

    Raises:
        InputError: a missing or empty file, an unknown prompt, version or alias, or a variable no
            field fills; field --baseline, naming the value.
    """
    spec = str(spec).strip()
    if not spec:
        raise InputError("an empty --baseline", field="--baseline", expected=BASELINE_EXPECTED)
    if not spec.startswith("prompts:/") and not (Path(spec).exists() or Path(spec).is_symlink()):
        raise InputError(f"baseline prompt file {spec!r} not found", path=spec, field="--baseline",
                         expected=BASELINE_EXPECTED)
    try:
        base = resolve_start_prompt(spec, workdir, tracking_uri)
        make_judge_program(judge, suite, base.text, view)
    except InputError as e:
        raise InputError(f"baseline {spec!r}: {e.message}", path=e.path, line=e.line, field="--baseline",
                         expected=e.expected or BASELINE_EXPECTED) from None
    return base


def _row_verdicts(result) -> dict[str, str | None]:
    """A judge's verdict per item from the loop's rows; an unscored row (LM error) has none."""
    from verifirst.core.verdicts import FAIL, PASS, normalize_label

    return {r.id: (normalize_label(r.output) if r.status in (PASS, FAIL) else None) for r in result.rows}


def baseline_columns(manifest: SplitManifest) -> list[dict]:
    """The baseline table's columns: the test split (the current window), then the older windows,
    newest first. With a time split and --windows: each window's train/validation items (timesplit's
    windows; a window's test items belong to the test column); a time split without windows: the
    validation and the train split; a random split: the test split alone."""
    cols: list[dict] = []
    cuts = manifest.cuts if manifest.method == "time" else {}
    if manifest.test:
        cols.append({"window": "test", "current": True, "start": cuts.get("test_start"), "end": cuts.get("test_end"),
                     "ids": list(manifest.test), "n_train": 0, "n_val": 0, "n_test": len(manifest.test)})
    if manifest.method != "time":
        return cols
    train, val = set(manifest.train), set(manifest.val)
    older: list[dict] = []
    if manifest.windows is not None:
        from verifirst.loop.timesplit import iso, time_windows

        rows = [{"id": i, "t": t} for i, t in manifest.times.items()]
        for w in time_windows(rows, "t", manifest.windows):
            ids = [r["id"] for r in w.items if r["id"] in train or r["id"] in val]
            if ids:
                older.append({"window": w.label, "current": False, "start": iso(w.start), "end": iso(w.end),
                              "ids": ids, "n_train": sum(i in train for i in ids),
                              "n_val": sum(i in val for i in ids), "n_test": 0})
    else:
        for split, ids in (("train", manifest.train), ("val", manifest.val)):
            if ids:
                older.append({"window": split, "current": False, "start": cuts.get(f"{split}_start"),
                              "end": cuts.get(f"{split}_end"), "ids": list(ids),
                              "n_train": len(ids) if split == "train" else 0,
                              "n_val": len(ids) if split == "val" else 0, "n_test": 0})
    return cols + older[::-1]


def score_baseline(s: CalibrationSettings, suite: Suite, manifest: SplitManifest, res: Any, rep: dict,
                   judge_lm) -> dict:
    """report["baseline"]: the deployed prompt, the uncalibrated start and the calibrated prompt on
    the test split and on each older window (baseline_columns): π with its 95% bootstrap interval
    and n per cell, and per column the calibrated prompt against the baseline (paired Δπ bootstrap,
    exact McNemar) on the items every judge scored.

    The start and calibrated verdicts are the loop's own before/after rows. The baseline is scored
    once per item with the run's judge LM: older items together, the test items after the split
    guard has checked that no optimizer saw them. It decides nothing (no selection, no promotion).

    Args:
        s: the calibration's settings (s.baseline: the prompt).
        suite: the records.
        manifest: the split manifest.
        res: the loop's result (before/after evaluations by split).
        rep: the report (its split digest).
        judge_lm: the run's judge LM.
    """
    from verifirst.core.stats import compare_judges

    b = s.baseline
    by_id = {it.id: it for it in suite.items}
    cols = baseline_columns(manifest)
    fields = sorted(suite.items[0].inputs)
    threshold = None
    if s.judge == "rubric" and b.tags.get("threshold") not in (None, "", "None"):
        threshold = float(b.tags["threshold"])
    older_ids = list(dict.fromkeys(i for c in cols if not c["current"] for i in c["ids"]))
    verdicts: dict[str, dict[str, str | None]] = {"baseline": {}, "uncalibrated": {}, "calibrated": {}}
    if older_ids:
        verdicts["baseline"].update(score_prompt(s.judge, fields, b.text, threshold, [by_id[i] for i in older_ids],
                                                  judge_lm, s.threads, s.view))
    if manifest.test:
        manifest.check_test(manifest.test)  # never seen by an optimizer: reported, decides nothing
        verdicts["baseline"].update(score_prompt(s.judge, fields, b.text, threshold,
                                                  manifest.select(suite.items, "test"), judge_lm, s.threads, s.view))
    for phase, name in ((res.before, "uncalibrated"), (res.after, "calibrated")):
        for split_result in (phase or {}).values():
            verdicts[name].update(_row_verdicts(split_result))
    columns = []
    for c in cols:
        labels = {i: by_id[i].gold["label"] for i in c["ids"]}
        cmp = compare_judges(labels, {k: {i: v.get(i) for i in c["ids"]} for k, v in verdicts.items()},
                             "calibrated", ["baseline", "uncalibrated"], n_boot=s.n_boot)
        judges = {k: {"pi": m["pi"], "pi_ci95": m.get("pi_ci95"), "n": m["n"], "accuracy": m["accuracy"],
                      "fail_recall": m["fail_recall"], "pass_recall": m["pass_recall"]}
                  for k, m in cmp["judges"].items()}
        vs = (cmp["comparisons"] or {}).get("calibrated_vs_baseline")
        col = {k: v for k, v in c.items() if k != "ids"}
        col.update(n_items=cmp["n_items"], n_scored=cmp["n_scored"], label_counts=cmp["label_counts"],
                   excluded_lm_errors=cmp["excluded_lm_errors"], judges=judges)
        if vs is not None:
            col["calibrated_vs_baseline"] = {
                "pi_delta": vs["pi_delta"], "pi_ci95": vs["pi_ci95"],
                "mcnemar_p": vs["mcnemar_exact"]["p_value"],
                "calibrated_right_baseline_wrong": vs["ours_right_anchor_wrong"],
                "baseline_right_calibrated_wrong": vs["anchor_right_ours_wrong"]}
            d = vs["pi_delta"]
            col["ahead"] = "calibrated" if d > 0 else "baseline" if d < 0 else "tie"
        columns.append(col)
    return {"source": b.source, "name": b.name, "version": b.version, "alias": b.alias,
            "judge_lm": lm_spec(judge_lm, s.model), "threshold": threshold, "judges": list(BASELINE_JUDGES),
            "split_method": manifest.method, "windows_spec": manifest.windows, "columns": columns,
            "decides": "nothing: reported only, no prompt is selected or promoted on it",
            "test_scored": bool(manifest.test)}


def record_baseline(ledger: TestLedger, rep: dict, run_dir: Path, base: StartPrompt) -> dict | None:
    """The baseline prompt was scored on the test split: into the ledger, and the reuse count again."""
    if not (rep.get("baseline") or {}).get("test_scored"):
        return rep.get("test_reuse")
    ledger.record(rep["split_digest"], program_hash(base.text), run_dir, "baseline")
    return ledger.reuse(rep["split_digest"], sorted(ledger.programs_of(run_dir)))
