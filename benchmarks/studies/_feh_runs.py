"""The sandbox-run and embedding machinery shared by the FEH studies: the run and embedding
caches, running pairs in the sandbox, and pair features with their cosines.

feh_quality (the NL2SH-ALFA cross-validation) and feh_new_user_probe (held-out InterCode-Bash,
run from feh_quality) both use it, and it imports neither. feh_quality re-exports every public
name here, so `feh_quality.RunCache` and the others still work (feh_false_equiv imports them so).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

from verifirst.verifiers.bash._feh_compare import EMBED_CHARS, PairFeatures, RunView, features, observed

CACHE_VERSION = 1


def default_cache_dir() -> Path:
    return Path(os.environ.get("VERIFIRST_CACHE", Path.home() / ".cache" / "verifirst")) / "feh_runs"


def _fixture_hash(name: str) -> str:
    try:
        from verifirst.verifiers.bash.fixtures import resolve

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
        from verifirst.verifiers.bash.sandbox import run_pair
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
        feats.append(features(g, c, p["gold"], p["candidate"]))
        texts += [observed(g)[:EMBED_CHARS] or " ", observed(c)[:EMBED_CHARS] or " ", p["gold"], p["candidate"]]
    uniq = sorted(set(texts))
    idx = {t: i for i, t in enumerate(uniq)}
    vecs = embed(uniq)
    for i, f in enumerate(feats):
        a, b, cg, cc = (vecs[idx[t]] for t in texts[4 * i: 4 * i + 4])
        f.cos_out = None if f.no_output else float(a @ b)
        f.cos_cmd = float(cg @ cc)
    return feats
