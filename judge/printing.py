"""A calibration report for a person: the run's tables, the judge's noise, the anchor and baseline
tables, the review queue and the champion."""
from __future__ import annotations

import sys



from verifirst.report.tables import fit
from verifirst.judging.robustness import report_lines
from verifirst.judge.options import judge_section


def _fmt(x) -> str:
    return "n/a" if x is None else f"{float(x):.3f}"


def print_calibration(rep: dict, echo=print) -> None:
    """The run's common tables and the judge table (verifirst.report), then anchor and champion."""
    from rich.console import Console

    from verifirst.report import print_report

    con = Console(width=None if sys.stdout.isatty() else 140)
    print_report(rep, con)
    if rep.get("from_mlflow"):
        f = rep["from_mlflow"]
        con.print(f"records from MLflow experiment {f['experiment']}: {f['n_labelled']} of {f['n_traces']} traces "
                  f"labelled {f['label']!r}; skipped {f['skipped_unlabelled']} unlabelled, "
                  f"{f['skipped_unreadable']} unreadable", markup=False)
    # the labellers' own agreement (Krippendorff's α) is a line of print_report, beside the judge's π
    _print_noise(judge_section(rep).get("loop", {}).get("noise"), con)
    if rep.get("anchor"):
        _print_anchor(rep["anchor"], con)
    if rep.get("baseline"):
        _print_baseline(rep["baseline"], con)
    q = rep.get("review_queue") or {}
    if q:
        where = (f"; MLflow dataset {q['mlflow']['dataset']} (experiment {q['mlflow']['experiment']}): label "
                 f"its traces, then --from-mlflow {q['mlflow']['experiment']} --label label") if q.get("mlflow") else ""
        con.print(f"review queue: {q['n']} item(s) {q.get('by_reason') or ''} in {q['file']}{where}",
                  soft_wrap=True, markup=False)
    if rep.get("prompt_uri"):
        ch = rep.get("champion", {})
        con.print(f"calibrated prompt: {rep['run_dir']}/calibrated_prompt.txt, registered as {rep['prompt_uri']}",
                  soft_wrap=True)
        who = ch.get("alias") or "alias"
        con.print(f"{who} {'moved' if ch.get('moved') else 'kept'} (decided on {ch.get('decided_on')}): "
                  f"{ch.get('reason')}", soft_wrap=True, markup=False)
        for line in report_lines(rep):
            con.print(line, soft_wrap=True, markup=False)
    if rep.get("run_id"):
        con.print(f"MLflow run {rep.get('run_id')} in {rep.get('tracking_uri')}")


def _print_noise(noise: dict | None, con) -> None:
    """The judge's repeat noise on validation: π spread and flip rates, start vs selected prompt."""
    if not noise:
        return
    for which in ("initial", "selected"):
        n = noise.get(which) or {}
        if n.get("pi_mean") is None:
            continue
        flips = sorted(((v, k) for k, v in (n.get("flip_rate") or {}).items() if v > 0), reverse=True)[:5]
        con.print(f"judge noise ({which} prompt, {noise['repeats']} runs at temperature {noise['temperature']}): "
                  f"validation π mean {n['pi_mean']:.3f} sd {n['pi_sd']:.3f} [min {n['pi_min']:.3f}, max "
                  f"{n['pi_max']:.3f}]; {n['items_flipping']} item(s) flip, mean flip rate "
                  f"{(n.get('mean_flip_rate') or 0):.3f}" + (f"; most: {', '.join(f'{k} {v:.2f}' for v, k in flips)}"
                                                              if flips else ""), markup=False, soft_wrap=True)
    for a in noise.get("acceptance") or []:
        ci = a.get("paired_ci95")
        con.print(f"  iteration {a['iteration']} vs {a['against_iteration']}: Δπ {a['delta']:+.3f}, noise "
                  f"{a['noise']:.3f}" + (f", paired 95% [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")
                  + f" -> {'accepted' if a['accepted'] else 'rejected (within noise)'}", markup=False)


def _print_anchor(anchor: dict, con) -> None:
    """One table on the test split: uncalibrated, AutoRefine and each MLflow aligner, paired against AutoRefine."""
    from rich.table import Table

    cmp = anchor.get("comparison") or {}
    t = Table(title=f"anchor: {cmp.get('n_scored')} of {cmp.get('n_items')} test items scored by every judge "
                    f"(LM errors left out: {cmp.get('excluded_lm_errors')})")
    for col in ("judge", "π", "accuracy", "FAIL recall", "PASS recall", "Δπ AutoRefine − judge [95% CI]",
                "McNemar exact p"):
        t.add_column(col)
    for name, m in (cmp.get("judges") or {}).items():
        c = (cmp.get("comparisons") or {}).get(f"calibrated_vs_{name}")
        label = "AutoRefine (calibrated)" if name == "calibrated" else name
        t.add_row(label, f"{m['pi']:+.3f}", f"{m['accuracy']:.3f}", _fmt(m.get("fail_recall")),
                  _fmt(m.get("pass_recall")),
                  "" if c is None else f"{c['pi_delta']:+.3f} [{c['pi_ci95'][0]:+.3f}, {c['pi_ci95'][1]:+.3f}]",
                  "" if c is None else f"{c['mcnemar_exact']['p_value']:.3g}")
    con.print(fit(t, con))  # too wide for the console: one row at a time
    if anchor.get("metadata", {}).get("align_error"):
        con.print(f"anchor align error: {anchor['metadata']['align_error']}", markup=False)


def _print_baseline(base: dict, con) -> None:
    """The judge × window table: baseline, uncalibrated start and calibrated prompt per window."""
    from rich.table import Table

    from verifirst.report import baseline_lines, baseline_rows, baseline_title

    headers, rows = baseline_rows({"baseline": base})
    if rows:
        t = Table(title=baseline_title({"baseline": base}))
        for h in headers:
            t.add_column(h)
        for r in rows:
            t.add_row(*r)
        con.print(fit(t, con))  # too wide for the console: one row at a time
    for line in baseline_lines({"baseline": base}):
        con.print(line, markup=False, soft_wrap=True)
