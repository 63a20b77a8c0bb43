"""Statistics for paired comparisons and agreement. scipy computes every p-value."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence

import numpy as np
from scipy import stats as _st


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes out of n."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    ci = _st.binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


@dataclass(frozen=True)
class McNemarResult:
    b: int
    c: int
    statistic: float
    p_value: float
    exact: bool

    def as_dict(self) -> dict:
        return {"b": self.b, "c": self.c, "statistic": self.statistic, "p_value": self.p_value,
                "exact": self.exact}


def mcnemar(b: int, c: int, exact: bool = True) -> McNemarResult:
    """McNemar's test on the discordant counts b (A right, B wrong) and c (A wrong, B right).

    exact: two-sided binomial test on min(b, c) of b + c (statistic = min(b, c));
    otherwise the continuity-corrected chi-square, (|b - c| - 1)^2 / (b + c).
    """
    b, c = int(b), int(c)
    n = b + c
    if exact:
        if n == 0:
            return McNemarResult(b, c, 0.0, 1.0, True)
        p = _st.binomtest(min(b, c), n, 0.5, alternative="two-sided").pvalue
        return McNemarResult(b, c, float(min(b, c)), float(min(1.0, p)), True)
    if n == 0:
        return McNemarResult(b, c, 0.0, 1.0, False)
    stat = (abs(b - c) - 1) ** 2 / n
    return McNemarResult(b, c, float(stat), float(_st.chi2.sf(stat, 1)), False)


def mcnemar_paired(correct_a: Sequence[bool], correct_b: Sequence[bool], exact: bool = True) -> McNemarResult:
    """McNemar from two per-item correctness vectors over the same items."""
    if len(correct_a) != len(correct_b):
        raise ValueError("paired vectors differ in length")
    b = sum(1 for x, y in zip(correct_a, correct_b) if x and not y)
    c = sum(1 for x, y in zip(correct_a, correct_b) if y and not x)
    return mcnemar(b, c, exact=exact)


def _check_pair(a: Sequence, b: Sequence) -> None:
    if len(a) != len(b):
        raise ValueError(f"rater vectors differ in length: {len(a)} vs {len(b)}")
    if not len(a):
        raise ValueError("agreement needs at least one item")


def scotts_pi(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Scott's pi: chance agreement from the pooled label distribution of both raters."""
    _check_pair(a, b)
    n = len(a)
    po = sum(1 for x, y in zip(a, b) if x == y) / n
    pooled = Counter(a) + Counter(b)
    pe = sum((v / (2 * n)) ** 2 for v in pooled.values())
    if pe >= 1.0:
        return 1.0 if po == 1.0 else 0.0
    return (po - pe) / (1 - pe)


def cohens_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa: chance agreement from each rater's own marginals."""
    _check_pair(a, b)
    n = len(a)
    po = sum(1 for x, y in zip(a, b) if x == y) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum((ca[k] / n) * (cb[k] / n) for k in set(ca) | set(cb))
    if pe >= 1.0:
        return 1.0 if po == 1.0 else 0.0
    return (po - pe) / (1 - pe)


@dataclass
class Confusion:
    labels: list
    matrix: list[list[int]]  # rows: true, cols: predicted
    per_class: dict = field(default_factory=dict)
    accuracy: float = 0.0
    n: int = 0

    def count(self, true: Any, pred: Any) -> int:
        return self.matrix[self.labels.index(true)][self.labels.index(pred)]

    def as_dict(self) -> dict:
        return {"labels": [str(x) for x in self.labels], "matrix": self.matrix,
                "per_class": {str(k): v for k, v in self.per_class.items()},
                "accuracy": self.accuracy, "n": self.n}


