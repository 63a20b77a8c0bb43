"""Inspecting an optimization: each item's output and verifier feedback before and after, side
by side; the diff from the seed to the optimized instructions; and GEPA's candidate lineage.

The per-item rows come from the run directory (eval/{before,after}_{split}.jsonl, and each
item's inputs from items.jsonl, all written by the driver), the instructions and the lineage
from the report. `section` renders all three for the HTML report; `write_inspection` writes them
under run_dir/inspection, where the tracking layer finds them to log (the per-item rows as an
MLflow table).
"""
from __future__ import annotations

import difflib
import json
from html import escape
from pathlib import Path
from typing import Any

from verifirst.core import atomic
from verifirst.loop.run_items import ITEMS_FILE, read_items

SPLIT_ORDER = ("train", "val", "test")
# How an item's verdict moved, in the order the table shows them.
CHANGES = ("gained", "lost", "changed", "new output", "", "no after row")
SHORT = 90  # characters of a cell shown before the rest folds into <details>

CSS = """
.inspect td,.inspect th{text-align:left;vertical-align:top}
table.items{table-layout:fixed;width:100%}table.items td{word-break:break-word}
table.items col.id{width:9%}table.items col.in{width:17%}
tr.gained td{background:#f0fff4}tr.lost td{background:#fff5f5}tr.changed td{background:#fffff0}
.mark{font-weight:600;font-size:.78rem;padding:0 .3rem;border-radius:3px;white-space:nowrap}
.mark.gained{background:#c6f6d5;color:#22543d}.mark.lost{background:#fed7d7;color:#742a2a}
.mark.changed{background:#fefcbf;color:#744210}
.v{font-weight:600}.v.PASS{color:#2f855a}.v.FAIL{color:#c53030}.v.ERROR{color:#718096}
.v.INCONCLUSIVE{color:#b7791f}
.inspect pre{margin:.15rem 0;padding:.3rem;font-size:.8rem}.inspect details summary{cursor:pointer}
.fb{font-size:.8rem;color:#2d3748}
.diff{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.82rem;border:1px solid #e2e8f0;
padding:.3rem 0;white-space:pre-wrap}
.diff div{padding:0 .6rem}.diff .del{background:#fff5f5;color:#9b2c2c}.diff .add{background:#f0fff4;color:#22543d}
.diff del{background:#feb2b2;text-decoration:line-through}.diff ins{background:#9ae6b4;text-decoration:none}
.diff .ctx{color:#4a5568}
svg.lineage text{font-family:system-ui,sans-serif;font-size:12px}
"""


# -- data ------------------------------------------------------------------------------
def read_rows(path: Path) -> dict[str, dict]:
    """An evaluation checkpoint's rows by item id; a resumed checkpoint repeats ids and the
    last row wins; unreadable lines are skipped.

    Args:
        path: a JSONL file of evaluation rows.
    """
    rows: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(d, dict) and "id" in d:
            rows[str(d["id"])] = d
    return rows


def item_inputs(run_dir: Path) -> tuple[dict[str, Any], str | None]:
    """The program inputs of every item, by id, from the run's items.jsonl (written by the
    driver for every run, from the Python API or an experiment file alike); ({}, why) when the
    run directory has none (a run written before the driver recorded its items).

    Args:
        run_dir: the run directory.
    """
    recorded = read_items(run_dir)
    if not recorded:
        return {}, (f"inputs not recorded: the run directory has no {ITEMS_FILE} (a run written before "
                    "the driver recorded the items it ran on)")
    return {iid: rec.get("inputs") for iid, rec in recorded.items()}, None


def change_of(before: dict, after: dict | None) -> str:
    """How the item moved: gained, lost, changed (another verdict), new output (same verdict),
    "" (same verdict and output), or no after row.

    Args:
        before: the item's row before optimization.
        after: its row after, or None.
    """
    if not after:
        return "no after row"
    b, a = before.get("status"), after.get("status")
    if b != a:
        return "gained" if a == "PASS" else "lost" if b == "PASS" else "changed"
    return "new output" if before.get("output") != after.get("output") else ""


