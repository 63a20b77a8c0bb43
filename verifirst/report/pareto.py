"""The trade-off of a cost or latency objective in view: validation quality against USD per item
and against latency per item, every candidate a point with its 95% Wilson interval, the Pareto
front joined, the chosen candidate and the reference marked; the same as a text table (what
`verifirst run` prints) and as an HTML section of report.html."""
from __future__ import annotations

import io
from html import escape
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from verifirst.core import atomic
from verifirst.loop.objective_run import front_rows

CHOSEN, REFERENCE, POINT, FRONT = "#2f855a", "#c53030", "#4a5568", "#2b6cb0"
AXES = (("usd_per_item", "USD per item (validation)"), ("latency_p50_s", "latency p50 per item, s (validation)"))


def _fmt(x: Any, kind: str = "") -> str:
    if x is None:
        return "n/a"
    if kind == "usd":
        return f"{x:.6f}" if x < 0.01 else f"{x:.4f}"
    if kind == "s":
        return f"{x:.3f}"
    if kind == "ci":
        return "n/a" if not x or x[0] is None else f"[{x[0]:.2f}, {x[1]:.2f}]"
    if kind == "delta":
        return f"{x:+.3f}"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def points(report: dict) -> list[dict]:
    """One point per candidate: label, quality and its interval, USD and latency per item, marks.

    Args:
        report: a run report with an "objective" section.
    """
    sec = report.get("objective") or {}
    return [{"label": r["candidate"], "quality": r["val_pass_rate"], "ci95": r["ci95"], "usd_per_item": r["usd_per_item"],
             "latency_p50_s": r["latency_p50_s"], "front": r["front"], "chosen": r["chosen"],
             "reference": r["reference"]} for r in front_rows(sec)]


def pareto_plot(report: dict, out_dir: str | Path) -> Path | None:
    """Two panels, quality against USD per item and against latency p50 per item; None without an
    objective section.

    Args:
        report: the run report.
        out_dir: where pareto.png goes.
    """
    pts = [p for p in points(report) if p["quality"] is not None]
    if not pts:
        return None
    fig = Figure(figsize=(10, 4.2))
    for k, (axis, title) in enumerate(AXES):
        ax = fig.add_subplot(1, 2, k + 1)
        shown = [p for p in pts if p[axis] is not None]
        for p in shown:
            lo, hi = p["ci95"] if p["ci95"] and p["ci95"][0] is not None else (p["quality"], p["quality"])
            color = CHOSEN if p["chosen"] else REFERENCE if p["reference"] else (FRONT if p["front"] else POINT)
            ax.errorbar([p[axis]], [p["quality"]], yerr=[[p["quality"] - lo], [hi - p["quality"]]], fmt="o",
                        color=color, capsize=3, markersize=8 if p["chosen"] or p["reference"] else 5)
            mark = " (chosen)" if p["chosen"] else " (reference)" if p["reference"] else ""
            ax.annotate(p["label"] + mark, (p[axis], p["quality"]), fontsize=7, xytext=(4, 4),
                        textcoords="offset points")
        front = sorted((p for p in shown if p["front"]), key=lambda p: p[axis])
        if len(front) > 1 and axis == (report["objective"].get("axis") or "usd_per_item"):
            ax.plot([p[axis] for p in front], [p["quality"] for p in front], "--", color=FRONT, linewidth=1)
        ax.set_xlabel(title)
        ax.set_ylabel("validation pass rate (95% Wilson)")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{report['objective'].get('kind')}: candidates, Pareto front dashed; chosen green, reference red",
                 fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return atomic.write_bytes(Path(out_dir) / "pareto.png", buf.getvalue())


HEADERS = ["candidate", "front", "val pass", "95% CI", "Δ vs ref", "Δ 95% CI", "non-inf", "USD/item", "tok/item",
           "p50 s", "p90 s", "mark"]


def table_rows(section: dict) -> list[list[str]]:
    """The front table's rows as text cells (the front first, cheapest first).

    Args:
        section: the report's "objective" section.
    """
    out = []
    for r in front_rows(section):
        mark = "chosen" if r["chosen"] else ""
        mark += ("+" if mark else "") + "reference" if r["reference"] else ""
        out.append([r["candidate"], "*" if r["front"] else "", _fmt(r["val_pass_rate"]), _fmt(r["ci95"], "ci"),
                    _fmt(r["delta_vs_reference"], "delta"), _fmt(r["delta_ci95"], "ci"),
                    "yes" if r["non_inferior"] else "no", _fmt(r["usd_per_item"], "usd"),
                    _fmt(r["tokens_per_item"]), _fmt(r["latency_p50_s"], "s"), _fmt(r["latency_p90_s"], "s"), mark])
    return out


def test_lines(section: dict) -> list[str]:
    """The test split's confirmation in words: Δquality with interval and McNemar's p, Δ cost, Δ latency.

    Args:
        section: the report's "objective" section.
    """
    t = section.get("test")
    if not t:
        return ["test split: not scored (the run has none)"]
    d = t["delta_quality"]
    if d.get("delta") is None:
        return ["test split: no item scored by both"]
    usd, lat = t.get("delta_usd_per_item"), t.get("delta_latency_p50_s")
    return [f"test split (chosen − reference, {d['paired_n']} items): Δ pass rate {d['delta']:+.3f} "
            f"{_fmt(d['ci95'], 'ci')}, McNemar p = {d['mcnemar_p']:.3g}; "
            f"Δ USD per item {'n/a' if usd is None else f'{usd:+.6f}'}, "
            f"Δ latency p50 per item {'n/a' if lat is None else f'{lat:+.3f} s'}"]


def front_table(report: dict) -> str:
    """The candidates as a fixed-width text table with the verdict and the test confirmation.

    Args:
        report: the run report (empty text without an objective section).
    """
    sec = report.get("objective")
    if not sec:
        return ""
    rows = [HEADERS, *table_rows(sec)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    lines = [f"objective {sec['kind']} (margin {sec['margin']:g}): {sec['verdict']}"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines += test_lines(sec) + [sec.get("cost_note", "")]
    return "\n".join(lines) + "\n"


def html_section(report: dict) -> str:
    """report.html's section for an objective: verdict, the table, the test confirmation.

    Args:
        report: the run report ("" without an objective section).
    """
    sec = report.get("objective")
    if not sec:
        return ""
    head = "".join(f"<th>{escape(h)}</th>" for h in HEADERS)
    body = "".join("<tr" + (" class='chosen'" if r[-1].startswith("chosen") else "") + ">" +
                   "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in table_rows(sec))
    notes = "".join(f"<p class='note'>{escape(x)}</p>" for x in [*test_lines(sec), sec.get("cost_note", "")])
    return (f"<h2>Objective: {escape(sec['kind'])}</h2><p data-objective='verdict'><b>{escape(sec['verdict'])}</b></p>"
            f"<p class='note'>{escape(sec.get('rule', ''))}</p>"
            f"<table data-objective='front'><tr>{head}</tr>{body}</table>{notes}")
