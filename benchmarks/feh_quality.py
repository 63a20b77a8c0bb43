"""FEH quality on the 600 NL2SH-ALFA pairs, the way S1 measures it.

300 (gold, gold2) pairs labelled equivalent, 300 (gold_i, gold2_{i+10}) labelled not, each run
in row i's fixture. Rule parameters are chosen by grouped k-fold cross-validation: every pair is
scored by parameters fitted on the other folds only. Sandbox runs and embeddings are cached.

    python benchmarks/feh_quality.py --json [--llm local] [--folds 5] [--cache DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from verifirst.atomic import write_json, write_jsonl  # noqa: E402
from verifirst.benchmarks.nl2sh import load_nl2sh, nl2sh_pairs  # noqa: E402
from verifirst.stats import wilson  # noqa: E402
from verifirst.verifiers._feh_compare import (EMBED_CHARS, FehParams, PairFeatures, RunView, decide,  # noqa: E402
                                              features, norm_out, observed)

CACHE_VERSION = 1
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
}
_BOOLS = ("status_veto", "fs_veto", "fs_effect_wins", "sorted_lines_equal", "output_over_status")
_NEVER = 2.0


def default_cache_dir() -> Path:
    return Path(os.environ.get("VERIFIRST_CACHE", Path.home() / ".cache" / "verifirst")) / "feh_runs"


def _fixture_hash(name: str) -> str:
    try:
        from verifirst.verifiers.fixtures import resolve

        return resolve(name).content_hash()
    except Exception:  # older sandbox without content hashes: the name stands in
        return name


class RunCache:
    """(gold, candidate, fixture) -> pair of RunView, one JSONL file, appended as runs finish."""

    def __init__(self, path: Path):
        self.path = path
        self.rows: dict[str, tuple[RunView, RunView]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    r = json.loads(line)
                    self.rows[r["key"]] = (RunView.of(r["gold"]), RunView.of(r["cand"]))
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a torn last line from an interrupted run
        self._fh = None

    @staticmethod
    def key(gold: str, cand: str, fixture: str, fixture_hash: str) -> str:
        return hashlib.sha256(json.dumps([CACHE_VERSION, gold, cand, fixture, fixture_hash]).encode()).hexdigest()

    def put(self, key: str, g: RunView, c: RunView) -> None:
        self.rows[key] = (g, c)
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(json.dumps({"key": key, "gold": g.as_dict(), "cand": c.as_dict()}) + "\n")
        self._fh.flush()


class EmbedCache:
    """text -> MiniLM vector, persisted as one .npz beside the run cache (reruns skip the model)."""

    def __init__(self, path: Path, embed: Callable | None = None):
        import numpy as np

        self.path, self._embed, self.vecs = path, embed, {}
        if path.exists():
            try:
                z = np.load(path)
                self.vecs = dict(zip((str(k) for k in z["keys"]), z["vecs"]))
            except (OSError, ValueError, KeyError):
                self.vecs = {}

    @staticmethod
    def _k(t: str) -> str:
        return hashlib.sha256(t.encode()).hexdigest()

    def __call__(self, texts: Sequence[str]):
        import numpy as np

        missing = sorted({t for t in texts if self._k(t) not in self.vecs})
        if missing:
            if self._embed is None:
                from verifirst.retrieval.embedder import embed as _e

                self._embed = _e
            for t, v in zip(missing, self._embed(missing)):
                self.vecs[self._k(t)] = np.asarray(v, dtype=np.float32)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp.npz")
            keys = list(self.vecs)
            np.savez(tmp, keys=np.array(keys), vecs=np.stack([self.vecs[k] for k in keys]))
            os.replace(tmp, self.path)
        return np.stack([self.vecs[self._k(t)] for t in texts]) if texts else np.zeros((0, 384), np.float32)


def run_pairs(pairs: list[dict], cache: RunCache, run_pair: Callable | None = None,
              workers: int = 2) -> tuple[list[tuple[RunView, RunView]], dict]:
    if run_pair is None:
        from verifirst.verifiers.sandbox import run_pair
    fh = {fx: _fixture_hash(fx) for fx in {p["fixture"] for p in pairs}}
    keys = [cache.key(p["gold"], p["candidate"], p["fixture"], fh[p["fixture"]]) for p in pairs]
    todo = [(k, p) for k, p in zip(keys, pairs) if k not in cache.rows]
    todo = list({k: (k, p) for k, p in todo}.values())
    t0 = time.perf_counter()

    def one(kp):
        k, p = kp
        g, c = run_pair(p["gold"], p["candidate"], p["fixture"])
        return k, RunView.of(g), RunView.of(c)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        for k, g, c in ex.map(one, todo):
            cache.put(k, g, c)
    info = {"pairs_run": len(todo), "pairs_cached": len(pairs) - len(todo),
            "run_wall_s": round(time.perf_counter() - t0, 2)}
    return [cache.rows[k] for k in keys], info


def pair_features(pairs: list[dict], runs: list[tuple[RunView, RunView]],
                  embed: Callable | None = None) -> list[PairFeatures]:
    """Features of every pair; all texts embedded in one batch."""
    if embed is None:
        from verifirst.retrieval.embedder import embed
    feats, texts = [], []
    for p, (g, c) in zip(pairs, runs):
        feats.append(features(g, c))
        texts += [observed(g)[:EMBED_CHARS] or " ", observed(c)[:EMBED_CHARS] or " ", p["gold"], p["candidate"]]
    uniq = sorted(set(texts))
    idx = {t: i for i, t in enumerate(uniq)}
    vecs = embed(uniq)
    for i, f in enumerate(feats):
        a, b, cg, cc = (vecs[idx[t]] for t in texts[4 * i: 4 * i + 4])
        f.cos_out = None if f.no_output else float(a @ b)
        f.cos_cmd = float(cg @ cc)
    return feats


def grid(space: dict = GRID) -> list[FehParams]:
    keys = list(space)
    return [FehParams(**dict(zip(keys, vals))) for vals in itertools.product(*(space[k] for k in keys))]


def predict(feats: Sequence[PairFeatures], p: FehParams) -> list[bool]:
    return [decide(f, p).equivalent for f in feats]


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
        sw = tuple(getattr(p, k) for k in _BOOLS)
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


def cross_validate(feats, labels, groups, k: int = 5, seed: int = 0, candidates=None, M=None) -> dict:
    """Held-out predictions: fold j is scored with parameters fitted on the other folds."""
    import numpy as np

    candidates = candidates or grid()
    M = decision_matrix(feats, candidates) if M is None else M
    y = np.array(labels, dtype=bool)
    fold = np.array(folds_by_group(groups, k, seed))
    preds = np.zeros(len(labels), dtype=bool)
    chosen = []
    for j in range(k):
        best = fit_index(M, y, np.where(fold != j)[0], candidates)
        chosen.append(candidates[best].as_dict())
        te = np.where(fold == j)[0]
        preds[te] = M[best, te]
    return {"pred": [bool(x) for x in preds], "chosen": chosen, "fold": fold.tolist()}


def quality(labels: Sequence[bool], preds: Sequence[bool]) -> dict:
    tp = sum(1 for y, p in zip(labels, preds) if y and p)
    tn = sum(1 for y, p in zip(labels, preds) if not y and not p)
    fp = sum(1 for y, p in zip(labels, preds) if not y and p)
    fn = sum(1 for y, p in zip(labels, preds) if y and not p)
    n = len(labels)
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    lo, hi = wilson(tp + tn, n)
    return {"n": n, "accuracy": round((tp + tn) / n, 4), "wilson95": [round(lo, 4), round(hi, 4)],
            "precision": round(prec, 4), "recall": round(rec, 4),
            "f1": round(2 * prec * rec / (prec + rec), 4) if prec + rec else 0.0,
            "tp": tp, "tn": tn, "fp": fp, "fn": fn}


def naive_prototype(f: PairFeatures, g: RunView, c: RunView, cos_stdout: float) -> bool:
    """The prototype the brief anchors on: stdout equal, or MiniLM(stdout) >= 0.75, and FS equal."""
    if not f.fs_equal:
        return False
    if norm_out(g.stdout) == norm_out(c.stdout):
        return True
    return cos_stdout >= 0.75


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
    report["fixed_defaults"] = {"params": FehParams().as_dict(), **quality(labels, predict(feats, FehParams()))}

    cands = grid()
    t0 = time.perf_counter()
    M = decision_matrix(feats, cands)
    cv_runs = []
    for seed in range(a.seeds):
        cv = cross_validate(feats, labels, groups, a.folds, seed, cands, M)
        cv_runs.append({"seed": seed, **quality(labels, cv["pred"]), "chosen": cv["chosen"]})
        if seed == 0:
            cv0 = cv
    accs = [r["accuracy"] for r in cv_runs]
    report["cv"] = {"folds": a.folds, "grid_size": len(cands), "seed0": cv_runs[0],
                    "accuracy_over_seeds": {"min": min(accs), "max": max(accs),
                                            "mean": round(sum(accs) / len(accs), 4)},
                    "fit_s": round(time.perf_counter() - t0, 2)}
    import numpy as np

    full = cands[fit_index(M, np.array(labels), np.arange(len(labels)), cands)]
    report["fitted_on_all_pairs"] = full.as_dict()  # for other data only; never scored here
    rules = {}
    for f in feats:
        r = decide(f, full).rule
        rules[r] = rules.get(r, 0) + 1
    report["rule_counts_fitted"] = rules
    errs = [{"id": p["id"], "gold": p["gold"], "candidate": p["candidate"], "label": p["label"],
             "rule": decide(f, FehParams.from_dict(cv0["chosen"][fi])).rule}
            for p, f, yh, fi in zip(pairs, feats, cv0["pred"], cv0["fold"]) if yh != p["label"]]
    report["cv_errors_seed0"] = len(errs)

    if a.llm:
        report["llm"] = llm_runs(a.llm, pairs, runs, feats, labels, groups, a.folds, cands)
    report["wall_s"] = round(time.perf_counter() - t_start, 2)

    if a.out:
        write_json(a.out, report)
        write_jsonl(a.out.with_suffix(".errors.jsonl"), errs)
    if a.params_out:
        write_json(a.params_out, {"params": full.as_dict(), "fitted_on": "nl2sh-alfa 600 FEH pairs",
                                  "cv_accuracy": cv_runs[0]["accuracy"]})
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        for k in ("exact_stdout", "naive_prototype", "fixed_defaults"):
            print(f"{k:18s} acc {report[k]['accuracy']:.3f} {report[k]['wilson95']} F1 {report[k]['f1']:.3f}")
        s0 = report["cv"]["seed0"]
        print(f"{'cv (held-out)':18s} acc {s0['accuracy']:.3f} {s0['wilson95']} P {s0['precision']:.3f} "
              f"R {s0['recall']:.3f} F1 {s0['f1']:.3f}; over seeds {report['cv']['accuracy_over_seeds']}")
        for e in errs[:40]:
            print(f"  miss {e['id']:14s} {e['rule']:14s} {e['gold'][:50]!r} ~ {e['candidate'][:50]!r}")
    return 0


def llm_runs(spec: str, pairs, runs, feats, labels, groups, k, cands) -> dict:
    """The offline CV predictions, then the LLM in confirm (S1) and arbiter mode on top."""
    from verifirst.lm import make_lm
    from verifirst.verifiers.feh import FehVerifier

    lm = make_lm(spec, role="judge")
    cv = cross_validate(feats, labels, groups, k, 0, cands)
    fold = cv["fold"]
    out = {"spec": spec}
    for mode in ("confirm", "arbiter"):
        preds, calls, errors, t0 = [], 0, 0, time.perf_counter()
        for i, (p, (g, c), f) in enumerate(zip(pairs, runs, feats)):
            params = FehParams.from_dict(cv["chosen"][fold[i]])
            v = FehVerifier(params, llm=mode, lm=lm, embed=lambda t: None)
            verdict = v.compare(p["task"], p["gold"], p["candidate"], g, c, feats=replace(f))
            info = verdict.details["llm"]
            calls += "said" in info or "error" in info
            errors += "error" in info
            preds.append(verdict.passed)
        out[mode] = {**quality(labels, preds), "llm_calls": calls, "lm_errors": errors,
                     "wall_s": round(time.perf_counter() - t0, 1)}
    return out


if __name__ == "__main__":
    sys.exit(main())