def _text(x: Any) -> str:
    if x is None:
        return ""
    return x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, default=str)


def _input_text(inputs: Any) -> str:
    if isinstance(inputs, dict):
        return " · ".join(_text(v) for v in inputs.values())
    return _text(inputs)


def per_item(run_dir: Path | None) -> tuple[dict[str, list[dict]], str | None]:
    """Per split, one row per item with its input and both sides, changed items first.

    Args:
        run_dir: the run directory holding eval/{before,after}_{split}.jsonl.

    Returns:
        ({split: rows}, a note on missing inputs or None).
    """
    if run_dir is None or not (run_dir / "eval").is_dir():
        return {}, None
    names = {p.stem.split("_", 1)[1] for p in (run_dir / "eval").glob("before_*.jsonl")}
    splits = [s for s in SPLIT_ORDER if s in names] + sorted(names - set(SPLIT_ORDER))
    if not splits:
        return {}, None
    inputs, note = item_inputs(run_dir)
    out: dict[str, list[dict]] = {}
    for s in splits:
        before = read_rows(run_dir / "eval" / f"before_{s}.jsonl")
        a = run_dir / "eval" / f"after_{s}.jsonl"
        after = read_rows(a) if a.exists() else {}
        rows = []
        for iid, b in before.items():
            q = after.get(iid)
            row_in = b.get("inputs", b.get("input"))  # a row that carries its input wins
            rows.append({"split": s, "id": iid,
                         "input": _input_text(row_in if row_in is not None else inputs.get(iid)),
                         "change": change_of(b, q), "before": b, "after": q or {}})
        rows.sort(key=lambda r: (CHANGES.index(r["change"]), r["id"]))
        out[s] = rows
    return out, note


def seed_instructions(report: dict) -> tuple[dict | None, str]:
    """The instructions the optimizer started from and where they were found.

    Args:
        report: the run report (its engine details and optimized instructions).
    """
    det = report.get("details") if isinstance(report.get("details"), dict) else {}
    if isinstance(det.get("seed_instructions"), dict):
        return det["seed_instructions"], "the engine's record of the program it was handed"
    cands = det.get("candidates")
    if isinstance(cands, list) and cands and isinstance(cands[0], dict):
        return cands[0], "GEPA's candidate 0 (the seed program)"
    if report.get("instructions") and report.get("instructions_changed") is False:
        return dict(report["instructions"]), "unchanged by the optimizer (instructions_changed is false)"
    return None, (f"the {report.get('engine') or 'optimizer'} engine did not record the seed instructions, "
                  "so there is nothing to diff against")


def unified_diff(report: dict) -> str:
    """The seed -> optimized instructions as a unified diff per predictor ("" without a seed).

    Args:
        report: the run report.
    """
    seed, _ = seed_instructions(report)
    if seed is None:
        return ""
    opt = report.get("instructions") or {}
    parts = []
    for name in list(dict.fromkeys([*seed, *opt])):
        parts += difflib.unified_diff(_text(seed.get(name)).splitlines(), _text(opt.get(name)).splitlines(),
                                      f"seed/{name}", f"optimized/{name}", lineterm="")
    return "\n".join(parts) + ("\n" if parts else "")


def lineage(report: dict) -> list[dict] | None:
    """GEPA's candidate lineage from the report (None when the engine recorded none).

    Args:
        report: the run report (details.lineage, one row per candidate).
    """
    det = report.get("details") if isinstance(report.get("details"), dict) else {}
    rows = det.get("lineage")
    return rows if isinstance(rows, list) else None


