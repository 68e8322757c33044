"""Upgrading knowledge bases written before chunk ids: each document whole in its hash
(``texts`` JSON plus CSR arrays or a dense matrix) gets the staged-and-flipped layout too.

Why in place, and why the old fields stay for a while: the old hash holds everything the new
layout needs (texts, locations and the very vectors), so nothing is parsed or embedded again,
and each document is re-written under its own version, so a newer version indexed meanwhile
wins. The flip keeps the old fields in the hash, so web processes of the previous release keep
finding the document while the new ones find it through the new layout: run
``python -m jobs.upgrades.kb_layout`` before switching (search never misses a document), or let
the new workers' housekeeping do it within seconds of their start (then, until a document is
done, the new web processes miss it). Once a whole pass finds nothing left, a marker says when;
LEGACY_GRACE_SECONDS later housekeeping deletes the old fields (the old release is gone by then).

The lexical index before BM25 kept cosine weights, which cannot give BM25's scores: `to_bm25`
indexes each document's words again from the chunk texts the knowledge base keeps, under the
same chunk ids (nothing to parse or embed, no flip: the document stays the same version), then
deletes the cosine index. Until a document is done, search by words misses it; housekeeping
does it within seconds of the new workers' start, or `python -m jobs.upgrades.kb_layout`
before.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import numpy as np
from redis import Redis, WatchError

from jobs.core import keys
from jobs.core.redis_client import COMMAND, connect
from jobs.kb import index, postings
from jobs.text.terms import TERMS

log = logging.getLogger(__name__)

#: How long after the migration the old layout's fields stay, for the previous release's web.
LEGACY_GRACE_SECONDS = 3600
LEGACY_FIELDS = ("texts", "locations", "indptr", "indices", "values", "vectors")


def legacy_document(fields: dict[bytes, bytes], tenant: str) -> index.IndexedDocument | None:
    """The document an old-layout hash describes, or None when it is not one (or migrated)."""
    if b"texts" not in fields or b"first" in fields or b"task_id" not in fields:
        return None
    texts: list[str] = json.loads(fields[b"texts"])
    places: list[dict[str, Any]] = (
        json.loads(fields[b"locations"]) if b"locations" in fields else [{} for _ in texts]
    )
    dim = int(fields.get(b"dim") or 0)
    vectors: np.ndarray | None = None  # sparse: the stored cosine weights are no term counts,
    if (fields.get(b"format") or b"dense") != b"sparse":  # which staging counts from the texts
        vectors = np.frombuffer(fields[b"vectors"], dtype=np.float32).reshape(len(texts), dim)
    return index.IndexedDocument(
        tenant,
        fields[b"document_id"].decode(),
        fields[b"filename"].decode(),
        fields[b"task_id"].decode(),
        int(fields[b"version"]),
        texts,
        vectors,
        places,
    )


def _document_keys(connection: Redis) -> list[tuple[str, bytes]]:
    """(tenant, document hash key) of every tenant's knowledge base."""
    head, tail = keys.kb_documents("\0").split("\0")
    found = []
    for set_key in connection.scan_iter(match=keys.kb_documents("*"), count=500):
        tenant = set_key.decode()[len(head) : -len(tail)]
        found += [(tenant, doc_key) for doc_key in connection.smembers(set_key)]
    return found


def migrate(connection: Redis, vectors: index.VectorWriter | None = None) -> int:
    """Give every old-layout document of every tenant the new layout; returns how many.

    Once a whole pass found none left, later calls return at once (no new document is written
    in the old layout) but for deleting the old fields when their grace is over."""
    marked = connection.get(keys.kb_layout_migrated())
    if marked is not None:
        if marked != b"clean" and float(marked) < time.time() - LEGACY_GRACE_SECONDS:
            drop_legacy_fields(connection)
        return 0
    moved, damaged = 0, 0
    for tenant, doc_key in _document_keys(connection):
        doc = legacy_document(connection.hgetall(doc_key), tenant)
        if doc is None:
            continue
        try:
            index.write(connection, doc, vectors, keep_legacy=True)
            moved += 1
        except (ValueError, KeyError) as exc:  # a hash too damaged to read: keep it, say so
            damaged += 1
            log.warning("cannot migrate %s: %s", doc_key.decode(), exc)
    if moved:
        log.info("migrated %d documents to the chunk-id layout", moved)
    if not damaged:
        connection.set(keys.kb_layout_migrated(), time.time(), nx=True)
    return moved


