"""The knowledge base's write side: a document's chunks go into Redis (and dense vectors into
the vector engine) ahead of one atomic flip that makes them the document's searchable version.

Why staged, then flipped: a large document has hundreds of thousands of postings. Written in
one script, they would hold Redis (and every search) for a second; written in small pipelined
pieces under chunk ids nobody can see yet, they cost searches nothing. Then the flip, queued
in the same MULTI as the task's `succeeded` state, sets those ids live in a bitmap and clears
the old version's: a reader sees the old version or the new one, never half of either, and the
document is searchable exactly when its task succeeds. A version number (the run's submission
time) keeps an older run from replacing a newer one. Indexing one document touches only its own
entries: nothing is rebuilt for the others.

What a flip or a delete leaves behind (the rows and texts of dead ids, their vectors, and dead
ids inside posting strings) is garbage: `collect_garbage` deletes it after the fact, and
compacts a posting string once a quarter of it is dead.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from redis import Redis, WatchError
from redis.client import Pipeline

from jobs.core import keys, scripts
from jobs.core.failures import PermanentError
from jobs.kb import postings
from jobs.text.terms import TERMS, SparseRows

#: Bytes of rows and texts per round trip while staging, and (term, level) groups of postings
#: per script call: small enough that Redis serves searches in between (a call of 1,000 groups
#: takes it ~1 ms), large enough that a 10,000-chunk document takes a few hundred calls.
PIECE_BYTES = 512 * 1024
GROUPS_PER_CALL = 1000
ROWS_PER_PIECE = 1000
#: A run of chunk ids written but never flipped (its worker died) is garbage after this long.
STAGED_TTL_SECONDS = 3600
#: Dead runs a collection takes from the head of the list at once.
RUNS_PER_COLLECTION = 64
#: How long a garbage collector's lock outlives its last step (a collector that died frees it).
COLLECTOR_LOCK_MS = 30_000

# The knowledge base's scripts (jobs/kb/lua/index_*.lua say what each receives and answers).
# Every one is called through redis-py's Script: on a MULTI (a flip, a piece of rows) its
# pipeline checks the script exists before it is sent, since none of those may be sent twice.
_FLIP = scripts.load(__file__, "index_flip")
_REMOVE = scripts.load(__file__, "index_remove")
_RESERVE = scripts.load(__file__, "index_reserve")
_APPEND_POSTINGS = scripts.load(__file__, "index_append_postings")
_COUNT_TERMS = scripts.load(__file__, "index_count_terms")
_WRITE_PIECE = scripts.load(__file__, "index_write_piece")
_RELEASE = scripts.load(__file__, "index_release")
_DISCARD = scripts.load(__file__, "index_discard")
_HELD = scripts.load(__file__, "index_held")
_COUNT_TENANT = scripts.load(__file__, "index_count_tenant")
_COUNT_TOTAL = scripts.load(__file__, "index_count_total")


class VectorWriter(Protocol):
    """What the index needs of a vector engine (jobs.kb.vectors.VectorStore is one)."""

    def write(self, tenant: str, first: int, vectors: np.ndarray) -> None: ...

    def delete(self, tenant: str, first: int, stop: int) -> None: ...


@dataclass(frozen=True)
class IndexedDocument:
    """One document's chunks, their L2-normalised dense vectors (float32; None without a dense
    model) and where each chunk starts (`locations`, one per chunk; none given: all ``{}``).
    Their search terms are no input: `stage` counts them, for every embedder alike."""

    tenant: str
    document_id: str
    filename: str
    task_id: str
    version: int
    texts: list[str]
    vectors: np.ndarray | None
    locations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class StagedDocument:
    """A document written under fresh chunk ids [first, stop), not yet searchable."""

    tenant: str
    document_id: str
    first: int
    stop: int
    flip_keys: tuple[str, ...]
    flip_args: tuple[Any, ...]

    @property
    def run(self) -> str:
        return f"{self.first}:{self.stop}"


def _check(doc: IndexedDocument) -> tuple[str, int, np.ndarray | None, list[dict[str, Any]]]:
    """(format, dimension, dense vectors or None, locations); raises ValueError on a mismatch."""
    if doc.vectors is None:  # searched by its terms alone (the format names their space)
        form, dim, dense = "sparse", TERMS.dimension, None
    else:
        dense = np.ascontiguousarray(doc.vectors, dtype=np.float32)
        if dense.ndim != 2:
            raise ValueError("dense vectors must be a 2-D array")
        form, dim = "dense", dense.shape[1]
        if len(dense) != len(doc.texts):
            raise ValueError(f"{len(doc.texts)} chunks but {len(dense)} vectors")
    locations = doc.locations or [{} for _ in doc.texts]
    if len(locations) != len(doc.texts):
        raise ValueError(f"{len(doc.texts)} chunks but {len(locations)} locations")
    return form, dim, dense, locations


def stage(
    connection: Redis, doc: IndexedDocument, vectors: VectorWriter | None = None
) -> StagedDocument:
    """Write a document under new chunk ids, in pieces, ready for `queue_flip`.

    Every document gets lexical postings (for dense documents too: that is the search that
    still answers while the embedding service is down). Dense vectors go to `vectors`; without
    a vector engine they are not kept and the document is searched by its words alone.
    """
    form, dim, dense, locations = _check(doc)
    lexical = TERMS.count(doc.texts)  # a chunk's search terms: made here, and only here
    size = (len(doc.texts) + 7) // 8 * 8 or 8
    tenant = doc.tenant
    stop, reference = _RESERVE(
        connection,
        keys={
            "next_chunk": keys.kb_next_chunk(tenant),
            "staged": keys.kb_staged(tenant),
            "stats": keys.kb_lexical_stats(tenant),
        },
        args={"size": size, "now": time.time(), "reference": postings.REFERENCE_LENGTH},
    )
    stop, reference = int(stop), float(reference)
    first = stop - size
    run = f"{first}:{stop}"
    staged = StagedDocument(
        tenant,
        doc.document_id,
        first,
        stop,
        (
            keys.kb_document(tenant, doc.document_id),
            keys.kb_documents(tenant),
            keys.kb_generation(tenant),
            keys.tenant_chunks(tenant),
            keys.kb_live(tenant),
            keys.kb_staged(tenant),
            keys.kb_garbage(tenant),
            keys.kb_total_chunks(),
        ),
        (
            doc.version,
            doc.task_id,
            doc.document_id,
            doc.filename,
            len(doc.texts),
            first,
            stop,
            form,
            dim,
            "store" if dense is not None and vectors is not None else "none",
            run,
        ),
    )
    try:
        digest = keys.document_digest(doc.document_id)
        write_lexical(
            connection, tenant, first, lexical, reference, texts=(digest, doc.texts, locations)
        )
        if dense is not None and vectors is not None:
            vectors.write(tenant, first, dense)
    except BaseException:
        discard(connection, staged)  # what was written of it is garbage now, not in an hour
        raise
    return staged


def write_lexical(
    connection: Redis,
    tenant: str,
    first: int,
    rows: SparseRows,
    reference: float,
    *,
    texts: tuple[str, list[str], list[dict[str, Any]]] | None = None,
    guard: Any = None,
) -> bool:
    """Write the lexical entries of chunks ``first…`` (and their texts, when given: the
    document's digest, texts and locations); False when `guard` refused a piece.

    Rows go in pieces of ROWS_PER_PIECE chunks, each written by one script with the tenant's
    statistics (chunks, length, document frequencies) they add to, so that collecting the rows
    later (`_delete_runs`) takes away exactly what was added, whatever crashed in between; one
    script, not a MULTI, because a NOSCRIPT then leaves nothing done and the piece is sent again
    in one round trip (a MULTI holding a script must ask SCRIPT EXISTS first). `guard`, a
    callable given the pipeline, may queue a check that makes the piece land only while it holds
    (jobs.upgrades.kb_layout: the chunks are still the document's): then the script goes in a
    WATCHed MULTI. Postings follow by a script of at most GROUPS_PER_CALL groups, so that Redis
    never spends more than a millisecond or two on one call; sent PIECE_BYTES at a time. A small
    document (one piece of rows, one call of postings) sends its postings in its rows' script:
    one round trip.
    """
    encoded = postings.encode(rows, first, reference)
    rows_key, texts_key = keys.kb_rows(tenant), keys.kb_texts(tenant)
    stats = (keys.kb_term_chunks(tenant), keys.kb_lexical_stats(tenant))
    groups = encoded.groups
    together = (
        len(rows) <= ROWS_PER_PIECE
        and len(groups) <= GROUPS_PER_CALL
        and sum(len(group.ids) + 24 for group in groups) < PIECE_BYTES
    )
    for start in range(0, len(rows), ROWS_PER_PIECE):
        stop = min(start + ROWS_PER_PIECE, len(rows))
        lo, hi = int(rows.indptr[start]), int(rows.indptr[stop])
        buckets, counts = np.unique(rows.indices[lo:hi], return_counts=True)
        terms: list[Any] = []
        for bucket, count in zip(buckets.tolist(), counts.tolist()):
            terms += [postings.bucket_name(bucket), count]
        length = sum(int.from_bytes(row[:4], "big") for row in encoded.rows[start:stop])
        piece: list[Any] = []
        for n in range(start, stop):
            piece += [first + n, encoded.rows[n]]
        if texts is not None:
            digest, chunk_texts, locations = texts
            for n in range(start, stop):
                entry = [digest, n, chunk_texts[n], locations[n]]
                piece += [first + n, json.dumps(entry, ensure_ascii=False)]
        piece += terms
        names: list[str] = []
        if together:
            names, group_args = _postings_slots(tenant, groups)
            piece += group_args
        piece_call: dict[str, Any] = {
            "keys": {
                "rows": rows_key,
                "texts": texts_key,
                "frequencies": stats[0],
                "stats": stats[1],
            },
            "args": {
                "length": length,
                "row_count": stop - start,
                "text_count": 0 if texts is None else stop - start,
                "term_count": len(terms) // 2,
            },
            "more_keys": names,
            "rest": piece,
        }
        if guard is None:  # one script: a NOSCRIPT leaves nothing done, so it is sent again
            scripts.send(connection, functools.partial(_WRITE_PIECE.queue, **piece_call))
            continue
        with connection.pipeline(transaction=True) as pipe:
            if not guard(pipe):
                return False
            pipe.multi()
            _WRITE_PIECE(pipe, **piece_call)
            try:
                pipe.execute()
            except WatchError:
                return False
    if together:
        return True
    pipe, held = connection.pipeline(transaction=False), 0
    for start in range(0, len(groups), GROUPS_PER_CALL):
        call = groups[start : start + GROUPS_PER_CALL]
        _append_postings(pipe, tenant, call)
        held += sum(len(group.ids) + 24 for group in call)
        if held >= PIECE_BYTES:
            pipe.execute()
            held = 0
    pipe.execute()
    return True


def _append_postings(pipe: Pipeline, tenant: str, groups: list[postings.Group]) -> None:
    """Queue one call of the postings script for `groups` (at most GROUPS_PER_CALL)."""
    names, args = _postings_slots(tenant, groups)
    _APPEND_POSTINGS(pipe, more_keys=names, rest=args)


def _postings_slots(tenant: str, groups: list[postings.Group]) -> tuple[list[str], list[Any]]:
    """Per group, its two keys (postings at one level, the bucket's levels) and its four
    arguments (level, ids, largest tf, shortest chunk)."""
    names: list[str] = []
    args: list[Any] = []
    for group in groups:
        names += [
            keys.kb_postings(tenant, group.name, group.level),
            keys.kb_levels(tenant, group.name),
        ]
        args += [group.level, group.ids, group.max_tf, group.min_length]
    return names, args


def queue_flip(pipe: Pipeline, staged: StagedDocument, *, keep_legacy: bool = False) -> None:
    """Queue the switch to the staged version on a MULTI pipeline.

    The caller adds its task's `succeeded` write to the same pipeline, so both land together.
    The script's reply is 0 when a newer version was already indexed (that one stays).
    `keep_legacy` (jobs.upgrades.kb_layout) leaves the old layout's fields in the document's hash.
    """
    _flip(pipe, staged.flip_keys, staged.flip_args, "1" if keep_legacy else "0")


def discard(connection: Redis, staged: StagedDocument) -> None:
    """A staged version that will not be flipped (the attempt failed or lost its task); once
    flipped, it is no longer staged and this does nothing."""
    _discard(connection, staged.tenant, staged.run)


def write(
    connection: Redis,
    doc: IndexedDocument,
    vectors: VectorWriter | None = None,
    *,
    keep_legacy: bool = False,
) -> bool:
    """Stage and flip one document outside any task (migrations, benchmarks, tests); True
    when it is now the indexed version."""
    staged = stage(connection, doc, vectors)
    pipe = connection.pipeline()
    queue_flip(pipe, staged, keep_legacy=keep_legacy)
    flipped = bool(pipe.execute()[0])
    collect_garbage(connection, doc.tenant, vectors)
    return flipped


def quota_keys(tenant: str, document_id: str) -> list[str]:
    """What `check_chunk_limit` reads: WATCH them so the check holds until the write."""
    return [
        keys.tenant_chunks(tenant),
        keys.kb_document(tenant, document_id),
        keys.kb_total_chunks(),
    ]


def check_chunk_limit(
    reader: Redis | Pipeline,
    tenant: str,
    document_id: str,
    chunks: int,
    limit: int,
    total_limit: int,
) -> int:
    """Refuse, readably, a document that would take the tenant past INTAKE_TENANT_CHUNK_LIMIT
    or all tenants together past INTAKE_KB_CHUNK_LIMIT; returns how many chunks its indexed
    version holds (0: none, so its flip leaves no garbage). `chunk_limit_read` and
    `judge_chunk_limit` are the same in two halves, for a read sent with a WATCH."""
    held = _HELD(reader, keys=_held_keys(tenant, document_id))
    return judge_chunk_limit(held, chunks, limit, total_limit)


def chunk_limit_read(tenant: str, document_id: str) -> tuple[Any, ...]:
    """What `judge_chunk_limit` judges: the chunks the tenant, the document's indexed version
    and all tenants hold (the keys of `quota_keys`), as one command for
    jobs.core.scripts.watch."""
    return _HELD.command(keys=_held_keys(tenant, document_id))


def _held_keys(tenant: str, document_id: str) -> dict[str, str]:
    return {
        "tenant_chunks": keys.tenant_chunks(tenant),
        "doc": keys.kb_document(tenant, document_id),
        "all_chunks": keys.kb_total_chunks(),
    }


def judge_chunk_limit(reply: Sequence[Any], chunks: int, limit: int, total_limit: int) -> int:
    """`check_chunk_limit` on the reply of `chunk_limit_read`.

    Its own earlier version is replaced, so only the difference counts. Deleting documents
    makes room; a Retry then indexes this one without parsing or embedding it again.
    """
    held, previous, total = (int(v) for v in reply)
    if held - previous + chunks > limit:
        raise PermanentError(
            f"The knowledge base is full: it holds {held:,} of its {limit:,} chunks and this "
            f"document needs {chunks:,}. Delete documents you no longer need, then Retry.",
            code="knowledge_base_full",
            step="indexing",
            retryable=True,
        )
    if total - previous + chunks > total_limit:
        raise PermanentError(
            f"The service's knowledge base is full: all its users together hold {total:,} of "
            f"its {total_limit:,} chunks and this document needs {chunks:,}. Retry once "
            "documents were deleted (deleting your own makes room too).",
            code="knowledge_base_full",
            step="indexing",
            retryable=True,
        )
    return previous


def document_chunks(
    connection: Redis, tenant: str, document_id: str, task_id: str, offset: int, limit: int
) -> tuple[int, list[dict[str, Any]]] | None:
    """The total and one page of the chunks the task indexed, or None when the knowledge base
    holds no chunks of that task (never indexed, deleted, or replaced by a newer version)."""
    owner, chunks, first = connection.hmget(
        keys.kb_document(tenant, document_id), "task_id", "chunks", "first"
    )
    if owner is None or owner.decode() != task_id or first is None:
        return None
    total, first = int(chunks), int(first)
    page = list(range(offset, min(offset + limit, total)))
    if not page:
        return total, []
    records = connection.hmget(keys.kb_texts(tenant), [first + n for n in page])
    found = []
    for n, record in zip(page, records):
        if record is not None:
            _digest, _n, text, location = json.loads(record)
            found.append({"chunk": n, "text": text, "location": location or {}})
    return total, found


def remove_document(
    connection: Redis,
    tenant: str,
    document_id: str,
    vectors: VectorWriter | None = None,
    *,
    tombstone: bool = False,
) -> bool:
    """Delete a document's chunks; True when there was one. It leaves search at once; its
    entries are deleted right after. `tombstone`: no flip of a version staged before now
    lands afterwards (a flip on its way from another Redis: jobs.kb.pending_flips)."""
    removed = bool(removal(connection, tenant, document_id, tombstone=tombstone))
    if removed:
        collect_garbage(connection, tenant, vectors)
    return removed


def queue_removal(pipe: Pipeline, tenant: str, document_id: str) -> None:
    """Queue remove_document's removal on a MULTI pipeline, so that it lands together with the
    caller's check of the document (read under WATCH); its reply is 1 when there was one.
    The caller collects the garbage afterwards (`collect_garbage`)."""
    removal(pipe, tenant, document_id)


def removal(
    target: Redis | Pipeline, tenant: str, document_id: str, *, tombstone: bool = False
) -> Any:
    """The removal script, sent (a client) or queued (a pipeline); its reply is 1 when there
    was a document. The caller collects the garbage afterwards."""
    return _REMOVE(
        target,
        keys={
            "doc": keys.kb_document(tenant, document_id),
            "docs": keys.kb_documents(tenant),
            "generation": keys.kb_generation(tenant),
            "tenant_chunks": keys.tenant_chunks(tenant),
            "live": keys.kb_live(tenant),
            "staged": keys.kb_staged(tenant),
            "garbage": keys.kb_garbage(tenant),
            "all_chunks": keys.kb_total_chunks(),
            "next_chunk": keys.kb_next_chunk(tenant),
        },
        args={"tombstone_ttl": STAGED_TTL_SECONDS if tombstone else ""},
    )


def _flip(target: Redis | Pipeline, flip_keys: Any, flip_args: Any, keep: str) -> Any:
    """The flip script with a StagedDocument's keys and arguments, in the order it declares
    them (kept so, in that order, by a pending flip: jobs.kb.pending_flips)."""
    return _FLIP(
        target,
        keys=dict(zip(_FLIP.keys, flip_keys)),
        args=dict(zip(_FLIP.args, [*flip_args, keep])),
    )


def _discard(connection: Redis, tenant: str, run: str) -> None:
    _DISCARD(
        connection,
        keys={"staged": keys.kb_staged(tenant), "garbage": keys.kb_garbage(tenant)},
        args={"run": run},
    )


def _count_terms(
    pipe: Pipeline,
    stats: tuple[str, str],
    direction: int,
    chunks: int,
    length: int,
    terms: list[Any],
) -> None:
    _COUNT_TERMS(
        pipe,
        keys={"frequencies": stats[0], "stats": stats[1]},
        args={"direction": direction, "chunks": chunks, "length": length},
        rest=terms,
    )


def flip(connection: Redis, flip_keys: list[str], flip_args: list[Any]) -> bool:
    """Apply a flip on its own (the knowledge base on a Redis of its own: the flip cannot
    share the task's MULTI, jobs.kb.pending_flips); True when that version is now indexed.
    Sending the same flip again changes nothing."""
    return bool(_flip(connection, flip_keys, flip_args, "0"))


def garbage_waiting(connection: Redis, tenant: str) -> int:
    """How many dead runs of chunk ids wait for the collector."""
    return int(connection.llen(keys.kb_garbage(tenant)))


def collect_garbage(
    connection: Redis, tenant: str, vectors: VectorWriter | None = None, runs: int = 1000
) -> int:
    """Delete the entries of up to `runs` dead runs of chunk ids; returns how many runs.

    A run stays at the head of the list until its entries are gone, so a crash midway only
    means the next collection does it again. Runs staged long ago and never flipped join first.
    One collector per tenant at a time (a lock whose holder each step checks in its MULTI): two
    would both read a run's rows and take them out of the statistics twice.
    """
    horizon = time.time() - STAGED_TTL_SECONDS
    pipe = connection.pipeline(transaction=False)
    pipe.zrangebyscore(keys.kb_staged(tenant), "-inf", horizon)
    pipe.lindex(keys.kb_garbage(tenant), 0)
    stale, run = pipe.execute()  # one round trip when there is nothing to do
    if not stale and run is None:
        return 0
    lock, token = keys.kb_collector(tenant), uuid.uuid4().hex
    if not connection.set(lock, token, nx=True, px=COLLECTOR_LOCK_MS):
        return 0  # another process is collecting this tenant's garbage
    try:
        for old in stale:
            _discard(connection, tenant, old)
        done = 0
        while done < runs:
            # The runs at the head, together: a re-index replaces documents faster than one
            # collection per run keeps up with, and their rows go in shared steps.
            batch = connection.lrange(
                keys.kb_garbage(tenant), 0, min(RUNS_PER_COLLECTION, runs - done) - 1
            )
            if not batch:
                break
            spans = [(int(first), int(stop)) for first, stop in (r.split(b":") for r in batch)]
            if not _delete_runs(connection, tenant, spans, (lock, token)):
                break
            if vectors is not None:
                for first, stop in spans:
                    vectors.delete(tenant, first, stop)
            # Only the lock's holder takes runs off the head; others only push at the tail.
            connection.ltrim(keys.kb_garbage(tenant), len(batch), -1)
            done += len(batch)
        return done
    finally:
        _RELEASE(connection, keys={"lock": lock}, args={"token": token})


def _delete_runs(
    connection: Redis,
    tenant: str,
    spans: list[tuple[int, int]],
    lock: tuple[str, str],
    step: int = 1000,
) -> bool:
    """Delete the rows and texts of every run [first, stop) of `spans` and take what their rows
    added out of the tenant's statistics, in one MULTI per `step` ids that lands only while this
    collector holds the lock (a crash midway: the next collection finds only the rows left);
    count the dead ids of each posting key and compact the keys where they reach a quarter.
    False: the lock was lost.
    """
    every = [chunk_id for first, stop in spans for chunk_id in range(first, stop)]
    rows_key, texts_key, dead_key = (
        keys.kb_rows(tenant),
        keys.kb_texts(tenant),
        keys.kb_dead(tenant),
    )
    stats = (keys.kb_term_chunks(tenant), keys.kb_lexical_stats(tenant))
    lock_key, token = lock
    touched: set[str] = set()
    for start in range(0, len(every), step):
        ids = every[start : start + step]
        with connection.pipeline(transaction=True) as pipe:
            pipe.watch(lock_key)
            if pipe.get(lock_key) != token.encode():
                return False
            dead = postings.dead_entries(
                [row for row in pipe.hmget(rows_key, ids) if row is not None]
            )
            posting_counts = {
                keys.kb_postings(tenant, name, level): count for name, level, count in dead.groups
            }
            pipe.multi()
            pipe.pexpire(lock_key, COLLECTOR_LOCK_MS)
            pipe.hdel(rows_key, *ids)
            pipe.hdel(texts_key, *ids)
            for key, count in posting_counts.items():
                pipe.hincrby(dead_key, key, count)
            if dead.chunks:
                terms: list[Any] = []
                for name, count in dead.frequencies.items():
                    terms += [name, count]
                _count_terms(pipe, stats, -1, dead.chunks, dead.length, terms)
            try:
                pipe.execute()
            except WatchError:
                return False
        touched.update(posting_counts)
    for key in _worth_compacting(connection, tenant, sorted(touched)):
        compact_if_worth_it(connection, tenant, key)
    return True


def _worth_compacting(connection: Redis, tenant: str, posting_keys: list[str]) -> list[str]:
    """The keys whose dead ids reached a quarter, judged for all of them in one round trip: a
    run touches a key per term of its chunks, and most are far from it (each is judged again
    under WATCH by `compact_if_worth_it`)."""
    if not posting_keys:
        return []
    pipe = connection.pipeline(transaction=False)
    pipe.hmget(keys.kb_dead(tenant), posting_keys)
    for key in posting_keys:
        pipe.strlen(key)
    dead, *sizes = pipe.execute()
    return [
        key
        for key, count, size in zip(posting_keys, dead, sizes)
        if count and int(count) * 4 >= size // postings.CHUNK_ID.itemsize
    ]


def compact_if_worth_it(connection: Redis, tenant: str, key: str) -> bool:
    """Rewrite a posting string without its dead chunk ids once they are a quarter of it.

    WATCH keeps a concurrent APPEND (a document being staged) from being lost: on a conflict
    the compaction is simply tried again.
    """
    dead_key, live_key = keys.kb_dead(tenant), keys.kb_live(tenant)
    while True:
        with connection.pipeline() as pipe:
            try:
                pipe.watch(key)
                dead = int(pipe.hget(dead_key, key) or 0)
                size = int(pipe.strlen(key)) // postings.CHUNK_ID.itemsize
                if dead == 0 or dead * 4 < size:
                    return False
                ids = np.frombuffer(pipe.get(key) or b"", dtype=postings.CHUNK_ID).astype(np.int64)
                live = _live_bits(pipe, live_key, ids)
                kept = ids[live].astype(postings.CHUNK_ID).tobytes()
                pipe.multi()
                if kept:
                    pipe.set(key, kept)
                else:  # the level is gone: its bound with it
                    pipe.delete(key)
                    name, level = key.rsplit(":", 2)[1:]
                    pipe.hdel(keys.kb_levels(tenant, name), level)
                pipe.hdel(dead_key, key)
                pipe.execute()
                return True
            except WatchError:
                continue


def _live_bits(reader: Redis | Pipeline, live_key: str, ids: np.ndarray) -> np.ndarray:
    """Which of `ids` are live (one GETRANGE of the bitmap bytes they span)."""
    if not len(ids):
        return np.zeros(0, dtype=bool)
    low, high = int(ids.min()) // 8, int(ids.max()) // 8
    raw = reader.getrange(live_key, low, high) or b""
    bits = np.unpackbits(np.frombuffer(raw.ljust(high - low + 1, b"\0"), dtype=np.uint8))
    return bits[ids - low * 8].astype(bool)


def ensure_chunk_counts(connection: Redis) -> None:
    """Count the chunks of every tenant whose count does not exist yet (indexes written before
    the count was kept), then, once, those of all tenants together, so both chunk limits hold
    for what was indexed before them too."""
    head, tail = keys.kb_documents("\0").split("\0")
    tenants = []
    for key in connection.scan_iter(match=keys.kb_documents("*"), count=500):
        tenant = key.decode()[len(head) : -len(tail)]
        tenants.append(tenant)
        if not connection.exists(keys.tenant_chunks(tenant)):
            _COUNT_TENANT(
                connection,
                keys={
                    "tenant_chunks": keys.tenant_chunks(tenant),
                    "all_chunks": keys.kb_total_chunks(),
                },
                args={"chunks": _count_documents(connection, key)},
            )
    if not connection.exists(keys.kb_total_chunks()):
        _COUNT_TOTAL(
            connection,
            keys={"all_chunks": keys.kb_total_chunks()},
            more_keys=[keys.tenant_chunks(tenant) for tenant in tenants],
        )


def _count_documents(connection: Redis, documents_key: bytes) -> int:
    """The chunks of a tenant's indexed documents, read from each document's hash."""
    pipe = connection.pipeline(transaction=False)
    for member in connection.smembers(documents_key):
        pipe.hmget(member, "chunks", "texts")
    return sum(int(c) if c else (len(json.loads(t)) if t else 0) for c, t in pipe.execute())