def confusion(y_true: Sequence[Hashable], y_pred: Sequence[Hashable], labels: Sequence | None = None) -> Confusion:
    """Confusion matrix with per-class precision, recall, F1 and support."""
    _check_pair(y_true, y_pred)
    labs = list(labels) if labels is not None else sorted(set(y_true) | set(y_pred), key=str)
    idx = {l: i for i, l in enumerate(labs)}
    m = [[0] * len(labs) for _ in labs]
    for t, p in zip(y_true, y_pred):
        m[idx[t]][idx[p]] += 1
    per = {}
    for l, i in idx.items():
        tp = m[i][i]
        fp = sum(m[r][i] for r in range(len(labs))) - tp
        fn = sum(m[i]) - tp
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        per[l] = {"precision": prec, "recall": rec, "f1": f1, "support": sum(m[i])}
    n = len(y_true)
    acc = sum(m[i][i] for i in range(len(labs))) / n
    return Confusion(labs, m, per, acc, n)


@dataclass(frozen=True)
class BootstrapResult:
    delta: float
    lo: float
    hi: float
    n: int
    confidence: float

    def __iter__(self):  # unpack as (delta, lo, hi)
        return iter((self.delta, self.lo, self.hi))

    def as_dict(self) -> dict:
        return {"delta": self.delta, "lo": self.lo, "hi": self.hi, "n_resamples": self.n,
                "confidence": self.confidence}


def paired_bootstrap(metric: Callable[[Sequence, Sequence], float], pred_a: Sequence, pred_b: Sequence,
                     y: Sequence, n: int = 10000, seed: int = 0, confidence: float = 0.95) -> BootstrapResult:
    """Percentile CI of metric(y, pred_b) - metric(y, pred_a), items resampled jointly."""
    if not (len(pred_a) == len(pred_b) == len(y)):
        raise ValueError("paired_bootstrap needs pred_a, pred_b and y of one length")
    if not len(y):
        raise ValueError("paired_bootstrap needs at least one item")
    a, b, t = list(pred_a), list(pred_b), list(y)
    delta = float(metric(t, b) - metric(t, a))
    rng = np.random.default_rng(seed)
    m = len(t)
    deltas = np.empty(n)
    for i in range(n):
        ix = rng.integers(0, m, m)
        tt = [t[j] for j in ix]
        deltas[i] = metric(tt, [b[j] for j in ix]) - metric(tt, [a[j] for j in ix])
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(deltas, [alpha, 1 - alpha])
    return BootstrapResult(delta, float(lo), float(hi), n, confidence)


@dataclass(frozen=True)
class FisherResult:
    odds_ratio: float
    p_value: float


def fisher_exact(table: Sequence[Sequence[int]], alternative: str = "two-sided") -> FisherResult:
    """Fisher's exact test on a 2x2 table [[a, b], [c, d]]."""
    res = _st.fisher_exact(np.asarray(table, dtype=int), alternative=alternative)
    return FisherResult(float(res.statistic), float(res.pvalue))


def accuracy(y_true: Sequence, y_pred: Sequence) -> float:
    _check_pair(y_true, y_pred)
    return sum(1 for a, b in zip(y_true, y_pred) if a == b) / len(y_true)


# -- judges against labels (PASS/FAIL verdicts) ----------------------------------------------------
PASS, FAIL = "PASS", "FAIL"


def judge_pi(y: Sequence[str], pred: Sequence[str]) -> float:
    """Scott's π between labels and a judge's verdicts."""
    return scotts_pi(list(y), list(pred))


def pi_interval(y: Sequence[str], pred: Sequence[str], n_boot: int = 2000, seed: int = 0, *,
                skip_undefined: bool = False) -> list[float]:
    """Percentile 95% interval of Scott's π over items resampled with replacement (the one
    implementation: reports, agreement and promotion all call it).

    Args:
        y: labels.
        pred: verdicts.
        n_boot: bootstrap resamples.
        seed: the bootstrap seed.
        skip_undefined: leave out resamples where π is undefined (one class only: NaN) instead of
            letting them make the interval NaN; [nan, nan] when every resample is undefined.
    """
    import math

    rng = np.random.default_rng(seed)
    y, pred = list(y), list(pred)
    vals = []
    for _ in range(n_boot):
        ix = rng.integers(0, len(y), len(y))
        v = judge_pi([y[i] for i in ix], [pred[i] for i in ix])
        if not (skip_undefined and math.isnan(v)):
            vals.append(v)
    if not vals:
        return [float("nan"), float("nan")]
    lo, hi = np.quantile(vals, [0.025, 0.975])
    return [float(lo), float(hi)]


