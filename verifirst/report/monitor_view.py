"""The monitor report as people read it: the verdict word, the window table (console, Markdown,
HTML with the plot). The judge domain's monitoring computes the report; this module only renders it."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from verifirst.report.tables import fit


def verdict(report: dict) -> str:
    """The run's verdict word: DRIFT, LM FAILURE (a model left windows undecided), NO EVIDENCE (no
    window had enough records to decide) or ok.

    Args:
        report: the monitor report.
    """
    if report["drift"]:
        return "DRIFT"
    if report.get("lm_failure"):
        return "LM FAILURE"
    return "NO EVIDENCE" if report.get("no_evidence") else "ok"


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(float(x), spec)


def window_table_rows(report: dict, short: bool = False) -> list[list[str]]:
    """One row per window: window, n, judged, π [95%], FAIL recall, FAIL precision, unjudged, abstention, status.

    Args:
        report: the monitor report.
        short: name a window by its start (the console table) instead of its ISO interval.
    """
    rows = []
    for r in report["windows"]:
        ci = r["pi_ci95"]
        pi = "n/a" if r["pi"] is None else f"{r['pi']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")
        start = r["start"].replace("T", " ").replace(":00Z", "").replace("Z", "")
        rows.append([f"{r['index']}: {start}" if short else f"{r['index']}: {r['window']}", str(r["n"]), str(r["judged"]), pi, _fmt(r["fail_recall"]),
                     _fmt(r["fail_precision"]), _fmt(r["unjudged_rate"], ".0%"),
                     _fmt(r["teacher"]["abstention_rate"], ".0%"), r["status"]])
    return rows


HEADERS = ["window", "n", "judged", "π [95%]", "FAIL recall", "FAIL precision", "unjudged", "teacher abstains",
           "status"]


def markdown(report: dict) -> str:
    """report.md: the verdict, the rule and the window table."""
    p = report["prompt"]
    lines = [f"# Monitor: {p['source']}", "",
             f"- records: {report['n_records']} from {report['source']}, windows {report['windows_spec']} on "
             f"{report['time_field']}",
             f"- drift rule: {report['drift_rule']['text']} (baseline: {report['drift_rule']['baseline_source']})",
             f"- verdict: {verdict(report)} (exit {report['exit_code']})"
             + (f"; recommendation: **{report['recommendation']}**" if report["recommendation"] else ""),
             f"- {report['reason']}", "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in window_table_rows(report)]
    if report.get("run_id"):
        lines += ["", f"MLflow run {report['run_id']} in {report.get('tracking_uri')}"]
    return "\n".join(lines) + "\n"


def html_page(report: dict, run_dir: Path) -> str:
    """report.html: the verdict, the window table and the plot (π per window against the baseline,
    teacher abstention), one self-contained page.

    Args:
        report: the monitor report.
        run_dir: where plots/monitor.png goes.
    """
    import base64
    from html import escape

    from verifirst.report import plots

    png = plots.monitor_windows(report, run_dir / "plots")
    img = (f"<img alt='pi per window' src='data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()}'>"
           if png else "")
    head = "".join(f"<th>{escape(h)}</th>" for h in HEADERS)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in window_table_rows(report))
    rec = f"; recommendation: <b>{escape(report['recommendation'])}</b>" if report["recommendation"] else ""
    return (f"<!doctype html><meta charset='utf-8'><title>Monitor: {escape(report['prompt']['source'])}</title>"
            f"<body style='font-family:system-ui,sans-serif;max-width:1000px;margin:2rem auto'>"
            f"<h1>Monitor: {escape(report['prompt']['source'])}</h1>"
            f"<p>{verdict(report)} (exit {report['exit_code']}){rec}. {escape(report['reason'])}</p>"
            f"<p>Drift rule: {escape(report['drift_rule']['text'])}</p>{img}"
            f"<table border='1' cellpadding='4' style='border-collapse:collapse'><tr>{head}</tr>{body}</table>"
            f"</body>\n")


def print_monitor(report: dict, console=None) -> None:
    """The window table and the verdict, on the console (rich)."""
    from rich.console import Console
    from rich.table import Table

    con = console or Console(width=None if sys.stdout.isatty() else 160)
    t = Table(title=f"monitor: {report['prompt']['source']} on {report['source']} "
                    f"({report['n_records']} records, windows {report['windows_spec']})")
    for h in ["window (start, UTC)", *HEADERS[1:]]:
        t.add_column(h)
    for row in window_table_rows(report, short=True):
        t.add_row(*row)
    con.print(fit(t, con))  # too wide for the console: one row at a time
    con.print(f"drift rule: {report['drift_rule']['text']} (baseline: {report['drift_rule']['baseline_source']})",
              markup=False, soft_wrap=True)
    con.print(f"{verdict(report)} (exit {report['exit_code']})"
              + (f": {report['recommendation']}" if report["recommendation"] else "") + f" -- {report['reason']}",
              markup=False, soft_wrap=True)
    con.print(f"report: {report['run_dir']}/report.md", markup=False, soft_wrap=True)
    if report.get("run_id"):
        con.print(f"MLflow run {report['run_id']} in {report.get('tracking_uri')}", markup=False, soft_wrap=True)
