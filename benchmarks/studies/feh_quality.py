"""FEH quality on the 600 NL2SH-ALFA pairs, the way S1 measures it.

300 (gold, gold2) pairs labelled equivalent, 300 (gold_i, gold2_{i+10}) labelled not, each run
in row i's fixture. Rule parameters are chosen by grouped k-fold cross-validation: every pair is
scored by parameters fitted on the other folds only. Sandbox runs and embeddings are cached.

Two modes on the same folds: `before` (INCONCLUSIVE off: every pair gets PASS or FAIL) and
`after` (pairs the runs cannot decide are INCONCLUSIVE, counted apart; fitting and accuracy,
P, R, F1 use the conclusive pairs). The false-equivalence rate is over all 300 rotated pairs.
The new-user probe (feh_new_user_probe.py) then runs held-out InterCode-Bash scripts.

    python benchmarks/studies/feh_quality.py --json [--llm local] [--folds 5] [--cache DIR] [--intercode DIR]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from verifirst.core.atomic import write_json, write_jsonl  # noqa: E402
from verifirst.benchmarks.nl2sh import load_nl2sh, nl2sh_pairs  # noqa: E402
from verifirst.core.stats import wilson  # noqa: E402
from verifirst.verifiers.bash._feh_compare import (EMBED_CHARS, FehParams, PairFeatures, RunView, decide,  # noqa: E402
                                                   norm_out, undecidable)
# The run and embedding machinery lives in _feh_runs (the new-user probe uses it too, without
# importing this module); re-exported so `feh_quality.RunCache` etc. keep working.
from verifirst.benchmarks.studies._feh_runs import (CACHE_VERSION, EmbedCache, RunCache,  # noqa: E402,F401
                                                    default_cache_dir, pair_features, run_pairs)

# The rule parameters CV chooses from. sorted_lines_equal stays on (line order of find/ls
# output is filesystem-dependent, not meaning): a design choice, not fitted.
GRID = {
    "out_threshold": [round(0.50 + 0.05 * i, 2) for i in range(10)],   # 0.50 .. 0.95
    "cmd_threshold": [0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.01],          # 1.01: never
    "status_veto": [True, False],
    "fs_veto": [True, False],
    "fs_effect_wins": [True, False],
    "sorted_lines_equal": [True],
    "overlap_threshold": [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.01],
    "overlap_min_tokens": [1, 2, 3],
    "output_over_status": [True, False],
    "inconclusive": [True],  # a design choice, not fitted; `before` runs the grid with [False]
}
_BOOLS = ("status_veto", "fs_veto", "fs_effect_wins", "sorted_lines_equal", "output_over_status", "inconclusive")
_NEVER = 2.0


def grid(space: dict = GRID, inconclusive: bool | None = None) -> list[FehParams]:
    """Every parameter combination of `space`; `inconclusive` overrides that switch's values."""
    if inconclusive is not None:
        space = {**space, "inconclusive": [inconclusive]}
    keys = list(space)
    return [FehParams(**dict(zip(keys, vals))) for vals in itertools.product(*(space[k] for k in keys))]


def predict(feats: Sequence[PairFeatures], p: FehParams) -> list[bool]:
    return [decide(f, p).equivalent for f in feats]


def undecided_mask(feats: Sequence[PairFeatures], inconclusive: bool = True):
    """Pairs the runs cannot decide (the same for every parameter set with the switch on)."""
    import numpy as np

    return np.array([inconclusive and undecidable(f) is not None for f in feats], dtype=bool)


