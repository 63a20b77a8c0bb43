"""Report plots (matplotlib Figure + Agg, no pyplot state): each function takes a report dict and an
output folder and returns the PNG it wrote, or None when the report lacks that data."""
from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

# Figure objects render through Agg on savefig without touching pyplot's global backend.
from matplotlib.figure import Figure

from verifirst.core import atomic
from verifirst.report import stage_order

SPLIT_ORDER = ("train", "val", "test")
BEFORE, AFTER = "#9aa5b1", "#2b6cb0"
STAGE_COLORS = {"PASS": "#2f855a", "ERROR": "#718096", "VALIDATE_FAIL": "#c53030", "PLAN_FAIL": "#dd6b20",
                "OPA_FAIL": "#d69e2e", "MISMATCH": "#b83280", "FAIL": "#b83280"}
_CYCLE = ["#805ad5", "#3182ce", "#d53f8c", "#38a169", "#e53e3e", "#dd6b20", "#319795", "#b7791f"]


def _save(fig: Figure, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return atomic.write_bytes(path, buf.getvalue())


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x else None


def splits_in_order(report: dict) -> list[str]:
    sp = report.get("splits") or {}
    return [s for s in SPLIT_ORDER if s in sp] + [s for s in sp if s not in SPLIT_ORDER]


def _phases(report: dict, split: str) -> list[tuple[str, dict]]:
    body = (report.get("splits") or {}).get(split) or {}
    return [(p, body[p]) for p in ("before", "after") if isinstance(body.get(p), dict)]


# -- pass rate ---------------------------------------------------------------------------
def pass_rate(report: dict, out_dir: str | Path) -> Path | None:
    """Before/after pass rate per split with 95% Wilson intervals."""
    splits = [s for s in splits_in_order(report) if _phases(report, s)]
    if not splits:
        return None
    fig = Figure(layout="constrained", figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    width = 0.38
    for j, (phase, color) in enumerate((("before", BEFORE), ("after", AFTER))):
        xs, ys, lo, hi, labels = [], [], [], [], []
        for i, s in enumerate(splits):
            d = dict(_phases(report, s)).get(phase)
            if not d or _num(d.get("pass_rate")) is None:
                continue
            r = d["pass_rate"]
            xs.append(i + (j - 0.5) * width)
            ys.append(100 * r)
            lo.append(100 * max(0.0, r - (_num(d.get("ci_lo")) if _num(d.get("ci_lo")) is not None else r)))
            hi.append(100 * max(0.0, (_num(d.get("ci_hi")) if _num(d.get("ci_hi")) is not None else r) - r))
            labels.append(f"{d.get('pass', '?')}/{d.get('scored', d.get('n', '?'))}")
        if not xs:
            continue
        ax.bar(xs, ys, width, color=color, label=phase, yerr=[lo, hi], capsize=4, ecolor="#2d3748")
        for x, t in zip(xs, labels):  # at the foot of the bar: clear of the CI caps
            ax.text(x, 1.5, t, ha="center", va="bottom", fontsize=8, color="black" if phase == "before" else "white")
    ax.set_xticks(range(len(splits)), splits)
    ax.set_ylim(0, 105)
    ax.set_ylabel("pass@1 (%)")
    ax.set_title("Pass rate before / after optimization (95% Wilson CI)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return _save(fig, Path(out_dir) / "pass_rate.png")


# -- stage funnel ------------------------------------------------------------------------
def stage_funnel(report: dict, out_dir: str | Path) -> Path | None:
    """Share of items ending at each verifier stage, per split, before and after (stacked)."""
    bars: list[tuple[str, dict]] = []
    for s in splits_in_order(report):
        for phase, d in _phases(report, s):
            if isinstance(d.get("stages"), dict) and d["stages"]:
                bars.append((f"{s}\n{phase}", d["stages"]))
    if not bars:
        return None
    order = stage_order(k for _, st in bars for k in st)
    fig = Figure(layout="constrained", figsize=(max(5.0, 1.0 * len(bars) + 2.5), 3.8))
    ax = fig.add_subplot()
    bottoms = [0.0] * len(bars)
    for k, stage in enumerate(order):
        vals, counts = [], []
        for label, st in bars:
            n = sum(v for v in st.values() if _num(v) is not None) or 1
            counts.append(int(st.get(stage, 0) or 0))
            vals.append(100.0 * counts[-1] / n)
        color = STAGE_COLORS.get(stage, _CYCLE[k % len(_CYCLE)])
        ax.bar(range(len(bars)), vals, 0.6, bottom=bottoms, color=color, label=stage, edgecolor="white")
        for i, (v, c) in enumerate(zip(vals, counts)):
            if c and v >= 7:
                ax.text(i, bottoms[i] + v / 2, str(c), ha="center", va="center", fontsize=8, color="white")
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_ylabel("items (%)")
    ax.set_title("Where items end: verifier stage funnel")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title="stage", title_fontsize=8)
    return _save(fig, Path(out_dir) / "stage_funnel.png")


# -- optimization curve ------------------------------------------------------------------
_X_KEYS = ("metric_calls", "step", "iteration")
_NOT_SERIES = {"metric_calls", "step", "iteration", "candidate_idx", "n_disagreements", "prompt_chars", "threshold"}


def _series_keys(rows: list[dict]) -> list[str]:
    keys: dict[str, None] = {}
    for r in rows:
        for k, v in r.items():
            if k not in _NOT_SERIES and _num(v) is not None and ("score" in k or "pi" in k.split("_")
                                                                  or "pass" in k or "accuracy" in k):
                keys[k] = None
    return list(keys)


def history(report: dict) -> list:
    """Per-iteration rows: an optimizer run's history, or a judge calibration's loop."""
    if report.get("history"):
        return list(report["history"])
    loop = report.get("loop")
    return list(loop.get("iterations") or []) if isinstance(loop, dict) else []


def optimization_curve(report: dict, out_dir: str | Path) -> Path | None:
    """Score against metric calls (or iteration), train markers and val lines."""
    rows = [r for r in history(report) if isinstance(r, dict)]
    if not rows:
        return None
    xkey = next((k for k in _X_KEYS if any(_num(r.get(k)) is not None for r in rows)), None)
    keys = _series_keys(rows)
    if not keys:
        return None
    fig = Figure(layout="constrained", figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    drawn = 0
    for k, key in enumerate(keys):
        pts = [(_num(r.get(xkey)) if xkey else float(i), _num(r.get(key))) for i, r in enumerate(rows)]
        pts = [(x, y) for x, y in pts if x is not None and y is not None]
        if not pts:
            continue
        xs, ys = zip(*pts)
        color = _CYCLE[k % len(_CYCLE)]
        if key.startswith("train"):
            ax.plot(xs, ys, "o", ms=4, alpha=0.7, color=color, label=key)
        elif key.startswith("best"):
            ax.step(xs, ys, where="post", color=color, lw=2, label=key)
        else:
            ax.plot(xs, ys, "-s", ms=4, color=color, label=key)
        drawn += 1
    if not drawn:
        return None
    ax.set_xlabel({"metric_calls": "metric calls", "step": "step", "iteration": "iteration"}.get(xkey, "update"))
    ax.set_ylabel("score")
    ax.set_title(f"Optimization curve ({report.get('engine') or ('autorefine' if report.get('loop') else 'optimizer')})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, Path(out_dir) / "optimization_curve.png")


# -- judges ------------------------------------------------------------------------------
def _is_confusion(d: Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("labels"), list) and isinstance(d.get("matrix"), list)


def find_confusions(report: dict) -> dict[str, dict]:
    """Confusion matrices ({labels, matrix}) under report['judge'] / ['judges'] / ['test']['judges'],
    named by where they sit."""
    found: dict[str, dict] = {}

    def walk(node: Any, name: str, depth: int) -> None:
        if depth > 4 or not isinstance(node, dict):
            return
        if _is_confusion(node):
            found[name or "judge"] = node
            return
        for k, v in node.items():
            if k == "confusion" and _is_confusion(v):
                found[name or "judge"] = v
            elif isinstance(v, dict):
                walk(v, f"{name}/{k}" if name else str(k), depth + 1)

    for root in ("judge", "judges"):
        walk(report.get(root), "", 0)
    test = report.get("test")
    if isinstance(test, dict):
        walk(test.get("judges"), "", 0)
    return found


def judge_confusion(report: dict, out_dir: str | Path) -> Path | None:
    """One confusion matrix per judge: rows the true label, columns the verdict."""
    mats = find_confusions(report)
    if not mats:
        return None
    n = len(mats)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig = Figure(layout="constrained", figsize=(3.3 * cols, 3.1 * rows))
    for i, (name, c) in enumerate(mats.items()):
        ax = fig.add_subplot(rows, cols, i + 1)
        m = [[float(v or 0) for v in row] for row in c["matrix"]]
        labels = [str(x) for x in c["labels"]]
        ax.imshow(m, cmap="Blues", vmin=0, vmax=max(1.0, max((v for r in m for v in r), default=1.0)))
        top = max((v for r in m for v in r), default=0.0)
        for r, row in enumerate(m):
            for q, v in enumerate(row):
                ax.text(q, r, f"{int(v)}", ha="center", va="center", fontsize=10,
                        color="white" if v > top / 2 else "black")
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_xlabel("judge verdict", fontsize=8)
        ax.set_ylabel("outcome label", fontsize=8)
        acc = _num(c.get("accuracy"))
        ax.set_title(name + (f" (acc {acc:.2f})" if acc is not None else ""), fontsize=9)
    fig.suptitle("Judge confusion matrices", fontsize=10)
    return _save(fig, Path(out_dir) / "judge_confusion.png")


# -- teacher -----------------------------------------------------------------------------
def teacher_groups(report: dict) -> dict[str, dict[str, dict]]:
    """{breakdown: {level: {n, keep, correct, skip}}} from the teacher stats wherever they sit."""
    cands = [report.get("teacher"), (report.get("teacher") or {}).get("stats") if isinstance(
        report.get("teacher"), dict) else None, (report.get("details") or {}).get("teacher")
        if isinstance(report.get("details"), dict) else None]
    for t in cands:
        if not isinstance(t, dict):
            continue
        out: dict[str, dict[str, dict]] = {}
        if isinstance(t.get("by_label"), dict) and t["by_label"]:
            out["label"] = t["by_label"]
        for field, body in (t.get("by_meta") or {}).items():
            levels = body.get("levels") if isinstance(body, dict) else None
            if isinstance(levels, dict) and levels:
                out[str(field)] = levels
        if out:
            return out
    return {}


def _skip(row: dict) -> int:
    return int(row.get("skip", row.get("abstain", 0)) or 0)


def teacher_abstention(report: dict, out_dir: str | Path, max_groups: int = 4) -> Path | None:
    """Teacher SKIP rate by recorded label (and metadata levels), labels give skips out of n."""
    groups = list(teacher_groups(report).items())[:max_groups]
    if not groups:
        return None
    nbars = sum(len(levels) for _, levels in groups)
    fig = Figure(layout="constrained", figsize=(6.4, 0.45 * nbars + 0.9 * len(groups) + 0.6))
    heights = [len(levels) + 0.6 for _, levels in groups]
    gs = fig.add_gridspec(len(groups), 1, height_ratios=heights)

    for g, (field, levels) in enumerate(groups):
        ax = fig.add_subplot(gs[g])
        names = list(levels)
        ns = [int(levels[k].get("n", 0) or 0) for k in names]
        sk = [_skip(levels[k]) for k in names]
        rates = [100.0 * s / n if n else 0.0 for s, n in zip(sk, ns)]
        ax.barh(range(len(names)), rates, 0.6, color=_CYCLE[g % len(_CYCLE)])
        for i, (r, s, n) in enumerate(zip(rates, sk, ns)):
            ax.text(min(r, 100) + 1, i, f"{s}/{n}", va="center", fontsize=8)
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.set_xlim(0, 112)
        ax.invert_yaxis()
        ax.set_title(f"by {field}", fontsize=9, loc="left")
        if g == len(groups) - 1:
            ax.set_xlabel("Teacher SKIP rate (%)")
        else:
            ax.tick_params(labelbottom=False)
    fig.suptitle("Where the teacher abstains", fontsize=10)
    return _save(fig, Path(out_dir) / "teacher_abstention.png")


# -- LM usage ----------------------------------------------------------------------------
def usage_rows(report: dict) -> dict[str, dict]:
    u = report.get("usage")
    if not isinstance(u, dict):
        return {}
    return {k: v for k, v in u.items() if k != "total" and isinstance(v, dict)}


def lm_usage(report: dict, out_dir: str | Path) -> Path | None:
    """Calls (to the model / from cache / errors) and tokens per role/split."""
    rows = usage_rows(report)
    if not rows:
        return None
    names = list(rows)
    fig = Figure(layout="constrained", figsize=(max(6.4, 0.9 * len(names) + 2), 3.8))
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    xs = range(len(names))
    bottom = [0.0] * len(names)
    for key, color in (("lm_calls", AFTER), ("cache_hits", BEFORE), ("errors", "#c53030")):
        vals = [float(rows[n].get(key, 0) or 0) for n in names]
        ax1.bar(xs, vals, 0.6, bottom=bottom, label=key.replace("_", " "), color=color)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax1.set_title("LM calls", fontsize=9)
    ax1.legend(fontsize=7)
    bottom = [0.0] * len(names)
    for key, color in (("prompt_tokens", "#805ad5"), ("completion_tokens", "#d53f8c")):
        vals = [float(rows[n].get(key, 0) or 0) for n in names]
        ax2.bar(xs, vals, 0.6, bottom=bottom, label=key.replace("_", " "), color=color)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax2.set_title("tokens", fontsize=9)
    ax2.legend(fontsize=7)
    for ax in (ax1, ax2):
        ax.set_xticks(list(xs), names, rotation=35, ha="right", fontsize=8)
    fig.suptitle("LM usage per role / split", fontsize=10)
    return _save(fig, Path(out_dir) / "lm_usage.png")


def pareto(report: dict, out_dir: str | Path) -> Path | None:
    """Validation quality against USD and latency per item for a cost or latency objective
    (verifirst.report.pareto)."""
    from verifirst.report.pareto import pareto_plot

    return pareto_plot(report, out_dir) if report.get("objective") else None


PLOTS = {"pass_rate": pass_rate, "stage_funnel": stage_funnel, "optimization_curve": optimization_curve,
         "judge_confusion": judge_confusion, "teacher_abstention": teacher_abstention, "lm_usage": lm_usage}


def make_all(report: dict, out_dir: str | Path) -> dict[str, Path]:
    """Every plot the report has data for, by name."""
    out: dict[str, Path] = {}
    for name, fn in PLOTS.items():
        p = fn(report, out_dir)
        if p is not None:
            out[name] = p
    p = pareto(report, out_dir)  # only a cost or latency objective's report has one
    if p is not None:
        out["pareto"] = p
    return out


# -- a deployed judge over time (verifirst monitor) ---------------------------------------
def monitor_windows(report: dict, out_dir: str | Path) -> Path | None:
    """π per window with its 95% interval against the baseline π, and the teacher's abstention rate:
    where the judge drifts, and whether it lacks inputs (abstention) or a better prompt (π)."""
    rows = [r for r in report.get("windows") or [] if isinstance(r, dict)]
    if not rows:
        return None
    fig = Figure(layout="constrained", figsize=(7.0, 3.8))
    ax = fig.add_subplot()
    xs = [r["index"] for r in rows]
    for r in rows:
        pi, ci = _num(r.get("pi")), r.get("pi_ci95")
        if pi is None:
            continue
        color = "#e53e3e" if r.get("status", "").startswith("drift") else AFTER
        err = [[pi - ci[0]], [ci[1] - pi]] if ci else None
        ax.errorbar([r["index"]], [pi], yerr=err, fmt="o", color=color, capsize=4, ecolor="#2d3748")
    base = _num((report.get("drift_rule") or {}).get("baseline_pi"))
    if base is not None:
        ax.axhline(base, color="#805ad5", linestyle="--", linewidth=1, label=f"baseline π {base:.2f}")
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("Scott's π vs labels")
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("window (oldest first)")
    ab = fig.axes[0].twinx()
    rates = [_num((r.get("teacher") or {}).get("abstention_rate")) for r in rows]
    ab.plot([x for x, v in zip(xs, rates) if v is not None], [100 * v for v in rates if v is not None],
            color="#dd6b20", marker="s", linewidth=1, label="teacher abstains (%)")
    ab.set_ylim(0, 100)
    ab.set_ylabel("teacher abstains (%)")
    limit = _num((report.get("drift_rule") or {}).get("max_abstention"))
    if limit is not None:
        ab.axhline(100 * limit, color="#dd6b20", linestyle=":", linewidth=1)
    ax.set_title("Deployed judge per window: π (95% CI; red = drift) and teacher abstention")
    handles = [h for a in (ax, ab) for h in a.get_legend_handles_labels()[0]]
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8)
    return _save(fig, Path(out_dir) / "monitor.png")