# -- HTML ------------------------------------------------------------------------------
def _fold(text: str, cls: str = "", pre: bool = True, short: int = SHORT) -> str:
    """Short text in full; long or multi-line text folded under its first `short` characters."""
    if not text:
        return "<span class='meta'>–</span>"
    wrap = (lambda t: f"<pre class='{cls}'>{escape(t)}</pre>") if pre else (
        lambda t: f"<span class='{cls}'>{escape(t)}</span>")
    if len(text) <= short and "\n" not in text:
        return wrap(text)
    head = text.split("\n", 1)[0][:short]
    return f"<details><summary>{escape(head)}…</summary>{wrap(text)}</details>"


def _reflection_html(text: str) -> str:
    """The reflection LM's answer; a JSON answer field by field (its reasoning readable at once)."""
    try:
        fields = json.loads(text)
    except ValueError:
        fields = None
    if not isinstance(fields, dict):
        return _fold(text, short=300)
    return "".join(f"<div><b>{escape(str(k))}</b>: {_fold(_text(v), 'fb', pre=False, short=300)}</div>"
                   for k, v in fields.items())


def _verdict(row: dict) -> str:
    if not row:
        return "<span class='meta'>not evaluated</span>"
    st = str(row.get("status", "?"))
    bits = [f"<span class='v {escape(st)}'>{escape(st)}</span>"]
    if row.get("stage") and row.get("stage") != st:
        bits.append(f"<span class='meta'>{escape(str(row['stage']))}</span>")
    fb = _text(row.get("feedback"))
    if row.get("error"):
        fb = f"{row.get('error_kind') or 'error'}: {_text(row['error'])}" + (f"\n{fb}" if fb else "")
    return " ".join(bits) + (f"<div class='fb'>{_fold(fb, 'fb', pre=False)}</div>" if fb else "")


def _mark(change: str) -> str:
    cls = change if change in ("gained", "lost") else "changed"
    return f"<span class='mark {cls}'>{escape(change)}</span>" if change in CHANGES[:3] else ""


def per_item_html(run_dir: Path | None, limit: int = 200) -> str:
    """Per split, a table item | input | before output | before verdict | after output |
    after verdict; gained and lost items first and highlighted; long text folded.

    Args:
        run_dir: the run directory holding eval/{before,after}_{split}.jsonl.
        limit: most rows shown per split (changed items come first).
    """
    by_split, note = per_item(run_dir)
    if not by_split:
        return ""
    out = ["<h2 id='per-item'>Per item: before / after</h2>",
           "<p class='note'>Each item's program output and the verifier's verdict and feedback before and "
           "after optimization, side by side. Items whose verdict moved come first: <span class='mark gained'>"
           "gained</span> passes only after, <span class='mark lost'>lost</span> passed only before.</p>"]
    if note:
        out.append(f"<p class='meta'>{escape(note)}</p>")
    if all(r["change"] == "no after row" for rows in by_split.values() for r in rows):
        out.append("<p class='meta'>no after evaluation in this run directory: the program was evaluated once "
                   "(optimizer none, or a run that stopped before the after pass)</p>")
    for s, rows in by_split.items():
        counts = {c: sum(r["change"] == c for r in rows) for c in CHANGES}
        summary = (f"{len(rows)} items: {counts['gained']} gained, {counts['lost']} lost, "
                   f"{counts['changed']} other verdict changes, {counts['new output']} new output with the same "
                   "verdict" + (f", {counts['no after row']} without an after row" if counts["no after row"] else ""))
        body = []
        for r in rows[:limit]:
            b, a = r["before"], r["after"]
            cls = r["change"] if r["change"] in ("gained", "lost", "changed") else ""
            body.append(f"<tr class='{cls}'><td>{escape(r['id'])}<br>{_mark(r['change'])}</td>"
                        f"<td>{_fold(r['input'], pre=False)}</td><td>{_fold(_text(b.get('output')))}</td>"
                        f"<td>{_verdict(b)}</td><td>{_fold(_text(a.get('output'))) if a else '–'}</td>"
                        f"<td>{_verdict(a)}</td></tr>")
        more = (f"<p class='meta'>showing {limit} of {len(rows)} items, every changed item first</p>"
                if len(rows) > limit else "")
        out.append(f"<details open data-split='{escape(s)}'><summary><b>Per item ({escape(s)})</b> — "
                   f"{escape(summary)}</summary>"
                   "<table class='items'><colgroup><col class='id'><col class='in'><col><col><col><col>"
                   "</colgroup><thead><tr><th>item</th><th>input</th><th>before: output</th>"
                   "<th>before: verdict, feedback</th><th>after: output</th><th>after: verdict, feedback</th>"
                   f"</tr></thead><tbody>{''.join(body)}</tbody></table>{more}</details>")
    return "".join(out)