def decision_matrix(feats: Sequence[PairFeatures], candidates: list[FehParams]):
    """M[j, i]: candidate j's verdict on pair i (== decide(), see tests), computed once so CV
    is array arithmetic. Which branch decides depends only on the switches; thresholds then
    act on arrays."""
    import numpy as np

    cos_cmd = np.array([f.cos_cmd if f.cos_cmd is not None else 0.0 for f in feats])
    cos_out = np.array([max(f.cos_out, 0.0) if f.cos_out is not None else 0.0 for f in feats])
    ov = np.array([f.token_overlap for f in feats])
    mt = np.array([f.min_tokens for f in feats])
    quiet_same = np.array([f.fs_equal and f.exit_equal and f.stderr_equal for f in feats])
    branch_cache: dict[tuple, tuple] = {}
    M = np.zeros((len(candidates), len(feats)), dtype=bool)
    for j, p in enumerate(candidates):
        sw = tuple(getattr(p, k) for k in (*_BOOLS, "fact_chars"))  # which branch decides
        if sw not in branch_cache:
            probe = replace(p, out_threshold=_NEVER, cmd_threshold=_NEVER, overlap_threshold=_NEVER)
            ds = [decide(f, probe) for f in feats]
            fixed = np.array([d.equivalent for d in ds])
            is_quiet = np.array([d.rule == "no_output_cmd" for d in ds])
            is_out = np.array([d.rule == "output_cosine" for d in ds])
            branch_cache[sw] = (fixed, is_quiet, is_out)
        fixed, is_quiet, is_out = branch_cache[sw]
        quiet_ok = quiet_same & (cos_cmd >= p.cmd_threshold)
        out_ok = (cos_out >= p.out_threshold) | ((ov >= p.overlap_threshold) & (mt >= p.overlap_min_tokens))
        M[j] = np.where(is_quiet, quiet_ok, np.where(is_out, out_ok, fixed))
    return M


def fit_index(M, y, rows, candidates: list[FehParams]) -> int:
    """Most accurate parameters on these pairs; ties go to the ones nearest S1's 0.75 and the
    defaults (a stable, data-independent order)."""
    import numpy as np

    acc = (M[:, rows] == y[rows]).sum(axis=1)
    d = FehParams()
    order = sorted(range(len(candidates)), key=lambda j: (
        -acc[j], abs(candidates[j].out_threshold - d.out_threshold),
        abs(candidates[j].cmd_threshold - d.cmd_threshold),
        sum(getattr(candidates[j], k) != getattr(d, k) for k in ("status_veto", "fs_veto",
                                                               "fs_effect_wins", "sorted_lines_equal"))))
    return order[0]


def fit(feats, labels, candidates: list[FehParams]) -> FehParams:
    import numpy as np

    M = decision_matrix(feats, candidates)
    y = np.array(labels, dtype=bool)
    return candidates[fit_index(M, y, np.arange(len(labels)), candidates)]


def folds_by_group(groups: Sequence[str], k: int, seed: int) -> list[int]:
    """Fold index per pair; a task's two pairs always share a fold."""
    uniq = sorted(set(groups))
    random.Random(seed).shuffle(uniq)
    gfold = {g: i % k for i, g in enumerate(uniq)}
    return [gfold[g] for g in groups]


def cross_validate(feats, labels, groups, k: int = 5, seed: int = 0, candidates=None, M=None,
                   undecided=None) -> dict:
    """Held-out predictions: fold j is scored with parameters fitted on the other folds.
    `undecided` (a bool mask) leaves INCONCLUSIVE pairs out of the fitting."""
    import numpy as np

    candidates = candidates or grid()
    M = decision_matrix(feats, candidates) if M is None else M
    y = np.array(labels, dtype=bool)
    fold = np.array(folds_by_group(groups, k, seed))
    skip = np.zeros(len(labels), dtype=bool) if undecided is None else np.asarray(undecided, dtype=bool)
    preds = np.zeros(len(labels), dtype=bool)
    chosen = []
    for j in range(k):
        best = fit_index(M, y, np.where((fold != j) & ~skip)[0], candidates)
        chosen.append(candidates[best].as_dict())
        te = np.where(fold == j)[0]
        preds[te] = M[best, te]
    return {"pred": [bool(x) for x in preds], "chosen": chosen, "fold": fold.tolist()}


