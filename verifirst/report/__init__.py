"""Reports of an optimization run: JSON (the record), Markdown and a terminal table.

report.json is strict JSON (browsers and jq reject NaN and Infinity): a number that is not finite
is written as null, and beside it, in the same object, `<key>_null_reason` says why, e.g.
`"pi": null, "pi_null_reason": "undefined (NaN): ..."`. A list holding such numbers gets its
nulls the same way and one reason under its own key (`"ci": [null, null], "ci_null_reason": ...`).
A reason the producer already set is kept. Credentials are masked (verifirst.core.redaction) in every
report written.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Sequence

from verifirst.core import atomic
from verifirst.core.redaction import redact

NAN_REASON = "undefined (NaN): not computable on these items, e.g. none scored or only one label class"
INF_REASON = "infinite: a division by zero on these items"


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}%" if _finite(x) else "n/a"


def _num(x: Any, spec: str) -> str:
    return format(x, spec) if _finite(x) else "n/a"


def _reason(x: Any) -> str | None:
    """Why a value cannot be written as a JSON number, or None when it can (or holds none)."""
    if isinstance(x, float) and not math.isfinite(x):
        return NAN_REASON if math.isnan(x) else INF_REASON
    if isinstance(x, (list, tuple)):
        return next((r for r in map(_reason, x) if r), None)
    return None


def _strict_value(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return strict_json(x)
    if isinstance(x, (list, tuple)):
        return [_strict_value(v) for v in x]
    return x


def strict_json(obj: Any) -> Any:
    """A copy of `obj` that json.dumps(allow_nan=False) accepts: NaN and ±inf become null, and
    `<key>_null_reason` beside each such key says why (see the module docstring).

    Args:
        obj: a report or any part of one.
    """
    if not isinstance(obj, dict):
        return _strict_value(obj)
    out: dict = {}
    for k, v in obj.items():
        out[k] = _strict_value(v)
        reason = _reason(v) if isinstance(v, (float, list, tuple)) else None
        if reason and f"{k}_null_reason" not in obj:
            out[f"{k}_null_reason"] = reason
    return out


def unscored(summary: dict) -> dict[str, int]:
    """A split summary's items without a verdict, by cause: lm, verifier, inconclusive, program
    (the program itself raised).

    Reports older than the lm/verifier split counted every ERROR row as an LM error."""
    errors = int(summary.get("errors") or 0)
    verifier = int(summary.get("verifier_errors") or 0)
    lm = int(summary["lm_errors"]) if "lm_errors" in summary else errors - verifier
    return {"lm": lm, "verifier": verifier, "inconclusive": int(summary.get("inconclusive") or 0),
            "program": int(summary.get("program_errors") or 0)}


def unscored_totals(report: dict, phase: str) -> dict[str, int]:
    """Items without a verdict in one phase over every split: the sums of the table's columns.

    Args:
        report: a run report.
        phase: "before" or "after".
    """
    out = {"lm": 0, "verifier": 0, "inconclusive": 0, "program": 0}
    for body in report.get("splits", {}).values():
        if isinstance(body.get(phase), dict):
            for k, v in unscored(body[phase]).items():
                out[k] += v
    return out


UNSCORED_COLUMNS = (("lm_errors", "lm"), ("verifier_errors", "verifier"), ("inconclusive", "inconclusive"))


def _pair(b: dict, a: dict, key: str) -> str:
    return f"{unscored(b)[key]}/{unscored(a)[key]}"


def _rate(d: dict) -> str:
    return f"{_pct(d['pass_rate'])} [{_pct(d['ci_lo'])}, {_pct(d['ci_hi'])}]"


def split_rows(report: dict) -> list[dict]:
    rows = []
    for split, body in report.get("splits", {}).items():
        b, a, c = body["before"], body["after"], body["comparison"]
        if a is None:  # a run stopped by its budget scores only the test split again
            rows.append({"split": split, "n": b["n"], "before": _rate(b),
                         "after": f"not scored: {body.get('not_scored', 'budget')}", "delta": "—",
                         "mcnemar_p": "—", "discordant": "—",
                         **{k: f"{unscored(b)[cause]}/—" for k, cause in UNSCORED_COLUMNS}})
            continue
        rows.append({
            "split": split, "n": b["n"], "before": _rate(b), "after": _rate(a),
            "delta": f"{_num(100 * c['delta'] if _finite(c['delta']) else None, '+.1f')} pp",
            "mcnemar_p": _num(c["mcnemar_p"], ".3g"),
            "discordant": f"{c['b_before_only']}/{c['c_after_only']}",
            **{k: _pair(b, a, cause) for k, cause in UNSCORED_COLUMNS},
        })
    return rows


# Item columns say "items": an LM call that failed and was retried successfully is no item error.
HEADERS = [("split", "split"), ("n", "n"), ("before", "before pass [95% Wilson]"),
           ("after", "after pass [95% Wilson]"), ("delta", "Δ"), ("mcnemar_p", "McNemar p"),
           ("discordant", "lost/gained"), ("lm_errors", "items LM err b/a"),
           ("verifier_errors", "items verifier err b/a"), ("inconclusive", "inconclusive b/a")]


def footer_lines(report: dict) -> list[str]:
    """The run's totals under the tables. Item counts are the tables' own sums; model calls that
    failed (then retried or not) are a different count and say so."""
    lines = []
    st = report.get("stopped")
    if isinstance(st, dict):
        lines.append(f"{st['by'][0].upper()}{st['by'][1:]}. The run returns {st['kept']}; "
                     + ("the test split was scored once with what was held back for it"
                        if st.get("test") == "scored" else "test not scored: budget (nothing is claimed)")
                     + (f"; {', '.join(s for s in st.get('not_scored', {}) if s != 'test')} not scored again"
                        if any(s != "test" for s in st.get("not_scored", {})) else "")
                     + ". Rerun on the same run directory with a larger limit to finish it.")
    if report.get("splits"):
        parts = []
        for phase in ("before", "after"):
            t = unscored_totals(report, phase)
            parts.append(f"{phase}: {t['lm']} with no LM output, {t['verifier']} verifier errors, "
                         f"{t['inconclusive']} inconclusive"
                         + (f", {t['program']} program errors (the program raised)" if t["program"] else ""))
        lines.append("Items without a verdict (all splits), " + "; ".join(parts) + ".")
    u = report.get("usage_this_run")
    if u:
        msg = (f"LM calls this run: {u['lm_calls']} to the model, {u['cache_hits']} from cache, "
               f"{u['errors']} calls raised at the model or provider (retried where possible); "
               f"{u['prompt_tokens']} prompt + {u['completion_tokens']} completion tokens")
        if "attempts" in u:  # every request sent, retries included; reports before attempts were counted lack it
            msg += (f"; {u['attempts']} requests sent (retries included), {u['failed_attempts']} failed, "
                    f"{u.get('unusable', 0)} replies unusable (empty, cut short or off-schema)")
        if u["lm_calls"] == 0 and u["cache_hits"] > 0:
            msg += " — every call was served from the cache (identical rerun)"
        lines.append(msg + ".")
    sp = report.get("spend")
    if isinstance(sp, dict):  # a run under spend limits: what it spent against each limit
        run, lim = sp.get("run") or {}, (sp.get("limits") or {}).get("run") or {}
        caps = ", ".join(f"{k} {v}" for k, v in lim.items() if v is not None) or "per role only"
        roles = "; ".join(f"{r} {c.get('usd', 0):.4f} USD, {c.get('tokens', 0)} tokens, {c.get('lm_calls', 0)} calls"
                          for r, c in sorted((sp.get("roles") or {}).items()))
        lines.append(f"Spend: {run.get('usd', 0):.4f} USD, {run.get('tokens', 0)} tokens, {run.get('lm_calls', 0)} "
                     f"LM calls in {sp.get('wall_s', 0):.0f} s (limits: {caps})" + (f"; by role: {roles}" if roles else "")
                     + ".")
    for role, eps in sorted((report.get("usage_endpoints") or {}).items()):  # roles served by several endpoints
        lines.append(f"LM endpoints for {role}: " + "; ".join(
            f"{ep} {c['calls']} attempts, {c['errors']} failed, "
            f"{c['prompt_tokens'] + c['completion_tokens']} tokens" for ep, c in eps.items()) + ".")
    tf = report.get("tracking_failures")
    if isinstance(tf, dict) and tf.get("count"):
        lines.append(f"Tracking: {tf['count']} trace or feedback operation(s) failed and were skipped; "
                     f"the first: {tf.get('first')}. The result rows and this report are unaffected.")
    reuse = report.get("test_reuse")
    if isinstance(reuse, dict) and reuse.get("message"):
        lines.append(f"Test reuse: {reuse['message']}.")
    return lines


JUDGE_HEADERS = ("judge", "π (Scott)", "FAIL recall", "FAIL precision", "PASS recall", "accuracy")


def _judge(report: dict) -> dict:
    j = report.get("judge")
    return j if isinstance(j, dict) else {}


def judge_title(report: dict) -> str:
    """The judge table's title: how many held-out test items were scored, and their labels."""
    t = _judge(report).get("test") or {}
    return (f"judge agreement on the held-out test split ({t.get('n_scored')} of {t.get('n_items')} scored; "
            f"labels {t.get('label_counts')})")


