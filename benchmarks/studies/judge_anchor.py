"""Our calibrated judge against the anchors a user would otherwise pick (MLflow make_judge, and
make_judge + Judge.align() with each of SIMBA, GEPA, MemAlign the installed MLflow has), on the
same held-out test items, in one table.

Per judge: π (Scott) against the outcome labels, accuracy, FAIL recall/precision, PASS recall;
per pair (ours vs each anchor): Δπ with a paired bootstrap CI and McNemar's exact test on
per-item correctness. Every row and test uses one item set: the items every compared judge
gave a verdict on (LM errors are left out and counted, never scored as FAIL).

The anchor trains on our train split only (MLflow's align() has no validation split); our
AutoRefine run uses train + val (val selects). Both are scored once on test.

    python benchmarks/studies/judge_anchor.py --problems 12 --snippets 4 --aligners all
    python benchmarks/studies/judge_anchor.py --problems 12 --snippets 4 --json
    python benchmarks/studies/judge_anchor.py --report RUN_DIR/report.json --problems 12 --snippets 4 --json
(`--report` reuses the test verdicts of a `verifirst calibrate` run made on the same
outcomes/limits/splits/seed; the split digest must match.)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Sequence

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

from verifirst.core.errors import InputError  # noqa: E402

PASS, FAIL = "PASS", "FAIL"


# The judge statistics live in the kernel (verifirst.core.stats): calibration's anchors use them too.
from verifirst.core.stats import compare_judges, judge_metrics, pi_interval  # noqa: E402,F401


TABLE_ORDER = ("uncalibrated", "calibrated", "mlflow_unaligned", "mlflow_simba", "mlflow_gepa", "mlflow_memalign")
DISPLAY = {"uncalibrated": "uncalibrated", "calibrated": "AutoRefine", "mlflow_unaligned": "MLflow make_judge",
           "mlflow_simba": "MLflow align SIMBA", "mlflow_gepa": "MLflow align GEPA",
           "mlflow_memalign": "MLflow align MemAlign"}


def anchor_table(labels: dict[str, str], verdicts: dict[str, dict[str, str | None]], anchor_meta: dict | None = None,
                 *, ours: str = "calibrated", n_boot: int = 2000, seed: int = 0) -> dict:
    """One table on one item set: every judge's π (with CI) and, against `ours` (AutoRefine),
    paired Δπ = ours − judge with its bootstrap CI and exact McNemar (via `compare_judges`).

    Args:
        labels: test item id -> PASS/FAIL.
        verdicts: judge -> item id -> verdict (None: an LM error, left out of every row).
        anchor_meta: align_anchor's metadata: aligners skipped or failed get a row saying why.
        ours: the judge every other one is compared with.
        n_boot: bootstrap resamples.
        seed: bootstrap seed.
    """
    names = [n for n in TABLE_ORDER if n in verdicts] + sorted(set(verdicts) - set(TABLE_ORDER))
    others = [n for n in names if n != ours]
    cmp = compare_judges(labels, verdicts, ours, others, n_boot=n_boot, seed=seed)
    rows = []
    for n in names:
        row = {"judge": n, "name": DISPLAY.get(n, n), "status": "scored", **cmp["judges"].get(n, {})}
        c = cmp["comparisons"].get(f"{ours}_vs_{n}")
        if c:
            row.update(pi_delta_vs_ours=c["pi_delta"], pi_delta_ci95=c["pi_ci95"],
                       mcnemar_p=c["mcnemar_exact"]["p_value"], ours_right_only=c["ours_right_anchor_wrong"],
                       judge_right_only=c["anchor_right_ours_wrong"])
        rows.append(row)
    for a, info in ((anchor_meta or {}).get("aligners") or {}).items():
        if info.get("status") in ("skipped", "error"):
            rows.append({"judge": f"mlflow_{a}", "name": DISPLAY.get(f"mlflow_{a}", a), "status": info["status"],
                         "reason": info.get("reason") or info.get("error")})
    return {"ours": ours, "n_items": cmp["n_items"], "n_scored": cmp["n_scored"],
            "excluded_lm_errors": cmp["excluded_lm_errors"], "label_counts": cmp["label_counts"], "rows": rows}


def format_table(table: dict) -> str:
    """The anchor table as text: one line per judge."""
    ours = DISPLAY.get(table["ours"], table["ours"])
    lines = [f"test items scored {table['n_scored']}/{table['n_items']} (labels {table['label_counts']}); "
             f"Δπ = {ours} − judge, paired bootstrap 95% CI; McNemar exact p against {ours}",
             f"  {'judge':22s} {'π':>7s} {'π 95% CI':>17s} {'acc':>5s} {'FAIL R':>6s} {'Δπ':>7s} "
             f"{'Δπ 95% CI':>17s} {'McNemar p':>9s}"]
    for r in table["rows"]:
        if r["status"] != "scored" or "pi" not in r:
            lines.append(f"  {r['name']:22s} {r['status'] if 'reason' in r else 'no scored items'}: {r.get('reason', '')}")
            continue
        ci = r.get("pi_ci95")
        cis = f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else ""
        if "pi_delta_vs_ours" in r:
            d, dci = r["pi_delta_vs_ours"], r["pi_delta_ci95"]
            tail = f"{d:+7.3f} {f'[{dci[0]:+.2f}, {dci[1]:+.2f}]':>17s} {r['mcnemar_p']:9.3f}"
        else:
            tail = f"{'—':>7s} {'':>17s} {'':>9s}"
        lines.append(f"  {r['name']:22s} {r['pi']:+7.3f} {cis:>17s} {r['accuracy']:5.2f} {r['fail_recall']:6.2f} {tail}")
    return "\n".join(lines)


def mlflow_model_uri(spec: str) -> str | None:
    """Our model spec -> MLflow judge URI; None means serve the embedded model locally."""
    from verifirst.lm import is_local

    if is_local(spec):
        return None
    if ":/" in spec:
        return spec
    provider, _, name = spec.partition("/")
    if not name:
        raise InputError(f"model {spec!r} names no provider", field="--model", expected="provider/model or local")
    return f"{provider}:/{name}"


def load_suite_and_splits(outcomes: str | None, problems: int | None, snippets: int | None,
                          splits: str, seed: int):
    from verifirst.judge import outcomes as oc
    from verifirst.judge.options import load_outcome_suite, parse_ratios
    from verifirst.loop.splits import make_splits

    if outcomes is None or (Path(outcomes).suffix == ".json" and "grade" in Path(outcomes).name):
        suite = oc.load_ice_score(outcomes, problems=problems, snippets=snippets)
        where = outcomes or "ice-score"
    else:
        suite = load_outcome_suite(Path(outcomes), problems)
        where = outcomes
    manifest = make_splits(suite.items, key=lambda it: it.id, group=lambda it: it.group_key,
                           ratios=parse_ratios(splits), seed=seed, stratify=lambda it: it.gold["label"],
                           source=str(where))
    return suite, manifest


def run_judge_anchor(outcomes: str | None = None, *, problems: int | None = 12, snippets: int | None = 4,
                     splits: str = "0.5,0.25,0.25", seed: int = 0, model: str = "local",
                     report: str | None = None, max_iters: int = 1, use_teacher: bool = True,
                     simba_kwargs: dict | None = None, workdir: str | Path = ".verifirst/judge_anchor",
                     num_threads: int = 1, n_boot: int = 2000, engine=None,
                     aligners: Sequence[str] | str = ("simba",), anchor_options: dict | None = None) -> dict:
    """Ours (a fresh AutoRefine run, or `report`) and MLflow's anchors on one test split.

    engine: what the local endpoint serves for the anchor when `model` is local (tests pass a
    scripted one; default the embedded SmolLM2).
    aligners: MLflow aligners to run ("simba", "gepa", "memalign" or "all").
    anchor_options: further keywords for align_anchor (e.g. gepa_max_metric_calls, embedder)."""
    import dspy

    from verifirst.lm import USAGE, FastJSONAdapter, make_lm
    from verifirst.judge.mlflow_align import align_anchor, parse_aligners
    from verifirst.judge.programs import DEFAULT_PASSFAIL_PROMPT

    parse_aligners(aligners)  # a bad name stops the run before any model call
    workdir = Path(workdir)
    suite, manifest = load_suite_and_splits(outcomes, problems, snippets, splits, seed)
    items = suite.items
    train, test = manifest.select(items, "train"), manifest.select(items, "test")
    view_fields = sorted(items[0].inputs)
    t0 = time.perf_counter()
    if report:
        try:
            ours_rep = json.loads(Path(report).read_text())
        except FileNotFoundError:
            raise InputError("calibration report not found", path=report) from None
        if ours_rep.get("split_digest") != manifest.digest:
            raise InputError(f"report was made on split {ours_rep.get('split_digest')}, this run's is "
                             f"{manifest.digest}", path=report, field="split_digest",
                             expected="the same outcomes, limits, --splits and --seed")
        manifest.admit_to_optimizer(manifest.train + manifest.val, who="autorefine (report)")
        source = f"report {report}"
    else:
        from verifirst.judge.calibrate import run_calibration

        judge_lm = make_lm(model, role="judge")
        with dspy.context(lm=judge_lm, adapter=FastJSONAdapter()):
            ours_rep = run_calibration(suite, manifest, "passfail", teacher_lm=make_lm(model, role="teacher"),
                                       proposer_lm=make_lm(model, role="reflection"), judge_lm=judge_lm,
                                       max_iters=max_iters, run_dir=workdir / "autorefine",
                                       use_teacher=use_teacher, threads=num_threads, n_boot=n_boot)
        source = "run_calibration"
    ours_rep = ours_rep["judge"] if isinstance(ours_rep.get("judge"), dict) else ours_rep  # calibrate's judge section
    ours_s = time.perf_counter() - t0
    verdicts = {k: v for k, v in ours_rep["test_verdicts"].items() if k in ("calibrated", "uncalibrated")}
    t0 = time.perf_counter()
    anchor = align_anchor(train, test, view_fields, DEFAULT_PASSFAIL_PROMPT, mlflow_model_uri(model),
                          manifest=manifest, simba_kwargs=simba_kwargs, workdir=workdir,
                          threads=num_threads, engine=engine, aligners=aligners, **(anchor_options or {}))
    anchor_s = time.perf_counter() - t0
    verdicts.update(anchor.verdicts)
    labels = {it.id: it.gold["label"] for it in test}
    anchors = [n for n in verdicts if n.startswith("mlflow_")]
    cmp_cal = compare_judges(labels, verdicts, "calibrated", anchors, n_boot=n_boot, seed=seed)
    table = anchor_table(labels, verdicts, anchor.metadata, n_boot=n_boot, seed=seed)
    harness = (compare_judges(labels, verdicts, "uncalibrated", ["mlflow_unaligned"], n_boot=n_boot, seed=seed)
               if "uncalibrated" in verdicts and "mlflow_unaligned" in verdicts else None)
    warnings = []
    if cmp_cal["n_scored"] < 50:
        warnings.append(f"only {cmp_cal['n_scored']} scored test items: wide intervals")
    for a, why in anchor.metadata.get("skipped_aligners", {}).items():
        warnings.append(f"MLflow align() with {a} skipped: {why}")
    for a, info in anchor.metadata.get("aligners", {}).items():
        if info.get("status") == "error":
            warnings.append(f"MLflow align() with {a} did not produce a judge: {info['error']}")
    if mlflow_model_uri(model) is None:
        warnings.append("judges run on the embedded SmolLM2-135M: agreement numbers are weak by model size")
    return {
        "suite": suite.name, "split_digest": manifest.digest, "split_sizes": manifest.sizes(),
        "view_fields": view_fields, "model": model, "ours_source": source,
        "test": cmp_cal, "table": table, "same_prompt_two_harnesses": harness,
        "anchor": {"metadata": anchor.metadata, "errors": anchor.errors, "instructions": anchor.instructions},
        "ours": {"calibrated_prompt": ours_rep.get("calibrated_prompt"), "loop": ours_rep.get("loop"),
                 "teacher": ours_rep.get("teacher")},
        "wall_s": {"ours": round(ours_s, 1), "anchor": round(anchor_s, 1)},
        "usage": USAGE.as_dict(), "warnings": warnings,
        "test_verdicts": verdicts,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outcomes", default=None, help="outcomes JSONL/CSV, or the ICE-Score grade file (default)")
    ap.add_argument("--problems", type=int, default=12, help="first N problems / records")
    ap.add_argument("--snippets", type=int, default=4, help="ICE-Score: first N snippets per problem")
    ap.add_argument("--splits", default="0.5,0.25,0.25")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="local")
    ap.add_argument("--report", default=None, help="report.json of a calibrate run on the same split")
    ap.add_argument("--max-iters", type=int, default=1)
    ap.add_argument("--no-teacher", action="store_true")
    ap.add_argument("--aligners", default="simba", help="MLflow aligners: simba,gepa,memalign or all")
    ap.add_argument("--gepa-calls", type=int, default=None, help="GEPA max_metric_calls (MLflow default 4 x traces)")
    ap.add_argument("--simba-steps", type=int, default=None, help="dspy.SIMBA max_steps (MLflow default 8)")
    ap.add_argument("--simba-candidates", type=int, default=None, help="num_candidates (default 6)")
    ap.add_argument("--simba-demos", type=int, default=None, help="max_demos (default 4)")
    ap.add_argument("--workdir", default=".verifirst/judge_anchor")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    simba = {k: v for k, v in (("max_steps", a.simba_steps), ("num_candidates", a.simba_candidates),
                               ("max_demos", a.simba_demos)) if v is not None}
    try:
        rep = run_judge_anchor(a.outcomes, problems=a.problems, snippets=a.snippets, splits=a.splits, seed=a.seed,
                               model=a.model, report=a.report, max_iters=a.max_iters, use_teacher=not a.no_teacher,
                               simba_kwargs=simba or None, workdir=a.workdir, num_threads=a.threads,
                               aligners=a.aligners, anchor_options={"gepa_max_metric_calls": a.gepa_calls})
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(rep, indent=2, default=str))
    else:
        print(f"{rep['suite']} (split {rep['split_digest']}, sizes {rep['split_sizes']}, model {rep['model']}; "
              f"wall s: ours {rep['wall_s']['ours']}, anchors {rep['wall_s']['anchor']})")
        print(format_table(rep["table"]))
        for w in rep["warnings"]:
            print(f"  warning: {w}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