def quality(labels: Sequence[bool], preds: Sequence[bool], undecided: Sequence[bool] | None = None) -> dict:
    """Accuracy, P, R, F1 (3 decimals) on the conclusive pairs; inconclusive ones counted apart.

    Args:
        labels: True for equivalent pairs.
        preds: the verdicts (True = equivalent); ignored where `undecided`.
        undecided: True where the verdict was INCONCLUSIVE; None = every pair decided.

    Returns:
        n (conclusive pairs), accuracy + Wilson 95% interval, precision, recall, f1, tp/tn/fp/fn,
        inconclusive (by label), and false_equivalence: not-equivalent pairs judged equivalent,
        as a count and a rate over all not-equivalent pairs (and over the conclusive ones).
    """
    und = [bool(u) for u in undecided] if undecided is not None else [False] * len(labels)
    rows = [(y, p) for y, p, u in zip(labels, preds, und) if not u]
    tp = sum(1 for y, p in rows if y and p)
    tn = sum(1 for y, p in rows if not y and not p)
    fp = sum(1 for y, p in rows if not y and p)
    fn = sum(1 for y, p in rows if y and not p)
    n = len(rows)
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    lo, hi = wilson(tp + tn, n) if n else (0.0, 0.0)
    negatives = sum(1 for y in labels if not y)
    return {"n": n, "accuracy": round((tp + tn) / n, 3) if n else 0.0, "wilson95": [round(lo, 3), round(hi, 3)],
            "precision": round(prec, 3), "recall": round(rec, 3),
            "f1": round(2 * prec * rec / (prec + rec), 3) if prec + rec else 0.0,
            "tp": tp, "tn": tn, "fp": fp, "fn": fn,
            "inconclusive": sum(und),
            "inconclusive_by_label": {"equivalent": sum(1 for y, u in zip(labels, und) if u and y),
                                      "not_equivalent": sum(1 for y, u in zip(labels, und) if u and not y)},
            "false_equivalence": {"count": fp, "of": negatives,
                                  "rate": round(fp / negatives, 3) if negatives else 0.0,
                                  "rate_conclusive": round(fp / (tn + fp), 3) if tn + fp else 0.0}}


def naive_prototype(f: PairFeatures, g: RunView, c: RunView, cos_stdout: float) -> bool:
    """The prototype the brief anchors on: stdout equal, or MiniLM(stdout) >= 0.75, and FS equal."""
    if not f.fs_equal:
        return False
    if norm_out(g.stdout) == norm_out(c.stdout):
        return True
    return cos_stdout >= 0.75


def cv_mode(feats, labels, groups, pairs, folds: int, seeds: int, inconclusive: bool) -> tuple[dict, list]:
    """One mode (INCONCLUSIVE off or on): grouped CV over `seeds` fold splits, the parameters
    fitted on all pairs (for other data), rule counts and the seed-0 errors.

    Args:
        feats: the pairs' features.
        labels: True for equivalent pairs.
        groups: a task id per pair (a task's pairs share a fold).
        pairs: the pair dicts (id, gold, candidate) for the error rows.
        folds: k of the k-fold CV.
        seeds: how many fold splits.
        inconclusive: the INCONCLUSIVE switch of every parameter set tried.

    Returns:
        (report section, error rows of seed 0).
    """
    import numpy as np

    cands = grid(inconclusive=inconclusive)
    und = undecided_mask(feats, inconclusive)
    t0 = time.perf_counter()
    M = decision_matrix(feats, cands)
    runs = []
    for seed in range(seeds):
        cv = cross_validate(feats, labels, groups, folds, seed, cands, M, undecided=und)
        runs.append({"seed": seed, **quality(labels, cv["pred"], und), "chosen": cv["chosen"]})
        if seed == 0:
            cv0 = cv
    accs = [r["accuracy"] for r in runs]
    full = cands[fit_index(M, np.array(labels), np.where(~und)[0], cands)]
    rules: dict[str, int] = {}
    for f in feats:
        r = decide(f, full).rule
        rules[r] = rules.get(r, 0) + 1
    errs = [{"id": p["id"], "gold": p["gold"], "candidate": p["candidate"], "label": p["label"],
             "rule": decide(f, FehParams.from_dict(cv0["chosen"][fi])).rule}
            for p, f, yh, fi, u in zip(pairs, feats, cv0["pred"], cv0["fold"], und) if yh != p["label"] and not u]
    reasons: dict[str, int] = {}
    for f, u in zip(feats, und):
        if u:
            key = ("gold_quiet" if f.gold_quiet else "same_failure"
                   if f.same_failure or (f.stdout_equal and f.stderr_equal and f.exit_equal) else "both_fail_differently")
            reasons[key] = reasons.get(key, 0) + 1
    section = {"inconclusive_enabled": inconclusive, "folds": folds, "grid_size": len(cands),
               "seed0": runs[0], "inconclusive_reasons": reasons,
               "accuracy_over_seeds": {"min": min(accs), "max": max(accs), "mean": round(sum(accs) / len(accs), 3)},
               "fit_s": round(time.perf_counter() - t0, 2), "fitted_on_all_pairs": full.as_dict(),
               "rule_counts_fitted": rules, "cv_errors_seed0": len(errs)}
    return section, errs