def judge_rows(report: dict) -> list[list[str]]:
    """One row per judge (calibrated, uncalibrated baselines) of a calibration report's test split.

    Args:
        report: a report with a `judge` section (verifirst calibrate); others have no rows.
    """
    judges = (_judge(report).get("test") or {}).get("judges") or {}
    return [[name, *(_num(j.get(k), ".3f") for k in ("pi", "fail_recall", "fail_precision", "pass_recall",
                                                    "accuracy"))] for name, j in judges.items()]


def judge_lines(report: dict) -> list[str]:
    """The judge section's paired comparisons, the teacher's decisions and its warnings.

    Args:
        report: a report with a `judge` section; others give no lines.
    """
    j = _judge(report)
    if not j:
        return []
    lines = []
    for name, c in ((j.get("test") or {}).get("comparisons") or {}).items():
        lo, hi = c.get("pi_ci95") or (None, None)
        p = (c.get("mcnemar_exact") or {}).get("p_value")
        lines.append(f"{name}: Δπ {_num(c.get('pi_delta'), '+.3f')} [95% paired bootstrap {_num(lo, '+.3f')}, "
                     f"{_num(hi, '+.3f')}], McNemar exact p {_num(p, '.3g')}")
    tc = j.get("teacher") or {}
    if tc.get("used"):
        lines.append(f"teacher: keep {tc.get('keep')}, correct {tc.get('correct')}, abstain {tc.get('abstain')}, "
                     f"errors {tc.get('error')}")
    lines += [f"warning: {w}" for w in j.get("warnings") or []]
    return lines


