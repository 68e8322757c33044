"""Upgrading knowledge bases written before chunk ids: each document whole in its hash
(``texts`` JSON plus CSR arrays or a dense matrix) becomes the staged-and-flipped layout.

Why in place and by the workers: the old hash holds everything the new layout needs (texts,
locations and the very vectors), so nothing is parsed or embedded again, and housekeeping runs
it within seconds of the first upgraded worker starting. Each document is re-written under its
own version, so a newer version indexed meanwhile wins, and the old hash stays searchable-to-be
until its flip replaces it: no document is lost on the way.
"""
from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
from redis import Redis

from jobs import index, keys
from jobs.embedding import Embedding, SparseRows

log = logging.getLogger(__name__)


def legacy_document(fields: dict[bytes, bytes], tenant: str) -> index.IndexedDocument | None:
    """The document an old-layout hash describes, or None when it is not one."""
    if b"texts" not in fields or b"first" in fields or b"task_id" not in fields:
        return None
    texts: list[str] = json.loads(fields[b"texts"])
    places: list[dict[str, Any]] = (json.loads(fields[b"locations"]) if b"locations" in fields
                                    else [{} for _ in texts])
    dim = int(fields.get(b"dim") or 0)
    vectors: Embedding
    if (fields.get(b"format") or b"dense") == b"sparse":
        vectors = SparseRows.from_bytes(fields[b"indptr"], fields[b"indices"], fields[b"values"],
                                        dimension=dim)
    else:
        vectors = np.frombuffer(fields[b"vectors"], dtype=np.float32).reshape(len(texts), dim)
    return index.IndexedDocument(
        tenant, fields[b"document_id"].decode(), fields[b"filename"].decode(),
        fields[b"task_id"].decode(), int(fields[b"version"]), texts, vectors, places)


def migrate(connection: Redis, vectors: index.VectorWriter | None = None) -> int:
    """Re-write every old-layout document of every tenant; returns how many.

    Once a whole pass found none left, a marker says so and later calls return at once: no new
    document is ever written in the old layout."""
    if connection.exists(keys.kb_layout_migrated()):
        return 0
    head, tail = keys.kb_documents("\0").split("\0")
    moved, damaged = 0, 0
    for set_key in connection.scan_iter(match=keys.kb_documents("*"), count=500):
        tenant = set_key.decode()[len(head):-len(tail)]
        for doc_key in connection.smembers(set_key):
            doc = legacy_document(connection.hgetall(doc_key), tenant)
            if doc is None:
                continue
            try:
                index.write(connection, doc, vectors)
                moved += 1
            except (ValueError, KeyError) as exc:  # a hash too damaged to read: keep it, say so
                damaged += 1
                log.warning("cannot migrate %s: %s", doc_key.decode(), exc)
    if moved:
        log.info("migrated %d documents to the chunk-id layout", moved)
    if not damaged:
        connection.set(keys.kb_layout_migrated(), 1)
    return moved
