"""The knowledge base: each document's chunks and vectors in Redis, replaced atomically, searched
by cosine similarity.

A document is written by one Lua script in the same MULTI as its task's `succeeded` state, so a reader
sees either the old version or the new one, never half of either, and a document becomes
searchable exactly when its task succeeds. A version number (the run's submission time) keeps an
older run from overwriting a newer one. Search holds a per-tenant matrix cache keyed by a
generation counter, so unchanged data is never reloaded; Redis stays the only source of truth.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from redis import Redis
from redis.client import Pipeline

from jobs import keys

# KEYS: document hash, tenant's document set, tenant's generation
# ARGV: version, task_id, document_id, filename, texts json, vectors, dim
_UPSERT = """
local current = redis.call('HGET', KEYS[1], 'version')
if current and tonumber(current) > tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'task_id', ARGV[2], 'document_id', ARGV[3],
           'filename', ARGV[4], 'texts', ARGV[5], 'vectors', ARGV[6], 'dim', ARGV[7])
redis.call('SADD', KEYS[2], KEYS[1])
redis.call('INCR', KEYS[3])
return 1
"""


@dataclass(frozen=True)
class IndexedDocument:
    """One document's chunks and their L2-normalised float32 vectors."""

    tenant: str
    document_id: str
    filename: str
    task_id: str
    version: int
    texts: list[str]
    vectors: np.ndarray


def queue_upsert(pipe: Pipeline, doc: IndexedDocument) -> None:
    """Queue the replacement of a document on a MULTI pipeline.

    The caller adds its task's `succeeded` write to the same pipeline, so both land together.
    The script's reply is 0 when a newer version was already indexed (that one stays).
    """
    vectors = np.ascontiguousarray(doc.vectors, dtype=np.float32)
    pipe.eval(_UPSERT, 3, keys.kb_document(doc.tenant, doc.document_id),
              keys.kb_documents(doc.tenant), keys.kb_generation(doc.tenant),
              doc.version, doc.task_id, doc.document_id, doc.filename, json.dumps(doc.texts),
              vectors.tobytes(), vectors.shape[1] if vectors.ndim == 2 else 0)


@dataclass
class _Matrix:
    generation: int
    vectors: np.ndarray
    chunks: list[tuple[str, str, str, int, str]]  # task_id, document_id, filename, chunk, text


class SearchIndex:
    """Brute-force cosine search over a tenant's chunks, with the matrix cached per generation."""

    def __init__(self, connection: Redis) -> None:
        self.connection = connection
        self._cache: dict[str, _Matrix] = {}
        self._lock = threading.Lock()

    def search(self, tenant: str, query_vector: np.ndarray, k: int) -> list[dict[str, Any]]:
        matrix = self._matrix(tenant, query_vector.shape[-1])
        if not matrix.chunks:
            return []
        scores = matrix.vectors @ query_vector.astype(np.float32).ravel()
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        results = []
        for i in top[scores[top] > 0]:
            task_id, document_id, filename, chunk, text = matrix.chunks[i]
            results.append({"text": text, "score": round(float(scores[i]), 6), "task_id": task_id,
                            "document_id": document_id, "filename": filename, "chunk": chunk})
        return results

    def _matrix(self, tenant: str, dim: int) -> _Matrix:
        generation = int(self.connection.get(keys.kb_generation(tenant)) or 0)
        cached = self._cache.get(tenant)
        if cached is not None and cached.generation == generation and _dim(cached) in (dim, 0):
            return cached
        with self._lock:
            matrix = _load(self.connection, tenant, generation, dim)
            self._cache[tenant] = matrix
            return matrix


def _dim(matrix: _Matrix) -> int:
    return matrix.vectors.shape[1] if matrix.vectors.size else 0


def _load(connection: Redis, tenant: str, generation: int, dim: int) -> _Matrix:
    """Read every document of the tenant in one pipelined round trip; skip other dimensions."""
    doc_keys = sorted(connection.smembers(keys.kb_documents(tenant)))
    pipe = connection.pipeline(transaction=False)
    for key in doc_keys:
        pipe.hmget(key, "task_id", "document_id", "filename", "texts", "vectors", "dim")
    blocks, chunks = [], []
    for row in pipe.execute():
        if row[0] is None or int(row[5] or 0) != dim:
            continue
        task_id, document_id, filename = (v.decode() for v in row[:3])
        texts = json.loads(row[3])
        blocks.append(np.frombuffer(row[4], dtype=np.float32).reshape(len(texts), dim))
        chunks.extend((task_id, document_id, filename, n, text) for n, text in enumerate(texts))
    vectors = np.vstack(blocks) if blocks else np.zeros((0, dim), dtype=np.float32)
    return _Matrix(generation, vectors, chunks)


def remove_document(connection: Redis, tenant: str, document_id: str) -> bool:
    """Delete a document's chunks; True when there was one."""
    key = keys.kb_document(tenant, document_id)
    pipe = connection.pipeline()
    pipe.delete(key)
    pipe.srem(keys.kb_documents(tenant), key)
    pipe.incr(keys.kb_generation(tenant))
    return bool(pipe.execute()[0])