def _word_diff(a: str, b: str) -> tuple[str, str]:
    """The two lines with the words only one of them has marked (<del> in a, <ins> in b)."""
    wa, wb = a.split(" "), b.split(" ")
    la, lb = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        x, y = escape(" ".join(wa[i1:i2])), escape(" ".join(wb[j1:j2]))
        if op == "equal":
            la.append(x)
            lb.append(y)
        else:
            if x:
                la.append(f"<del>{x}</del>")
            if y:
                lb.append(f"<ins>{y}</ins>")
    return " ".join(la), " ".join(lb)


def diff_html(seed: str, optimized: str) -> str:
    """A red/green line diff of two instruction texts, changed words marked within lines.

    Args:
        seed: the text before.
        optimized: the text after.
    """
    a, b = seed.splitlines() or [""], optimized.splitlines() or [""]
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out += [f"<div class='ctx'>  {escape(x)}</div>" for x in a[i1:i2]]
            continue
        olds, news = a[i1:i2], b[j1:j2]
        for k in range(max(len(olds), len(news))):
            o, n = (olds[k] if k < len(olds) else None), (news[k] if k < len(news) else None)
            if o is not None and n is not None:
                o, n = _word_diff(o, n)
            else:
                o, n = (escape(o) if o is not None else None), (escape(n) if n is not None else None)
            if o is not None:
                out.append(f"<div class='del'>- {o}</div>")
            if n is not None:
                out.append(f"<div class='add'>+ {n}</div>")
    return f"<div class='diff'>{''.join(out)}</div>"


def prompt_diff_html(report: dict) -> str:
    """Per predictor, the seed -> optimized instruction diff; says so when there is no seed.

    Args:
        report: the run report.
    """
    opt = report.get("instructions")
    if not isinstance(opt, dict) or not opt:
        return ""
    seed, source = seed_instructions(report)
    out = ["<h2 id='prompt-diff'>Prompt diff: seed → optimized instructions</h2>"]
    if seed is None:
        out.append(f"<p class='note'>No diff: {escape(source)}.</p>")
        return "".join(out)
    out.append(f"<p class='meta'>seed instructions from {escape(source)}; "
               "<span class='down'>- removed</span>, <span class='up'>+ added</span></p>")
    for name in list(dict.fromkeys([*seed, *opt])):
        s, o = _text(seed.get(name)), _text(opt.get(name))
        same = " (unchanged)" if s == o else ""
        out.append(f"<h3>{escape(name)}{same}</h3>{diff_html(s, o)}")
    return "".join(out)


def _depths(rows: list[dict]) -> dict[int, int]:
    depth: dict[int, int] = {}
    for r in sorted(rows, key=lambda r: r["idx"]):  # a parent always has a lower index
        depth[r["idx"]] = 1 + max((depth.get(p, 0) for p in r.get("parents") or []), default=-1)
    return depth