def judge_metrics(y: Sequence[str], pred: Sequence[str], n_boot: int = 0, seed: int = 0) -> dict:
    """A judge against labels: π (with its interval when n_boot), accuracy, FAIL recall/precision, PASS recall."""
    c = confusion(y, pred, labels=[PASS, FAIL])
    fail, pas = c.per_class[FAIL], c.per_class[PASS]
    out = {"n": len(y), "pi": judge_pi(y, pred), "accuracy": c.accuracy, "fail_recall": fail["recall"],
           "fail_precision": fail["precision"], "pass_recall": pas["recall"],
           "fail_rate": sum(p == FAIL for p in pred) / len(pred)}
    if n_boot:
        out["pi_ci95"] = pi_interval(y, pred, n_boot, seed)
    return out


def compare_judges(labels: dict[str, str], verdicts: dict[str, dict[str, str | None]], ours: str,
                   anchors: Sequence[str], *, n_boot: int = 2000, seed: int = 0) -> dict:
    """Held-out comparison of `ours` against each anchor on one common item set.

    Args:
        labels: item id -> PASS/FAIL label.
        verdicts: judge name -> item id -> verdict (None where the judge's LM failed).
        ours: the judge compared against the others.
        anchors: the other judges.
        n_boot: bootstrap resamples for the paired Δπ interval.
        seed: the bootstrap seed.
    """
    from verifirst.core.errors import InputError

    names = [ours, *anchors]
    missing = [n for n in names if n not in verdicts]
    if missing:
        raise InputError(f"no verdicts for judge(s) {missing}", field="verdicts", expected=", ".join(names))
    ids = sorted(i for i in labels if all(verdicts[n].get(i) in (PASS, FAIL) for n in names))
    out: dict[str, Any] = {"n_items": len(labels), "n_scored": len(ids),
                           "excluded_lm_errors": {n: sum(verdicts[n].get(i) not in (PASS, FAIL) for i in labels)
                                                  for n in names},
                           "label_counts": {l: sum(labels[i] == l for i in ids) for l in (PASS, FAIL)},
                           "judges": {}, "comparisons": {}}
    if not ids:
        return out
    y = [labels[i] for i in ids]
    for n in names:
        out["judges"][n] = judge_metrics(y, [verdicts[n][i] for i in ids], n_boot, seed)
    mine = [verdicts[ours][i] for i in ids]
    for a in anchors:
        cmp = pi_comparison(y, mine, [verdicts[a][i] for i in ids], n_boot=n_boot, seed=seed)
        mc = cmp["mcnemar_exact"]
        out["comparisons"][f"{ours}_vs_{a}"] = {**cmp, "ours_right_anchor_wrong": mc["b"],
                                                "anchor_right_ours_wrong": mc["c"]}
    return out


def pi_comparison(y: Sequence[str], ours: Sequence[str], theirs: Sequence[str], *, n_boot: int = 2000,
                  seed: int = 0) -> dict:
    """Two judges on the same items: Δπ = ours − theirs with its paired bootstrap interval, and exact
    McNemar on per-item correctness (b: ours right, theirs wrong).

    Args:
        y: the labels.
        ours, theirs: the two judges' verdicts, item by item.
        n_boot: bootstrap resamples.
        seed: the bootstrap seed.
    """
    boot = paired_bootstrap(judge_pi, theirs, ours, y, n=n_boot, seed=seed)
    mc = mcnemar_paired([p == t for p, t in zip(ours, y)], [p == t for p, t in zip(theirs, y)])
    return {"pi_delta": boot.delta, "pi_ci95": [boot.lo, boot.hi], "bootstrap": boot.as_dict(),
            "mcnemar_exact": mc.as_dict()}