def labellers_line(report: dict) -> str | None:
    """Where records carried several labellers' labels: their Krippendorff's α with its interval,
    beside the calibrated judge's held-out π against the labels kept (a judge can hardly agree with
    the labels better than the people who gave them agree with each other). None otherwise.

    Args:
        report: a calibration report (its labels.agreement and judge sections).
    """
    a = (report.get("labels") or {}).get("agreement") if isinstance(report.get("labels"), dict) else None
    if not isinstance(a, dict) or a.get("alpha") is None:
        return None
    lo, hi = a.get("alpha_ci") or (None, None)
    judge = ((_judge(report).get("test") or {}).get("judges") or {}).get("calibrated") or {}
    beside = f"; the calibrated judge's held-out π {_num(judge.get('pi'), '.3f')}" if "pi" in judge else ""
    return (f"labellers {', '.join(map(str, a.get('labellers') or []))}: Krippendorff's α {_num(a['alpha'], '.3f')} "
            f"[{_num(lo, '.3f')}, {_num(hi, '.3f')}]; --labels {a.get('policy')} kept {a.get('kept')} of "
            f"{a.get('n_items')} records{beside}")


BASELINE_LABELS = {"baseline": "baseline (deployed)", "uncalibrated": "uncalibrated start",
                   "calibrated": "calibrated"}