def lineage_svg(rows: list[dict]) -> str:
    """The candidate tree: one column per generation, an arrow from each parent to its child,
    each node with its index and validation score; the selected candidate outlined in green.

    Args:
        rows: the lineage rows (idx, parents, val_score, best).
    """
    depth = _depths(rows)
    slot: dict[int, int] = {}
    used: dict[int, int] = {}
    for r in sorted(rows, key=lambda r: r["idx"]):
        d = depth[r["idx"]]
        slot[r["idx"]] = used.get(d, 0)
        used[d] = used.get(d, 0) + 1
    w, h, gx, gy = 118, 38, 168, 52
    pos = {i: (12 + depth[i] * gx, 12 + slot[i] * gy) for i in depth}
    width = 24 + (max(depth.values()) + 1) * gx - (gx - w)
    height = 24 + max(used.values()) * gy - (gy - h)
    parts = [f"<svg class='lineage' role='img' aria-label='GEPA candidate lineage' width='{width}' "
             f"height='{height}' viewBox='0 0 {width} {height}'>",
             "<defs><marker id='arr' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' markerHeight='7' "
             "orient='auto'><path d='M0,0 L10,5 L0,10 z' fill='#718096'/></marker></defs>"]
    for r in rows:
        cx, cy = pos[r["idx"]]
        for p in r.get("parents") or []:
            if p in pos:
                px, py = pos[p]
                parts.append(f"<line x1='{px + w}' y1='{py + h / 2}' x2='{cx - 2}' y2='{cy + h / 2}' "
                             "stroke='#718096' stroke-width='1.4' marker-end='url(#arr)'/>")
    for r in rows:
        x, y = pos[r["idx"]]
        best = bool(r.get("best"))
        stroke, fill = ("#2f855a", "#f0fff4") if best else ("#a0aec0", "#f7fafc" if r["idx"] else "#edf2f7")
        score = r.get("val_score")
        label = f"val {score:.3g}" if isinstance(score, (int, float)) else "val –"
        parts.append(f"<g data-candidate='{r['idx']}'><rect x='{x}' y='{y}' width='{w}' height='{h}' rx='6' "
                     f"fill='{fill}' stroke='{stroke}' stroke-width='{2.5 if best else 1.2}'/>"
                     f"<text x='{x + 8}' y='{y + 16}' font-weight='600'>#{r['idx']}"
                     f"{' seed' if r['idx'] == 0 else ''}{' ★ selected' if best else ''}</text>"
                     f"<text x='{x + 8}' y='{y + 31}' fill='#4a5568'>{escape(label)}</text></g>")
    parts.append("</svg>")
    return "".join(parts)


