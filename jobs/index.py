"""The knowledge base: each document's chunks and vectors in Redis, replaced atomically, searched
by cosine similarity.

A document is written by one Lua script in the same MULTI as its task's `succeeded` state, so a reader
sees either the old version or the new one, never half of either, and a document becomes
searchable exactly when its task succeeds. A version number (the run's submission time) keeps an
older run from overwriting a newer one. Vectors are stored as the embedder made them: dense
(``vectors``: a float32 matrix) or sparse (``format = sparse``: the CSR arrays of `SparseRows`).
Search holds a per-tenant snapshot keyed by a generation counter, so unchanged data is never
reloaded: a dense matrix, or for sparse rows an inverted index (jobs.sparse) so that a query
only reads the postings of its own few buckets. Redis stays the only source of truth.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from redis import Redis
from redis.client import Pipeline

from jobs import keys
from jobs.embedding import Embedding, SparseRows
from jobs.failures import PermanentError
from jobs.sparse import InvertedIndex, top_k

# KEYS: document hash, tenant's document set, tenant's generation, tenant's chunk count
# ARGV: version, task_id, document_id, filename, texts json, chunk count, dim, format
#       ('dense' | 'sparse'), locations json, then vectors (dense) or indptr, indices, values
_UPSERT = """
local current = redis.call('HMGET', KEYS[1], 'version', 'chunks', 'texts')
if current[1] and tonumber(current[1]) > tonumber(ARGV[1]) then return 0 end
local before = tonumber(current[2] or '0')
if current[1] and not current[2] and current[3] then before = #cjson.decode(current[3]) end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'task_id', ARGV[2], 'document_id', ARGV[3],
           'filename', ARGV[4], 'texts', ARGV[5], 'chunks', ARGV[6], 'dim', ARGV[7],
           'format', ARGV[8], 'locations', ARGV[9])
if ARGV[8] == 'sparse' then
  redis.call('HSET', KEYS[1], 'indptr', ARGV[10], 'indices', ARGV[11], 'values', ARGV[12])
else
  redis.call('HSET', KEYS[1], 'vectors', ARGV[10])
end
redis.call('SADD', KEYS[2], KEYS[1])
redis.call('INCR', KEYS[3])
redis.call('INCRBY', KEYS[4], tonumber(ARGV[6]) - before)
return 1
"""

# KEYS: tenant's chunk count, document hash. What the tenant holds, and the document's own
# earlier version (counted from its texts, in Redis, where it was indexed before counts were kept).
_HELD = """
local current = redis.call('HMGET', KEYS[2], 'chunks', 'texts')
local previous = tonumber(current[1] or '0')
if not current[1] and current[2] then previous = #cjson.decode(current[2]) end
return {tonumber(redis.call('GET', KEYS[1]) or '0'), previous}
"""

# KEYS: document hash, tenant's document set, tenant's generation, tenant's chunk count.
_REMOVE = """
local current = redis.call('HMGET', KEYS[1], 'chunks', 'texts')
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local chunks = tonumber(current[1] or '0')
if not current[1] and current[2] then chunks = #cjson.decode(current[2]) end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], KEYS[1])
redis.call('INCR', KEYS[3])
redis.call('DECRBY', KEYS[4], chunks)
return 1
"""
_DATA_FIELDS = {"dense": ("vectors",), "sparse": ("indptr", "indices", "values")}


@dataclass(frozen=True)
class IndexedDocument:
    """One document's chunks, their L2-normalised vectors (dense float32 or sparse rows) and
    where each chunk starts (`locations`, one per chunk; none given: all ``{}``)."""

    tenant: str
    document_id: str
    filename: str
    task_id: str
    version: int
    texts: list[str]
    vectors: Embedding
    locations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class PreparedUpsert:
    """A document's upsert, encoded once (texts as JSON, vectors as bytes) ahead of its MULTI."""

    keys: tuple[str, ...]
    args: tuple[Any, ...]