def headline(before: dict, after: dict) -> dict:
    """The numbers the README's Performance row quotes (3 decimals, as in the sections)."""
    b, a = before["seed0"], after["seed0"]
    return {"accuracy_before": b["accuracy"], "accuracy_conclusive": a["accuracy"],
            "wilson95_conclusive": a["wilson95"], "precision": a["precision"], "recall": a["recall"],
            "f1": a["f1"], "inconclusive": a["inconclusive"], "pairs": a["n"] + a["inconclusive"],
            "false_equivalence_rotated_before": b["false_equivalence"]["rate"],
            "false_equivalence_rotated_after": a["false_equivalence"]["rate"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=5, help="CV repetitions with other fold splits")
    ap.add_argument("--cache", type=Path, default=None, help="dir for cached sandbox runs")
    ap.add_argument("--source", default=None, help="NL2SH-ALFA source (default: icalfa package)")
    ap.add_argument("--llm", default=None, help="LM spec for the LLM check, e.g. local")
    ap.add_argument("--out", type=Path, default=None, help="write report JSON (and pair rows) here")
    ap.add_argument("--params-out", type=Path, default=None,
                    help="write parameters fitted on all 600 pairs (for use on other data)")
    ap.add_argument("--intercode", type=Path, default=None,
                    help="InterCode-Bash data dir for the new-user probe (default: ../shared/data/intercode-bash)")
    ap.add_argument("--no-probe", action="store_true", help="skip the new-user probe")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)

    t_start = time.perf_counter()
    suite = load_nl2sh(a.source)
    pairs = nl2sh_pairs(suite)
    labels = [p["label"] for p in pairs]
    groups = [p["group"] for p in pairs]
    cache_dir = a.cache or default_cache_dir()
    cache = RunCache(cache_dir / "nl2sh_pairs.jsonl")
    runs, run_info = run_pairs(pairs, cache, workers=a.workers)
    t0 = time.perf_counter()
    embed = EmbedCache(cache_dir / "minilm_vectors.npz")
    feats = pair_features(pairs, runs, embed)
    so = embed([norm_out(g.stdout)[:EMBED_CHARS] or " " for g, _ in runs]
               + [norm_out(c.stdout)[:EMBED_CHARS] or " " for _, c in runs])
    n = len(runs)
    cos_stdout = [float(so[i] @ so[n + i]) for i in range(n)]
    t_embed = time.perf_counter() - t0

    report: dict[str, Any] = {"suite": "nl2sh-alfa", "pairs": len(pairs), "equivalent_pairs": sum(labels),
                              "run": run_info, "embed_s": round(t_embed, 2)}
    report["exact_stdout"] = quality(labels, [norm_out(g.stdout) == norm_out(c.stdout) for g, c in runs])
    report["naive_prototype"] = quality(labels, [naive_prototype(f, g, c, s)
                                                 for f, (g, c), s in zip(feats, runs, cos_stdout)])
    report["fixed_defaults"] = {"params": FehParams().as_dict(),
                                **quality(labels, predict(feats, FehParams()), undecided_mask(feats))}
    before, _ = cv_mode(feats, labels, groups, pairs, a.folds, a.seeds, inconclusive=False)
    after, errs = cv_mode(feats, labels, groups, pairs, a.folds, a.seeds, inconclusive=True)
    report["before"], report["after"] = before, after
    report["cv"] = after  # the procedure as shipped (INCONCLUSIVE on)
    report["headline"] = headline(before, after)
    full = FehParams.from_dict(after["fitted_on_all_pairs"])

    if not a.no_probe:
        from verifirst.benchmarks.studies.feh_new_user_probe import default_intercode_dir, new_user_probe

        d = a.intercode or default_intercode_dir()
        if d.is_dir():
            report["new_user_probe"] = new_user_probe(
                d, FehParams.from_dict(before["fitted_on_all_pairs"]), full,
                RunCache(cache_dir / "intercode_probe.jsonl"), embed, workers=a.workers)
        else:
            report["new_user_probe"] = {"skipped": f"no InterCode-Bash data at {d}"}
        probe = report["new_user_probe"]
        report["headline"]["new_user_probe"] = {
            fx: {"pairs": probe["after"][fx]["rotated"]["pairs"],
                 "false_equivalent_before": probe["before"][fx]["rotated"]["false_equivalent"],
                 "false_equivalent_after": probe["after"][fx]["rotated"]["false_equivalent"],
                 "inconclusive_after": probe["after"][fx]["rotated"]["inconclusive"]}
            for fx in probe.get("after", {})}

    if a.llm:
        report["llm"] = llm_runs(a.llm, pairs, runs, feats, labels, groups, a.folds, grid())
    report["wall_s"] = round(time.perf_counter() - t_start, 2)

    if a.out:
        write_json(a.out, report)
        write_jsonl(a.out.with_suffix(".errors.jsonl"), errs)
    if a.params_out:
        acc = after["seed0"]["accuracy"]
        write_json(a.params_out, {
            "params": full.as_dict(), "fitted_on": "nl2sh-alfa 600 FEH pairs",
            "cv_accuracy_conclusive": acc, "cv_inconclusive": after["seed0"]["inconclusive"],
            "note": ("Fitted on the conclusive NL2SH-ALFA FEH pairs (gold/gold2 + rotated by 10) by "
                     "benchmarks/studies/feh_quality.py; use on other data only, never to score those pairs. "
                     f"Held-out (5-fold CV) accuracy of the procedure on conclusive pairs: {acc:.3f}, "
                     f"{after['seed0']['inconclusive']} of {len(pairs)} pairs INCONCLUSIVE.")})
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        _print_summary(report, errs)
    return 0


