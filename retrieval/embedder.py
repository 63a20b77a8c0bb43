"""The offline MiniLM sentence embedder, re-exported from `verifirst.verifiers.embedder`.

The model and its lock live there (one instance per process), where the bash FEH verifier can
use it without importing retrieval; this module keeps `verifirst.retrieval.embedder` working
for the doc store, the optimizers and the studies.
"""
from __future__ import annotations

from verifirst.verifiers.embedder import ChromaEmbeddingFunction, _threads, cosine, embed, model_dir

__all__ = ["ChromaEmbeddingFunction", "cosine", "embed", "model_dir",
           "_threads"]  # the thread setting check, read by tests through this module
