"""What the FehVerifier tests share: a deterministic stand-in for MiniLM, RunResult-shaped dicts,
the `compare` shorthand and the verifiers most tests compare with. The tests: test_feh (decision
rules), test_feh_llm, test_feh_verify, test_feh_quality, test_feh_setup and test_feh_no_verdict."""
import hashlib
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402

from verifirst.verifiers.bash._feh_compare import FehParams  # noqa: E402
from verifirst.verifiers.bash.feh import FehVerifier  # noqa: E402


def bag_embed(texts):
    """Deterministic stand-in for MiniLM: hashed bag of words, L2-normalised."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in t.split():
            out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1
        n = np.linalg.norm(out[i])
        out[i] = out[i] / n if n else out[i]
    return out


def run(stdout="", stderr="", exit_code=0, fs=None, timed_out=False):
    """A RunResult-shaped dict as the sandbox returns it."""
    return {"stdout": stdout, "stderr": stderr, "exit_code": exit_code, "timed_out": timed_out,
            "signal": None, "truncated": False,
            "fs_diff": {"added": fs or [], "deleted": [], "modified": []}}


def F(path, sha="aa", typ="file"):
    return {"path": path, "type": typ, "mode": 0o644, "sha256": sha}


V = FehVerifier(embed=bag_embed)


def cmp(g, c, gold="cmd_a", cand="cmd_b", v=V, task="t"):
    return v.compare(task, gold, cand, g, c)


NO_INCONCLUSIVE = FehVerifier(FehParams(inconclusive=False), embed=bag_embed)


def const_embed(texts):
    """An embedder for which every text looks alike (cosine 1): similarity decides nothing."""
    return np.ones((len(texts), 4), dtype=np.float32) / 2.0