def _print_summary(report: dict, errs: list) -> None:
    for k in ("exact_stdout", "naive_prototype", "fixed_defaults"):
        print(f"{k:18s} acc {report[k]['accuracy']:.3f} {report[k]['wilson95']} F1 {report[k]['f1']:.3f}")
    for mode in ("before", "after"):
        s0 = report[mode]["seed0"]
        print(f"cv {mode:8s} acc {s0['accuracy']:.3f} {s0['wilson95']} P {s0['precision']:.3f} "
              f"R {s0['recall']:.3f} F1 {s0['f1']:.3f} on {s0['n']} conclusive, {s0['inconclusive']} inconclusive; "
              f"false equivalences {s0['false_equivalence']['count']}/{s0['false_equivalence']['of']} rotated")
    probe = report.get("new_user_probe", {})
    for mode in ("before", "after"):
        for fx, r in probe.get(mode, {}).items():
            rot = r["rotated"]
            print(f"probe {mode:6s} {fx:5s} rotated: {rot['false_equivalent']} false equivalences, "
                  f"{rot['inconclusive']} inconclusive of {rot['pairs']}")
    for e in errs[:40]:
        print(f"  miss {e['id']:14s} {e['rule']:14s} {e['gold'][:50]!r} ~ {e['candidate'][:50]!r}")


def llm_runs(spec: str, pairs, runs, feats, labels, groups, k, cands) -> dict:
    """The offline CV predictions, then the LLM in confirm (S1) and arbiter mode on top;
    INCONCLUSIVE pairs never reach the LM and are counted apart."""
    from verifirst.lm import make_lm
    from verifirst.verifiers.bash.feh import FehVerifier

    lm = make_lm(spec, role="judge")
    cv = cross_validate(feats, labels, groups, k, 0, cands, undecided=undecided_mask(feats))
    fold = cv["fold"]
    out = {"spec": spec}
    for mode in ("confirm", "arbiter"):
        preds, und, calls, errors, t0 = [], [], 0, 0, time.perf_counter()
        for i, (p, (g, c), f) in enumerate(zip(pairs, runs, feats)):
            params = FehParams.from_dict(cv["chosen"][fold[i]])
            v = FehVerifier(params, llm=mode, lm=lm, embed=lambda t: None)
            verdict = v.compare(p["task"], p["gold"], p["candidate"], g, c, feats=replace(f))
            info = verdict.details["llm"]
            calls += "said" in info or "error" in info
            errors += v.lm_failures
            preds.append(verdict.passed)
            und.append(verdict.inconclusive is not None)
        out[mode] = {**quality(labels, preds, und), "llm_calls": calls, "lm_errors": errors,
                     "wall_s": round(time.perf_counter() - t0, 1)}
    return out


if __name__ == "__main__":
    sys.exit(main())