def prepare_upsert(doc: IndexedDocument) -> PreparedUpsert:
    """Encode a document for `queue_upsert`; raises ValueError for vectors that do not fit."""
    if isinstance(doc.vectors, SparseRows):
        form, dim, data = "sparse", doc.vectors.dimension, list(doc.vectors.to_bytes())
    else:
        vectors = np.ascontiguousarray(doc.vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise ValueError("dense vectors must be a 2-D array")
        form, dim, data = "dense", vectors.shape[1], [vectors.tobytes()]
    if len(doc.vectors) != len(doc.texts):
        raise ValueError(f"{len(doc.texts)} chunks but {len(doc.vectors)} vectors")
    locations = doc.locations or [{} for _ in doc.texts]
    if len(locations) != len(doc.texts):
        raise ValueError(f"{len(doc.texts)} chunks but {len(locations)} locations")
    return PreparedUpsert(
        (keys.kb_document(doc.tenant, doc.document_id), keys.kb_documents(doc.tenant),
         keys.kb_generation(doc.tenant), keys.tenant_chunks(doc.tenant)),
        (doc.version, doc.task_id, doc.document_id, doc.filename, json.dumps(doc.texts, ensure_ascii=False),
         len(doc.texts), dim, form, json.dumps(locations, ensure_ascii=False), *data))


def queue_upsert(pipe: Pipeline, doc: IndexedDocument | PreparedUpsert) -> None:
    """Queue the replacement of a document on a MULTI pipeline.

    The caller adds its task's `succeeded` write to the same pipeline, so both land together.
    The script's reply is 0 when a newer version was already indexed (that one stays).
    """
    prepared = doc if isinstance(doc, PreparedUpsert) else prepare_upsert(doc)
    pipe.eval(_UPSERT, len(prepared.keys), *prepared.keys, *prepared.args)


def quota_keys(tenant: str, document_id: str) -> list[str]:
    """What `check_chunk_limit` reads: WATCH them so the check holds until the write."""
    return [keys.tenant_chunks(tenant), keys.kb_document(tenant, document_id)]


def check_chunk_limit(reader: Redis | Pipeline, tenant: str, document_id: str, chunks: int,
                      limit: int) -> None:
    """Refuse, readably, a document that would take the tenant past INTAKE_TENANT_CHUNK_LIMIT.

    Its own earlier version is replaced, so only the difference counts. Deleting documents
    makes room; a Retry then indexes this one without parsing or embedding it again.
    """
    held, previous = (int(v) for v in reader.eval(
        _HELD, 2, keys.tenant_chunks(tenant), keys.kb_document(tenant, document_id)))
    if held - previous + chunks > limit:
        raise PermanentError(
            f"The knowledge base is full: it holds {held:,} of its {limit:,} chunks and this "
            f"document needs {chunks:,}. Delete documents you no longer need, then Retry.",
            code="knowledge_base_full", step="indexing", retryable=True)


def _kind(query: Embedding) -> tuple[str, int]:
    """The (format, dimension) of a query embedding: only documents of that kind can match."""
    if isinstance(query, SparseRows):
        if len(query) != 1:
            raise ValueError("a sparse query must have exactly one row")
        return "sparse", query.dimension
    return "dense", int(np.shape(query)[-1])


@dataclass
class _Snapshot:
    """One tenant's searchable chunks of one kind, as of one generation."""

    generation: int
    kind: tuple[str, int]
    chunks: list[tuple[str, str, str, int, str, dict[str, Any]]]
    # task_id, document_id, filename, chunk number, text, location
    dense: np.ndarray | None = None
    sparse: InvertedIndex | None = None

    def scores(self, query: Embedding) -> np.ndarray:
        if self.sparse is not None:
            return self.sparse.scores(query)
        return self.dense @ np.asarray(query, dtype=np.float32).ravel()


class SearchIndex:
    """Cosine search over a tenant's chunks, with a snapshot cached per tenant and generation."""

    def __init__(self, connection: Redis) -> None:
        self.connection = connection
        self._cache: dict[str, _Snapshot] = {}
        self._lock = threading.Lock()

    def search(self, tenant: str, query: Embedding, k: int) -> list[dict[str, Any]]:
        """The `k` best chunks with a positive score, best first (ties: earlier chunk first).

        `query` is a dense 1-D vector or `SparseRows` with one row; documents embedded in
        another format or dimension cannot be compared with it and are skipped.
        """
        snapshot = self._snapshot(tenant, _kind(query))
        if not snapshot.chunks:
            return []
        scores = snapshot.scores(query)
        results = []
        for i in top_k(scores, k):
            task_id, document_id, filename, chunk, text, location = snapshot.chunks[i]
            results.append({"text": text, "score": round(float(scores[i]), 6), "task_id": task_id,
                            "document_id": document_id, "filename": filename, "chunk": chunk,
                            "location": dict(location)})
        return results

    def _snapshot(self, tenant: str, kind: tuple[str, int]) -> _Snapshot:
        generation = int(self.connection.get(keys.kb_generation(tenant)) or 0)
        cached = self._cache.get(tenant)
        if cached is not None and cached.generation == generation and cached.kind == kind:
            return cached
        with self._lock:
            cached = self._cache.get(tenant)  # another thread may have just built it
            if cached is None or cached.generation != generation or cached.kind != kind:
                cached = self._cache[tenant] = _load(self.connection, tenant, generation, kind)
            return cached


def _load(connection: Redis, tenant: str, generation: int, kind: tuple[str, int]) -> _Snapshot:
    """Read every document of the tenant in one pipelined round trip; skip other kinds."""
    form, dim = kind
    doc_keys = sorted(connection.smembers(keys.kb_documents(tenant)))
    pipe = connection.pipeline(transaction=False)
    for key in doc_keys:
        pipe.hmget(key, "task_id", "document_id", "filename", "texts", "locations", "format",
                   "dim", *_DATA_FIELDS[form])
    blocks: list[Any] = []
    chunks: list[tuple[str, str, str, int, str, dict[str, Any]]] = []
    for (task_id, document_id, filename, texts, locations, doc_form, doc_dim,
         *data) in pipe.execute():
        # Documents indexed before the 'format' field existed are dense.
        if (task_id is None or (doc_form or b"dense").decode() != form
                or int(doc_dim or 0) != dim or None in data):
            continue
        texts = json.loads(texts)
        if form == "sparse":
            blocks.append(SparseRows.from_bytes(*data, dimension=dim))
        else:
            blocks.append(np.frombuffer(data[0], dtype=np.float32).reshape(len(texts), dim))
        names = (task_id.decode(), document_id.decode(), filename.decode())
        places = json.loads(locations) if locations else [{}] * len(texts)
        chunks.extend((*names, n, text, place)
                      for n, (text, place) in enumerate(zip(texts, places)))
    if form == "sparse":
        rows = SparseRows.concatenate(blocks) if blocks else SparseRows.empty(dim)
        return _Snapshot(generation, kind, chunks, sparse=InvertedIndex(rows))
    dense = np.vstack(blocks) if blocks else np.zeros((0, dim), dtype=np.float32)
    return _Snapshot(generation, kind, chunks, dense=dense)


def document_chunks(connection: Redis, tenant: str, document_id: str, task_id: str,
                    offset: int, limit: int) -> tuple[int, list[dict[str, Any]]] | None:
    """The total and one page of the chunks the task indexed, or None when the knowledge base
    holds no chunks of that task (never indexed, deleted, or replaced by a newer version)."""
    owner, texts, locations = connection.hmget(keys.kb_document(tenant, document_id),
                                               "task_id", "texts", "locations")
    if owner is None or owner.decode() != task_id or texts is None:
        return None
    texts = json.loads(texts)
    places = json.loads(locations) if locations else [{}] * len(texts)
    page = range(offset, min(offset + limit, len(texts)))
    return len(texts), [{"chunk": n, "text": texts[n], "location": places[n]} for n in page]


def remove_document(connection: Redis, tenant: str, document_id: str) -> bool:
    """Delete a document's chunks; True when there was one."""
    return bool(connection.eval(
        _REMOVE, 4, keys.kb_document(tenant, document_id), keys.kb_documents(tenant),
        keys.kb_generation(tenant), keys.tenant_chunks(tenant)))


def ensure_chunk_counts(connection: Redis) -> None:
    """Count the chunks of every tenant whose count does not exist yet (indexes written before
    the count was kept), so the chunk limit holds for them too."""
    head, tail = keys.kb_documents("\0").split("\0")
    for key in connection.scan_iter(match=keys.kb_documents("*"), count=500):
        tenant = key.decode()[len(head):-len(tail)]
        if connection.exists(keys.tenant_chunks(tenant)):
            continue
        pipe = connection.pipeline(transaction=False)
        members = connection.smembers(key)
        for member in members:
            pipe.hmget(member, "chunks", "texts")
        total = sum(int(c) if c else (len(json.loads(t)) if t else 0)
                    for c, t in pipe.execute())
        connection.set(keys.tenant_chunks(tenant), total, nx=True)