def _baseline(report: dict) -> dict:
    b = report.get("baseline")
    return b if isinstance(b, dict) and b.get("columns") is not None else {}


def _when(x: Any) -> str:
    return str(x).replace("T00:00:00Z", "") if x else "?"


def baseline_title(report: dict) -> str:
    """The baseline table's title: which prompt is deployed and what the cells hold."""
    b = _baseline(report)
    return (f"recalibration against the deployed judge {b.get('source')}: Scott's π [95% bootstrap] and n per "
            f"window, judged by {b.get('judge_lm')} (reported only, decides nothing)")


def baseline_rows(report: dict) -> tuple[list[str], list[list[str]]]:
    """The judge × window table of a calibration run with --baseline: (headers, rows).

    Rows: the baseline, the uncalibrated start and the calibrated prompt, then the calibrated
    prompt's paired Δπ against the baseline and the exact McNemar p; columns: the current (test)
    window, then each older window. A report without a baseline section gives ([], []).

    Args:
        report: a calibration report (report["baseline"], written by the judge domain's score_baseline).
    """
    b = _baseline(report)
    cols = b.get("columns") or []
    if not cols:
        return [], []
    headers = ["judge"]
    for c in cols:
        span = f"{_when(c.get('start'))}/{_when(c.get('end'))}" if c.get("start") or c.get("end") else ""
        if c.get("current"):
            headers.append(f"current: test {span}".strip())
        else:
            parts = [f"{s} {c[f'n_{s}']}" for s in ("train", "val") if c.get(f"n_{s}")]
            what = span if c.get("window") not in ("train", "val") else f"{c['window']} {span}".strip()
            headers.append(f"older: {what} ({', '.join(parts)})")
    rows = []
    for name in b.get("judges") or list(BASELINE_LABELS):
        cells = [BASELINE_LABELS.get(name, name)]
        for c in cols:
            m = (c.get("judges") or {}).get(name)
            if not m:
                cells.append("n/a")
                continue
            lo, hi = m.get("pi_ci95") or (None, None)
            cells.append(f"{_num(m.get('pi'), '+.3f')} [{_num(lo, '+.2f')}, {_num(hi, '+.2f')}] n={m.get('n')}")
        rows.append(cells)
    delta, p = ["Δπ calibrated − baseline [95% paired]"], ["McNemar exact p"]
    for c in cols:
        v = c.get("calibrated_vs_baseline") or {}
        lo, hi = v.get("pi_ci95") or (None, None)
        delta.append(f"{_num(v.get('pi_delta'), '+.3f')} [{_num(lo, '+.2f')}, {_num(hi, '+.2f')}]" if v else "n/a")
        p.append(_num(v.get("mcnemar_p"), ".3g") if v else "n/a")
    return headers, rows + [delta, p]


def baseline_lines(report: dict) -> list[str]:
    """Under the baseline table: who is ahead where, the items left out, and that it decides nothing."""
    b = _baseline(report)
    if not b:
        return []
    cols = b.get("columns") or []
    if not cols:
        return ["baseline: no window to score it on (no test split and no older time window)"]
    lines = []
    ahead = [f"{'current (test)' if c.get('current') else _when(c.get('start'))}: {c['ahead']}"
             for c in cols if c.get("ahead")]
    if ahead:
        lines.append("ahead by π (calibrated vs baseline): " + "; ".join(ahead))
    lost = {c.get("window"): {k: v for k, v in (c.get("excluded_lm_errors") or {}).items() if v} for c in cols}
    lost = {w: e for w, e in lost.items() if e}
    if lost:
        lines.append(f"items left out for judge LM errors: {lost}")
    if b.get("split_method") != "time":
        lines.append("random split: one column; a time split (--split-by time --windows 7d) adds the older windows")
    lines.append(f"the baseline decides {b.get('decides')}; its test scoring is in the test-reuse ledger")
    return lines


