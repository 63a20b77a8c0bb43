"""Noise-injection experiment for the informed teacher (S2 §IV-A).

Flip a fraction of training labels at random (fixed seed), run the teacher on the noisy
labels, and report:
- how often it sets aside (SKIP) flipped vs genuine labels, overall and within each shown
  label, with Fisher exact tests;
- label noise before, after the teacher (kept samples, corrections applied), after dropping
  the same number of samples at random within each shown label (many draws; p = share of
  draws at least as clean), and after the rule "drop every FAIL label" — on data where
  failures are invisible the teacher's gain can match that rule, so it is reported beside it.

CLI-friendly: `python -m verifirst.benchmarks.studies.noise_injection --ice-score --problems 20`.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import replace
from typing import Sequence

import numpy as np

from verifirst.core.stats import fisher_exact
from verifirst.core.task import Item

from verifirst.judge.teacher import CORRECT, ERROR, SKIP, InformedTeacher, run_teacher


def flip_labels(items: Sequence[Item], fraction: float, seed: int = 0) -> tuple[list[Item], set[str]]:
    """Copies of items with round(fraction * n) labels flipped; returns (items, flipped ids)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    ids = sorted(it.id for it in items)
    flipped = set(random.Random(seed).sample(ids, round(fraction * len(ids))))
    out = []
    for it in items:
        label = it.gold["label"]
        if it.id in flipped:
            label = "FAIL" if label == "PASS" else "PASS"
        out.append(replace(it, gold={**it.gold, "label": label}, meta=dict(it.meta)))
    return out, flipped


def _rate(k: int, n: int) -> dict:
    return {"set_aside": k, "n": n, "rate": k / n if n else 0.0}


def _fisher_row(a_k, a_n, b_k, b_n) -> dict:
    res = fisher_exact([[a_k, a_n - a_k], [b_k, b_n - b_k]])
    return {"odds_ratio": res.odds_ratio, "p_value": res.p_value}


def noise_report(true: dict[str, str], shown: dict[str, str], decisions: dict, n_random: int = 1000,
                 seed: int = 0) -> dict:
    """The experiment's numbers from true labels, shown (noisy) labels and teacher decisions."""
    ids = [i for i in shown if decisions[i].decision != ERROR]
    errors = len(shown) - len(ids)
    flipped = {i for i in ids if shown[i] != true[i]}
    skip = {i for i in ids if decisions[i].decision == SKIP}
    fl_k, fl_n = len(skip & flipped), len(flipped)
    ge_k, ge_n = len(skip - flipped), len(ids) - len(flipped)
    by_shown = {}
    for lab in ("PASS", "FAIL"):
        f = [i for i in ids if shown[i] == lab and i in flipped]
        g = [i for i in ids if shown[i] == lab and i not in flipped]
        fk, gk = sum(i in skip for i in f), sum(i in skip for i in g)
        by_shown[lab] = {"flipped": _rate(fk, len(f)), "genuine": _rate(gk, len(g)),
                         "fisher": _fisher_row(fk, len(f), gk, len(g))}

    def noise(keep_ids, labels) -> float:
        keep_ids = list(keep_ids)
        return sum(labels[i] != true[i] for i in keep_ids) / len(keep_ids) if keep_ids else 0.0

    kept = [i for i in ids if decisions[i].decision != SKIP]
    final = {i: decisions[i].final_label for i in kept}
    after = noise(kept, final)
    # the same number dropped at random within each shown label
    rng = np.random.default_rng(seed)
    per_label = {lab: [i for i in ids if shown[i] == lab] for lab in ("PASS", "FAIL")}
    drops = {lab: sum(i in skip for i in per_label[lab]) for lab in per_label}
    draws = []
    for _ in range(n_random):
        keep = []
        for lab, pool in per_label.items():
            if pool:
                keep += list(rng.permutation(pool)[drops[lab]:])
        draws.append(noise(keep, shown))
    draws_arr = np.asarray(draws) if draws else np.zeros(1)
    no_fail = [i for i in ids if shown[i] != "FAIL"]
    return {
        "n": len(ids), "teacher_errors": errors, "n_flipped": fl_n,
        "decisions": {d: sum(decisions[i].decision == d for i in ids) for d in ("KEEP", CORRECT, SKIP)},
        "corrected": {"flipped": sum(decisions[i].decision == CORRECT for i in flipped),
                      "genuine": sum(decisions[i].decision == CORRECT for i in ids if i not in flipped)},
        "set_aside": {"flipped": _rate(fl_k, fl_n), "genuine": _rate(ge_k, ge_n)},
        "fisher": _fisher_row(fl_k, fl_n, ge_k, ge_n),
        "by_shown_label": by_shown,
        "noise": {
            "before": noise(ids, shown),
            "after_teacher": after, "kept": len(kept),
            "random_drop": {"mean": float(draws_arr.mean()), "p5": float(np.quantile(draws_arr, 0.05)),
                            "p95": float(np.quantile(draws_arr, 0.95)), "draws": n_random,
                            "p_value": float((np.sum(draws_arr <= after) + 1) / (len(draws) + 1))},
            "drop_all_fail": noise(no_fail, shown), "drop_all_fail_kept": len(no_fail),
        },
    }


def run_noise_injection(items: Sequence[Item], view_fields: Sequence[str] | None = None, *, teacher_lm=None,
                        fraction: float = 0.25, seed: int = 0, n_random: int = 1000,
                        teacher: InformedTeacher | None = None, num_threads: int = 1) -> dict:
    view_fields = list(view_fields or sorted(items[0].inputs))
    noisy, flipped = flip_labels(items, fraction, seed)
    teacher = teacher or InformedTeacher(view_fields)
    decisions = run_teacher(teacher, noisy, teacher_lm, num_threads)
    true = {it.id: it.gold["label"] for it in items}
    shown = {it.id: it.gold["label"] for it in noisy}
    rep = noise_report(true, shown, decisions, n_random=n_random, seed=seed)
    rep.update({"fraction": fraction, "seed": seed,
                "model": getattr(teacher_lm, "model", None)})
    return rep


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--outcomes", help="JSONL/CSV outcome records (default: ICE-Score HumanEval)")
    ap.add_argument("--problems", type=int, default=10, help="ICE-Score problems to use")
    ap.add_argument("--fraction", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--teacher", default="local", help="LM spec for verifirst.lm.make_lm")
    args = ap.parse_args(argv)
    from verifirst.judge.outcomes import load_ice_score, load_outcomes
    from verifirst.lm import make_lm

    suite = load_outcomes(args.outcomes) if args.outcomes else load_ice_score(problems=args.problems)
    rep = run_noise_injection(suite.items, teacher_lm=make_lm(args.teacher), fraction=args.fraction,
                              seed=args.seed)
    json.dump(rep, sys.stdout, indent=2, default=str)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