def lineage_html(report: dict) -> str:
    """GEPA's candidates: the tree, then a table of each candidate's parents, score,
    instructions (as a diff against its first parent) and the reflection that proposed it.

    Args:
        report: the run report (details.lineage, written by the GEPA engine).
    """
    rows = lineage(report)
    if rows is None:
        if report.get("engine") == "gepa":
            return ("<h2 id='lineage'>GEPA lineage</h2><p class='note'>No lineage in this report: it was "
                    "written before the GEPA engine recorded one.</p>")
        return ""
    if not rows:
        return "<h2 id='lineage'>GEPA lineage</h2><p class='note'>GEPA recorded no candidates.</p>"
    by_idx = {r["idx"]: r for r in rows}
    out = ["<h2 id='lineage'>GEPA lineage</h2>",
           f"<p class='meta'>{len(rows)} candidates; an arrow runs from a parent to the candidate the "
           "reflection made from it; val is the candidate's validation score (the split that selects).</p>",
           lineage_svg(rows)]
    body = []
    for r in rows:
        ps = r.get("parents") or []
        instr = r.get("instructions") or {}
        if ps and ps[0] in by_idx:
            parent_instr = by_idx[ps[0]].get("instructions") or {}
            shown = "".join(f"<div class='meta'>{escape(k)}</div>{diff_html(_text(parent_instr.get(k)), _text(v))}"
                            for k, v in instr.items() if _text(parent_instr.get(k)) != _text(v)) or \
                "<span class='meta'>same text as its parent</span>"
        else:
            shown = "".join(f"<div class='meta'>{escape(k)}</div>{_fold(_text(v))}" for k, v in instr.items())
        refl = r.get("reflection")
        refl_html = (_reflection_html(_text(refl)) if refl
                     else f"<span class='meta'>none: {escape(str(r.get('reflection_note') or 'not recorded'))}</span>")
        score = r.get("val_score")
        body.append(f"<tr data-candidate='{r['idx']}'><td>#{r['idx']}{' ★' if r.get('best') else ''}</td>"
                    f"<td>{escape(', '.join(f'#{p}' for p in ps)) or '–'}</td>"
                    f"<td>{'%.3g' % score if isinstance(score, (int, float)) else '–'}</td>"
                    f"<td>{escape(str(r.get('iteration') if r.get('iteration') is not None else '–'))} / "
                    f"{escape(str(r.get('metric_calls_at_discovery', '–')))}</td>"
                    f"<td>{shown}</td><td>{refl_html}</td></tr>")
    out.append("<table class='items'><colgroup><col style='width:10%'><col style='width:8%'><col style='width:7%'>"
               "<col style='width:10%'><col style='width:37%'><col></colgroup><thead><tr><th>candidate</th>"
               "<th>parents</th><th>val score</th><th>iteration / metric calls</th>"
               "<th>instructions (changes from its parent)</th><th>reflection</th></tr></thead>"
               f"<tbody>{''.join(body)}</tbody></table>")
    return "".join(out)


def section(report: dict, run_dir: Path | None) -> str:
    """The three inspection views for the HTML report ("" when the run has none of them).

    Args:
        report: the run report.
        run_dir: the run directory, or None.
    """
    parts = [per_item_html(run_dir), prompt_diff_html(report), lineage_html(report)]
    return f"<section class='inspect' id='inspection'>{''.join(parts)}</section>" if any(parts) else ""


# -- MLflow ----------------------------------------------------------------------------
def table_columns(by_split: dict[str, list[dict]]) -> dict[str, list]:
    """The per-item rows as columns for an MLflow table (text cells, one row per item and split).

    Args:
        by_split: what `per_item` returns first.
    """
    cols: dict[str, list] = {k: [] for k in (
        "split", "item_id", "input", "change", "before_status", "before_stage", "before_output",
        "before_feedback", "after_status", "after_stage", "after_output", "after_feedback")}
    for rows in by_split.values():
        for r in rows:
            b, a = r["before"], r["after"]
            vals = [r["split"], r["id"], r["input"], r["change"] or "same",
                    b.get("status"), b.get("stage"), b.get("output"), b.get("feedback") or b.get("error"),
                    a.get("status"), a.get("stage"), a.get("output"), a.get("feedback") or a.get("error")]
            for k, v in zip(cols, vals):
                cols[k].append(_text(v))
    return cols


def write_inspection(report: dict, run_dir: str | Path | None) -> dict[str, Path]:
    """Write the per-item rows (as MLflow table columns), the prompt diff and GEPA's lineage under
    run_dir/inspection; the tracking layer logs them (verifirst.tracking.callback).

    Args:
        report: the run report.
        run_dir: the run directory; None writes nothing.

    Returns:
        {"per_item" | "prompt_diff" | "lineage": path} for the files written.
    """
    rd = Path(run_dir) if run_dir else None
    files: dict[str, Path] = {}
    if rd is None:
        return files
    by_split, _ = per_item(rd)
    out = rd / "inspection"
    if by_split:
        files["per_item"] = atomic.write_json(out / "per_item.json", table_columns(by_split))
    diff = unified_diff(report)
    if diff:
        files["prompt_diff"] = atomic.write_text(out / "prompt_diff.diff", diff)
    rows = lineage(report)
    if rows is not None:
        files["lineage"] = atomic.write_json(out / "gepa_lineage.json", rows)
    return files