def to_bm25(connection: Redis) -> int:
    """Index the words of every document indexed with cosine weights again, for BM25, then
    delete the cosine index; returns how many documents. Once done, later calls return at once.
    """
    if connection.exists(keys.kb_lexical_migrated()):
        return 0
    moved, left = 0, 0
    tenants: set[str] = set()
    for tenant, doc_key in _document_keys(connection):
        tenants.add(tenant)
        lexical, first, chunks = connection.hmget(doc_key, "lexical", "first", "chunks")
        if lexical == b"bm25":
            continue
        if first is None:  # the layout before chunk ids: `migrate` writes it for BM25
            left += 1
            continue
        if _index_words_again(connection, tenant, doc_key, int(first), int(chunks or 0)):
            moved += 1
        elif connection.hget(doc_key, "first") == first:
            left += 1
    if left:
        return moved
    for tenant in tenants:
        for pattern in keys.kb_cosine_keys(tenant):
            for key in connection.scan_iter(match=pattern, count=1000):
                connection.unlink(key)
    connection.set(keys.kb_lexical_migrated(), time.time())
    if moved:
        log.info("indexed the words of %d documents again for BM25", moved)
    return moved


def _index_words_again(
    connection: Redis, tenant: str, doc_key: bytes, first: int, chunks: int
) -> bool:
    """One document's BM25 entries from its stored texts; False when the document moved on
    (replaced or deleted) meanwhile: its new version is indexed for BM25 already."""
    records = (
        connection.hmget(keys.kb_texts(tenant), list(range(first, first + chunks)))
        if (chunks)
        else []
    )
    texts = [json.loads(record)[2] if record else "" for record in records]
    reference = connection.hget(keys.kb_lexical_stats(tenant), "reference")
    if reference is None:
        connection.hsetnx(keys.kb_lexical_stats(tenant), "reference", postings.REFERENCE_LENGTH)
        reference = connection.hget(keys.kb_lexical_stats(tenant), "reference")

    def still_this_version(pipe: Any) -> bool:
        pipe.watch(doc_key)
        return (
            pipe.hget(doc_key, "first") == str(first).encode()
            and pipe.hget(doc_key, "lexical") != b"bm25"
        )

    if not index.write_lexical(
        connection, tenant, first, TERMS.count(texts), float(reference), guard=still_this_version
    ):
        return False
    with connection.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(doc_key)
            if pipe.hget(doc_key, "first") != str(first).encode():
                return False
            pipe.multi()
            pipe.hset(doc_key, "lexical", "bm25")
            pipe.execute()
        except WatchError:
            return False
    return True


def drop_legacy_fields(connection: Redis) -> None:
    """Delete the old layout's fields from migrated documents' hashes; then mark it done."""
    for _tenant, doc_key in _document_keys(connection):
        if connection.hexists(doc_key, "first"):
            connection.hdel(doc_key, *LEGACY_FIELDS)
    connection.set(keys.kb_layout_migrated(), "clean")


def main() -> int:
    """`python -m jobs.upgrades.kb_layout`: migrate the knowledge base now, before a deploy (on
    $INTAKE_KB_URL when it is set, else on $REDIS_URL)."""
    from jobs.core.settings import Settings
    from jobs.kb.knowledge_base import KnowledgeBase

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    settings = Settings.from_env()
    kb = KnowledgeBase.of(settings, connect(settings.redis_url, COMMAND))
    store = kb.open_vectors()
    started = time.perf_counter()
    moved = migrate(kb.redis, store) + to_bm25(kb.redis)
    print(
        f"{moved} document{'' if moved == 1 else 's'} migrated in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