def stage_funnel(seen: Iterable[str], declared: Sequence[str] | None = None) -> tuple[str, ...]:
    """The funnel the stages follow: the one the verifier declared (a report's `stage_order`),
    else the registered funnel that names one of the failing stages seen, else none.

    Args:
        seen: stage names that occurred.
        declared: the verifier's own stage order, when the report carries one.
    """
    if declared:
        return tuple(declared)
    from verifirst.core import registry
    failing = set(seen) - {"PASS", "ERROR"}
    return next((order for order in registry.stage_orders() if failing & (set(order) - {"PASS"})), ())


def stage_order(seen: Iterable[str], funnel: Sequence[str] | None = None) -> list[str]:
    """ERROR first, then the funnel's failing stages in order, other stages sorted, PASS on top.

    Args:
        seen: stage names that occurred.
        funnel: the verifier's declared order (default: a registered funnel matching `seen`).
    """
    seen = list(dict.fromkeys(seen))
    known = [s for s in stage_funnel(seen, funnel) if s in seen and s != "PASS"]
    rest = sorted(s for s in seen if s not in known and s not in ("PASS", "ERROR"))
    return (["ERROR"] if "ERROR" in seen else []) + known + rest + (["PASS"] if "PASS" in seen else [])


def stage_rows(report: dict) -> tuple[list[str], list[list[str]]]:
    """Where each split's items ended in the verifier, before and after: (stages, rows)."""
    phases = [(split, phase, body[phase].get("stages") or {})
              for split, body in report.get("splits", {}).items() for phase in ("before", "after")
              if isinstance(body.get(phase), dict)]
    seen = [k for _, _, st in phases for k in st]
    funnel = stage_funnel(seen, report.get("stage_order"))
    if set(seen) & (set(funnel) - {"PASS"}):
        seen += list(funnel)  # a funnel run: show every stage of it, zeros too
    order = stage_order(seen, funnel)
    if not order:
        return [], []
    return order, [[split, phase, *[str(st.get(k, 0)) for k in order]] for split, phase, st in phases]


