"""Persistent ChromaDB store of schema docs, embedded offline with MiniLM.

The collection name carries the schema fingerprint, so one directory can hold the docs of
several schemas and a changed schema never reuses stale vectors.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from verifirst.retrieval.docs import Doc, build_docs, schema_fingerprint
from verifirst.retrieval.embedder import ChromaEmbeddingFunction, embed


class _MiniLMFunction(ChromaEmbeddingFunction):
    """chromadb >= 1.0 calls embed_query for query_texts; the base class only has __call__."""

    def embed_query(self, input):
        return self(input)

    def embed_documents(self, input):
        return self(input)

    @staticmethod
    def supported_spaces():
        return ["cosine", "l2", "ip"]

    @staticmethod
    def default_space():
        return "cosine"


@dataclass
class Hit:
    id: str
    type: str
    text: str
    score: float  # cosine similarity
    meta: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"id": self.id, "type": self.type, "score": round(self.score, 4), "text": self.text}


class DocStore:
    """Docs of one schema under `directory`. `ensure()` builds once; later opens reuse it."""

    def __init__(self, directory: str | os.PathLike, schema, *, include_data_sources: bool = True):
        import chromadb

        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.include_data_sources = include_data_sources
        self.fingerprint = schema_fingerprint(schema)
        self._client = chromadb.PersistentClient(
            path=str(self.directory), settings=chromadb.Settings(anonymized_telemetry=False))
        self.collection_name = f"tfdocs-{self.fingerprint}" + ("" if include_data_sources else "-r")
        self._col = self._client.get_or_create_collection(
            self.collection_name, embedding_function=_MiniLMFunction(),
            metadata={"hnsw:space": "cosine", "fingerprint": self.fingerprint})

    def count(self) -> int:
        return self._col.count()

    def ensure(self, batch_size: int = 256) -> int:
        """Embed and store every doc unless the collection is already complete."""
        docs = build_docs(self.schema, self.include_data_sources)
        if self.count() == len(docs):
            return 0
        self.add(docs, batch_size=batch_size)
        return len(docs)

    def add(self, docs: Sequence[Doc], batch_size: int = 256) -> None:
        for i in range(0, len(docs), batch_size):
            part = docs[i:i + batch_size]
            vecs = embed([d.text for d in part])
            self._col.upsert(ids=[d.id for d in part], documents=[d.text for d in part],
                             embeddings=[v.tolist() for v in vecs],
                             metadatas=[{**d.meta, "type": d.type, "kind": d.kind} for d in part])

    def search(self, query: str, k: int = 3, *, kind: str | None = None) -> list[Hit]:
        if not query.strip() or k <= 0:
            return []
        n = min(int(k), max(self.count(), 1))
        where = {"kind": kind} if kind else None
        res = self._col.query(query_embeddings=[embed([query])[0].tolist()], n_results=n, where=where)
        hits = []
        for i, doc, meta, dist in zip(res["ids"][0], res["documents"][0], res["metadatas"][0],
                                      res["distances"][0]):
            hits.append(Hit(i, meta.get("type", ""), doc, 1.0 - float(dist), dict(meta)))
        return hits


def open_store(directory: str | os.PathLike, schema, build: bool = True, **kw) -> DocStore:
    store = DocStore(directory, schema, **kw)
    if build:
        store.ensure()
    return store
