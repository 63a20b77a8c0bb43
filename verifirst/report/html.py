"""One self-contained HTML page per experiment (plots inlined as base64 PNG, no external
assets), and the same plots + page logged as MLflow artifacts under report/."""
from __future__ import annotations

import base64
import functools
import importlib.util
import json
import tempfile
import time
from html import escape
from pathlib import Path
from typing import Any

from verifirst.core import atomic

from verifirst.report import inspect_view

from verifirst.report import plots
from verifirst.core.redaction import redact
from verifirst.report import footer_lines, unscored

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
color:#1a202c;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #e2e8f0}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #e2e8f0;padding:.25rem .55rem;text-align:right}
th{background:#f7fafc}td:first-child,th:first-child{text-align:left}
.meta{color:#4a5568;font-size:.9rem}.note{color:#4a5568;font-size:.85rem;max-width:60rem}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:.8rem}
.plots figure{margin:0}.plots img{max-width:100%;border:1px solid #edf2f7}
pre{background:#f7fafc;padding:.6rem;white-space:pre-wrap;font-size:.85rem}
.up{color:#2f855a}.down{color:#c53030}code{font-size:.85rem}
""" + inspect_view.CSS

PLOT_TITLES = {"pass_rate": "Pass rate before / after", "stage_funnel": "Stage funnel",
               "optimization_curve": "Optimization curve", "judge_confusion": "Judge confusion matrices",
               "teacher_abstention": "Teacher abstention by label", "lm_usage": "LM usage",
               "pareto": "Quality against cost and latency per item (Pareto front)"}


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else "–"


def _fmt(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return escape(str(x)) if x is not None else "–"
    if isinstance(x, float):
        return f"{x:.4g}"
    return escape(str(x))


def _table(headers: list[str], rows: list[list[Any]], raw: bool = False) -> str:
    """raw: cells are already HTML."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else _fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# -- sections ----------------------------------------------------------------------------
def _header(rep: dict) -> str:
    if rep.get("loop") and not rep.get("engine"):  # a judge calibration report
        title = f"judge calibration ({rep.get('judge', '')}) on {rep.get('suite', '')}"
    else:
        title = f"{rep.get('experiment', 'experiment')}: {rep.get('engine', '')} on {rep.get('suite', '')}"
    bits = [f"run <code>{escape(str(rep['run_id']))}</code>" if rep.get("run_id") else "",
            f"tracking <code>{escape(str(rep['tracking_uri']))}</code>" if rep.get("tracking_uri") else "",
            f"wall {rep['wall_s']} s" if rep.get("wall_s") is not None else ""]
    models = rep.get("models") or {}
    if isinstance(models, dict) and models:
        bits.append("models: " + ", ".join(f"{escape(str(k))} <code>{escape(str(v))}</code>"
                                           for k, v in models.items() if v))
    return (f"<h1>{escape(title)}</h1><p class='meta'>" + " · ".join(b for b in bits if b) + "</p>")


def _splits_section(rep: dict) -> str:
    sizes = rep.get("sizes") or rep.get("split_sizes") or {}
    out = ["<h2>Splits</h2>"]
    if sizes:
        out.append(_table(["split", "items"], [[k, v] for k, v in sizes.items()]
                          + [["total", sum(v for v in sizes.values() if isinstance(v, int))]]))
    out.append(f"<p class='meta'>split digest <code>{escape(str(rep.get('split_digest', '–')))}</code>; "
               "the test split is held out: no optimizer saw it, and it is scored once, after selection.</p>")
    return "".join(out)


def _delta_cell(c: dict) -> str:
    d = c.get("delta")
    if not isinstance(d, (int, float)):
        return "–"
    cls = "up" if d > 0 else "down" if d < 0 else ""
    ci = ""
    if isinstance(c.get("delta_ci_lo"), (int, float)) and isinstance(c.get("delta_ci_hi"), (int, float)):
        ci = f" [{100 * c['delta_ci_lo']:+.1f}, {100 * c['delta_ci_hi']:+.1f}]"
    return f"<span class='{cls}'>{100 * d:+.1f} pp</span>{ci}"


def _rate_cell(d: dict) -> str:
    if not d:
        return "–"
    return (f"{d.get('pass', '?')}/{d.get('scored', d.get('n', '?'))} = {_pct(d.get('pass_rate'))} "
            f"[{_pct(d.get('ci_lo'))}, {_pct(d.get('ci_hi'))}]")


def _before_after_section(rep: dict) -> str:
    splits = plots.splits_in_order(rep)
    if not splits:
        return ""
    rows = []
    for s in splits:
        body = rep["splits"][s] or {}
        b, a, c = body.get("before") or {}, body.get("after") or {}, body.get("comparison") or {}
        p = c.get("mcnemar_p")
        ub, ua = unscored(b), unscored(a)
        rows.append([escape(s), _fmt(b.get("n")), _rate_cell(b), _rate_cell(a), _delta_cell(c),
                     _fmt(p), f"{_fmt(c.get('b_before_only'))} / {_fmt(c.get('c_after_only'))}",
                     *[f"{ub[k]} / {ua[k]}" for k in ("lm", "verifier", "inconclusive")]])
    out = ["<h2>Before / after per split</h2>",
           _table(["split", "n", "before pass@1 [95% Wilson]", "after pass@1 [95% Wilson]",
                   "Δ [95% paired bootstrap]", "McNemar p (exact)", "lost / gained", "items LM err b / a",
                   "items verifier err b / a", "inconclusive b / a"],
                  rows, raw=True),
           "<p class='note'>Pass rates count PASS over scored items; items with an LM or verifier error and "
           "inconclusive items are excluded and reported apart. McNemar's exact test pairs each item's "
           "before/after verdict; lost / gained counts items "
           "passing only before / only after. Δ's interval resamples items jointly (2000 resamples).</p>"]
    stage_rows, seen = [], []
    for s in splits:
        for phase in ("before", "after"):
            st = ((rep["splits"][s] or {}).get(phase) or {}).get("stages") or {}
            seen += list(st)
            stage_rows.append((f"{s} {phase}", st))
    order = plots.stage_order(seen)
    if order:
        out.append("<h3>Verifier stages (items)</h3>")
        out.append(_table(["split / phase", *order], [[n, *[st.get(k, 0) for k in order]] for n, st in stage_rows]))
    return "".join(out)


def _plots_section(images: dict[str, Path]) -> str:
    if not images:
        return "<h2>Plots</h2><p class='note'>No plottable data in this report.</p>"
    out = ["<h2>Plots</h2><div class='plots'>"]
    for name, path in images.items():
        b64 = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        title = PLOT_TITLES.get(name, name)
        out.append(f"<figure><img alt='{escape(title)}' data-plot='{escape(name)}' "
                   f"src='data:image/png;base64,{b64}'><figcaption class='meta'>{escape(title)}"
                   f"</figcaption></figure>")
    out.append("</div>")
    return "".join(out)


def _judge_entries(rep: dict) -> dict[str, dict]:
    """Judge result dicts (those holding a confusion matrix), by name."""
    found: dict[str, dict] = {}

    def walk(node: Any, name: str, depth: int) -> None:
        if depth > 4 or not isinstance(node, dict):
            return
        if isinstance(node.get("confusion"), dict):
            found[name or "judge"] = node
            return
        for k, v in node.items():
            walk(v, f"{name}/{k}" if name else str(k), depth + 1)

    for root in ("judge", "judges"):
        walk(rep.get(root), "", 0)
    if isinstance(rep.get("test"), dict):
        walk(rep["test"].get("judges"), "", 0)
    return found


def _judge_section(rep: dict) -> str:
    entries = _judge_entries(rep)
    comps = {}
    for root in (rep.get("judge"), rep.get("test")):
        if isinstance(root, dict) and isinstance(root.get("comparisons"), dict):
            comps.update(root["comparisons"])
    if not entries and not comps:
        return ""
    out = ["<h2>Judges</h2>"]
    from verifirst.report import labellers_line

    if labellers_line(rep):
        out.append(f"<p class='meta'>{escape(labellers_line(rep))}</p>")
    test = rep.get("test") if isinstance(rep.get("test"), dict) else {}
    if "n_scored" in test:
        out.append(f"<p class='meta'>held-out test: {_fmt(test.get('n_scored'))} of {_fmt(test.get('n_items'))} "
                   f"items scored ({_fmt(test.get('excluded_lm_errors'))} left out for judge LM errors); labels "
                   + ", ".join(f"{escape(str(k))} {_fmt(v)}" for k, v in (test.get("label_counts") or {}).items())
                   + "</p>")
    if entries:
        keys = [k for k in ("n", "accuracy", "pi", "kappa", "fail_recall", "fail_precision", "pass_recall")
                if any(k in e for e in entries.values())]
        out.append(_table(["judge", *keys], [[n, *[e.get(k) for k in keys]] for n, e in entries.items()]))
        for n, e in entries.items():
            c = e["confusion"]
            labels = [str(x) for x in c.get("labels", [])]
            if labels and isinstance(c.get("matrix"), list):
                out.append(f"<p class='meta'>{escape(n)}: rows outcome label, columns judge verdict</p>")
                out.append(_table(["label \\ verdict", *labels],
                                  [[l, *row] for l, row in zip(labels, c["matrix"])]))
    if comps:
        rows = []
        for name, c in comps.items():
            ci = c.get("pi_ci95") or [None, None]
            mc = c.get("mcnemar_exact") or {}
            rows.append([name, c.get("pi_delta"), f"[{_fmt(ci[0])}, {_fmt(ci[1])}]",
                         mc.get("p_value"), f"{_fmt(mc.get('b'))} / {_fmt(mc.get('c'))}"])
        out.append(_table(["comparison", "Δπ", "95% paired bootstrap", "McNemar p (exact)", "b / c"], rows))
    return "".join(out)


def _teacher_section(rep: dict) -> str:
    t = rep.get("teacher")
    groups = plots.teacher_groups(rep)
    if not isinstance(t, dict) and not groups:
        return ""
    out = ["<h2>Teacher</h2>"]
    if isinstance(t, dict):
        overall = (t.get("stats") or {}).get("overall") if isinstance(t.get("stats"), dict) else t.get("overall")
        overall = overall or t
        cells = [overall.get("keep"), overall.get("correct"), overall.get("skip", overall.get("abstain")),
                 overall.get("error")]
        if any(v is not None for v in cells):
            out.append(_table(["keep", "correct", "abstain", "error"], [cells]))
    for field, levels in groups.items():
        rows = [[lvl, r.get("n"), r.get("keep"), r.get("correct"), plots._skip(r),
                 _pct(plots._skip(r) / r["n"]) if r.get("n") else "–"] for lvl, r in levels.items()]
        out.append(f"<p class='meta'>by {escape(field)}</p>")
        out.append(_table([field, "n", "keep", "correct", "abstain", "abstain rate"], rows))
    stats = t.get("stats") if isinstance(t, dict) and isinstance(t.get("stats"), dict) else t
    fisher = stats.get("by_label_fisher") if isinstance(stats, dict) else None
    if isinstance(fisher, dict) and fisher.get("p_value") is not None:
        out.append(f"<p class='meta'>Fisher exact test of abstention rates by label: p = "
                   f"{_fmt(fisher['p_value'])}, odds ratio {_fmt(fisher.get('odds_ratio'))}</p>")
    return "".join(out)


SELF_HOSTED = ("local", "hosted_vllm/", "ollama/", "ollama_chat/", "lm_studio/", "llamafile/")


@functools.lru_cache(maxsize=1)
def _price_list() -> dict:
    """LiteLLM's bundled model price list, read as data (importing litellm takes seconds)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.origin:
        return {}
    f = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    try:
        return json.loads(f.read_text())
    except (OSError, ValueError):
        return {}


def cost_usd(spec: str | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Estimated price of the tokens; 0 for self-hosted models, None when the price is unknown."""
    if not spec:
        return None
    if spec.startswith(SELF_HOSTED):
        return 0.0
    prices = _price_list()
    row = prices.get(spec) or (prices.get(spec.split("/", 1)[1]) if "/" in spec else None)
    if not isinstance(row, dict) or "input_cost_per_token" not in row:
        return None
    return (float(row.get("input_cost_per_token") or 0) * int(prompt_tokens)
            + float(row.get("output_cost_per_token") or 0) * int(completion_tokens))


def _usage_section(rep: dict) -> str:
    rows_in = plots.usage_rows(rep)
    if not rows_in and not rep.get("usage_this_run"):
        return ""
    models = rep.get("models") if isinstance(rep.get("models"), dict) else {}
    rows, total_cost, known = [], 0.0, True
    for key, u in rows_in.items():
        role = key.split("/", 1)[0]
        cost = u.get("cost")
        if cost is None:
            cost = cost_usd(models.get(role), u.get("prompt_tokens", 0) or 0, u.get("completion_tokens", 0) or 0)
        if cost is None:
            known = False
        else:
            total_cost += cost
        rows.append([key, models.get(role), u.get("calls"), u.get("lm_calls"), u.get("cache_hits"),
                     u.get("errors"), u.get("prompt_tokens"), u.get("completion_tokens"), u.get("wall_s"),
                     f"${cost:.4f}" if cost is not None else "unknown"])
    out = ["<h2>LM usage and cost</h2>"]
    if rows:
        out.append(_table(["role / phase", "model", "calls", "to model", "from cache", "calls raised",
                           "prompt tokens", "completion tokens", "LM wall s", "cost"], rows))
        out.append(f"<p class='meta'>estimated cost: ${total_cost:.4f}"
                   + ("" if known else " (some models have no known price; counted as unknown)")
                   + ". Prices from LiteLLM's bundled price list; self-hosted models cost nothing per token.</p>")
    return "".join(out)


def _totals_section(rep: dict) -> str:
    """The same footer as the terminal and Markdown reports (one source for every count)."""
    lines = footer_lines(rep)
    return "".join(f"<p class='meta' data-footer>{escape(line)}</p>" for line in lines)


def _instructions_section(rep: dict) -> str:
    instr = rep.get("instructions") or {}
    parts = []
    if isinstance(instr, dict) and instr:
        parts.append("<h2>Optimized instructions</h2>")
        for k, v in instr.items():
            parts.append(f"<p class='meta'>{escape(str(k))}</p><pre>{escape(str(v))}</pre>")
    if rep.get("calibrated_prompt"):
        parts.append(f"<h2>Calibrated prompt</h2><pre>{escape(str(rep['calibrated_prompt']))}</pre>")
    if rep.get("prompt_uri"):
        parts.append(f"<p class='meta'>registered as <code>{escape(str(rep['prompt_uri']))}</code></p>")
    champ = rep.get("champion")
    if isinstance(champ, dict):
        moved = "moved to this version" if champ.get("moved") else "not moved"
        parts.append(f"<p class='meta'>alias <code>champion</code> {moved}: {escape(str(champ.get('reason', '')))}"
                     f" (held-out π {_fmt(champ.get('pi'))})</p>")
        from verifirst.judging.robustness import report_lines as robustness_lines

        parts += [f"<p class='meta' data-robustness>{escape(line)}</p>" for line in robustness_lines(rep)]
    warns = rep.get("warnings")
    if isinstance(warns, list) and warns:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{escape(str(w))}</li>" for w in warns) + "</ul>")
    return "".join(parts)


# -- entry points ------------------------------------------------------------------------
def render(report: dict, images: dict[str, Path], run_dir: Path | None = None) -> str:
    report = redact(report)  # credentials never reach the page
    title = escape(f"{report.get('experiment', 'verifirst')} report")
    from verifirst.report.pareto import html_section

    body = "".join([_header(report), html_section(report), _splits_section(report), _before_after_section(report),
                    _plots_section(images), _judge_section(report), _teacher_section(report),
                    _usage_section(report), _totals_section(report), inspect_view.section(report, run_dir),
                    _instructions_section(report)])
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
            f"<style>{CSS}</style></head><body>{body}<p class='meta'>written {stamp}</p></body></html>\n")


def _resolve_run_dir(report: dict, run_dir: str | Path | None) -> Path | None:
    d = run_dir or report.get("run_dir")
    return Path(d) if d and Path(d).is_dir() else None


def write_html(report: dict, path: str | Path, run_dir: str | Path | None = None,
               plot_dir: str | Path | None = None) -> Path:
    """Write the page atomically; plots go to plot_dir (kept) or a temporary folder."""
    rd = _resolve_run_dir(report, run_dir)
    if plot_dir is not None:
        return atomic.write_text(path, render(report, plots.make_all(report, plot_dir), rd))
    with tempfile.TemporaryDirectory(prefix="verifirst-plots-") as d:
        return atomic.write_text(path, render(report, plots.make_all(report, d), rd))


def report_files(report: dict, run_dir: str | Path | None = None, published: bool = False) -> dict[str, Path]:
    """The report's files for a tracker to log: the plots (RUN/plots), report.html and the
    inspection views (RUN/inspection), drawn and written unless `publish` wrote them just now.

    Args:
        report: the run report.
        run_dir: the run directory (default: the report's run_dir; else a temporary folder).
        published: `publish` wrote report.html and its plots in run_dir: use those files.

    Returns:
        {plot name: path, "html": path, "inspection_<view>": path}.
    """
    rd = _resolve_run_dir(report, run_dir)
    base = rd or Path(tempfile.mkdtemp(prefix="verifirst-report-"))
    if published and rd is not None and (rd / "report.html").exists():
        images = {p.stem: p for p in sorted((rd / "plots").glob("*.png"))}
        html = rd / "report.html"
    else:
        images = plots.make_all(report, base / "plots")
        html = atomic.write_text(base / "report.html", render(report, images, rd))
    inspected = inspect_view.write_inspection(report, rd)
    return {**images, "html": html, **{f"inspection_{k}": p for k, p in inspected.items()}}


def publish(report: dict, run_dir: str | Path) -> list[Path]:
    """The run's report files: report.json, report.md and report.html (credentials masked).

    Args:
        report: the run report.
        run_dir: the run directory.
    """
    from verifirst.report import write_reports

    run_dir = Path(run_dir)
    for old in (run_dir / "plots").glob("*.png"):  # a resumed run's plots are drawn again from its report
        old.unlink()
    return [*write_reports(report, run_dir),
            write_html(report, run_dir / "report.html", run_dir=run_dir, plot_dir=run_dir / "plots")]