def markdown(report: dict) -> str:
    lines = [f"# {report.get('experiment', 'experiment')}: {report.get('engine')} on {report.get('suite', '')}", ""]
    sizes = report.get("sizes", {})
    lines.append(f"Split digest `{report.get('split_digest')}`; train {sizes.get('train')}, val {sizes.get('val')}, "
                 f"test {sizes.get('test')} (test is held out: no optimizer saw it).")
    lines.append("")
    lines.append("| " + " | ".join(h for _, h in HEADERS) + " |")
    lines.append("|" + "---|" * len(HEADERS))
    for r in split_rows(report):
        lines.append("| " + " | ".join(str(r[k]) for k, _ in HEADERS) + " |")
    lines.append("")
    stages, rows = stage_rows(report)
    if stages:
        lines += ["Where the items ended in the verifier (counts per stage):", "",
                  "| split | phase | " + " | ".join(stages) + " |", "|" + "---|" * (len(stages) + 2)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
    if judge_rows(report):
        lines += [f"## {judge_title(report)[0].upper()}{judge_title(report)[1:]}", "",
                  "| " + " | ".join(JUDGE_HEADERS) + " |", "|" + "---|" * len(JUDGE_HEADERS)]
        lines += ["| " + " | ".join(r) + " |" for r in judge_rows(report)]
        lines += [""] + [f"- {line}" for line in judge_lines(report)] + [""]
    if labellers_line(report):
        lines += [f"{labellers_line(report)}.", ""]
    headers, rows = baseline_rows(report)
    if rows:
        title = baseline_title(report)
        lines += [f"## {title[0].upper()}{title[1:]}", "", "| " + " | ".join(headers) + " |",
                  "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines += [""] + [f"- {line}" for line in baseline_lines(report)] + [""]
    lines.append("McNemar's exact test pairs each item's before/after verdicts; 'lost/gained' counts items that "
                 "passed only before / only after. Items with an LM or verifier error, and inconclusive items, "
                 "are excluded from pass rates and reported apart.")
    for line in footer_lines(report):
        lines += ["", line]
    if report.get("instructions"):
        lines += ["", "## Optimized instructions", ""]
        for k, v in report["instructions"].items():
            lines += [f"**{k}**", "", "```", str(v), "```", ""]
    from verifirst.judging.robustness import report_lines as robustness_lines

    if robustness_lines(report):  # the promotion's robustness gate (flip rates with Wilson intervals)
        lines += ["", "## Robustness gate", ""] + [f"- {line}" for line in robustness_lines(report)]
    if report.get("run_id"):
        lines += ["", f"MLflow run `{report['run_id']}` at `{report.get('tracking_uri')}`."]
    return "\n".join(lines) + "\n"


def report_json(report: dict, indent: int | None = 2) -> str:
    """The report as report.json holds it (strict JSON, credentials masked), for `--json` output.

    Args:
        report: the run report (left unchanged).
        indent: as json.dumps.
    """
    import json

    return json.dumps(strict_json(redact(report)), indent=indent, default=str, allow_nan=False)


def write_reports(report: dict, run_dir: str | Path) -> list[Path]:
    """report.json (strict JSON, credentials masked) and report.md in `run_dir`.

    Args:
        report: the run report (left unchanged).
        run_dir: where the files go.
    """
    run_dir = Path(run_dir)
    clean = redact(report)
    return [atomic.write_json(run_dir / "report.json", strict_json(clean), strict=True),
            atomic.write_text(run_dir / "report.md", markdown(clean))]


def print_report(report: dict, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    from verifirst.report.tables import fit  # a table too wide for the console: one row at a time

    import sys

    console = console or Console(width=None if sys.stdout.isatty() else 140)
    t = Table(title=f"{report.get('experiment')}: {report.get('engine')} on {report.get('suite')} "
                    f"(split digest {report.get('split_digest')})")
    for _, h in HEADERS:
        t.add_column(h)
    for r in split_rows(report):
        t.add_row(*[str(r[k]) for k, _ in HEADERS])
    console.print(fit(t, console))
    stages, rows = stage_rows(report)
    if stages:
        st = Table(title="verifier stage reached (items)")
        for h in ("split", "phase", *stages):
            st.add_column(h)
        for r in rows:
            st.add_row(*r)
        console.print(fit(st, console))
    if judge_rows(report):
        jt = Table(title=judge_title(report))
        for h in JUDGE_HEADERS:
            jt.add_column(h)
        for r in judge_rows(report):
            jt.add_row(*r)
        console.print(fit(jt, console))
    for line in judge_lines(report) + [x for x in [labellers_line(report)] if x]:
        console.print(line, markup=False, soft_wrap=True)
    if report.get("engine") not in (None, "none") and report.get("instructions_changed") is False \
            and not report.get("stopped"):  # a stopped run says what it kept in its stop line
        console.print(f"{report['engine']} kept the seed instructions: no candidate beat them on validation.")
    for line in footer_lines(report):
        console.print(line, markup=False)
    if report.get("objective"):  # the candidates of a cost or latency objective, the Pareto front first
        from rich.text import Text

        from verifirst.report.pareto import HEADERS as FRONT_HEADERS, front_table, table_rows

        ft = Table(title=front_table(report).splitlines()[0])
        for h in FRONT_HEADERS:
            ft.add_column(h)
        for r in table_rows(report["objective"]):
            ft.add_row(*[Text(c) for c in r])
        console.print(fit(ft, console))
        for line in front_table(report).splitlines()[len(table_rows(report["objective"])) + 2:]:
            console.print(line, markup=False, soft_wrap=True)
