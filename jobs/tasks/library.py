"""The document library: a tenant's documents, newest first, each as its latest submitted
content left it, and one document with every task of it.

Why a sorted set of its own (keys.tenant_documents: document id → when new content of it was
last submitted): nothing else names a tenant's documents. The upload's claim adds a document
whenever it creates a task for it (jobs.tasks.submit), the document's delete takes it out in
the same MULTI as its other records (jobs.tasks.lifecycle), and jobs.upgrades.library_backfill
puts in, once, the documents that existed before the set did.

A document reads as its latest task (keys.document_latest) says: that task's status, name,
size and version, whatever an older version indexed. Its latest task's record expires with the
retention (INTAKE_RETENTION_DAYS) while the knowledge base keeps the document: the indexed entry
then stands in (`succeeded`, with what the entry keeps). A member that names neither is left
out, and taken out of the set by the read that finds it so (checked again in one script, so a
document uploaded meanwhile stays).

A page without filters is one ZREVRANGE and one script call per VIEW_GROUP documents, all in
one round trip. A filter by name (`query`) or status reads every document of the tenant, in
pieces of SCAN_PIECE: fine up to about 100,000 documents per tenant (a second or so of Redis
work, in short script calls other clients run between), not beyond: a tenant with more would
want an index of names, which this module does not keep.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from redis import Redis
from redis.client import Pipeline

from jobs.core import keys, scripts
from jobs.core.clock import iso, timestamp
from jobs.core.exceptions import NoSuchDocument
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import records as tasks
from jobs.tasks import states
from jobs.tasks.record import (
    CREATED_AT,
    DOCUMENT_ID,
    FILENAME,
    KIND,
    PIPELINE_VERSION,
    RESULT,
    SIZE,
    STATUS,
    TENANT,
    UPDATED_AT,
    VERSION,
    TaskRecord,
)
from jobs.text.filetypes import extension_kind, media_type

#: Documents read per script call: each holds Redis about a millisecond at most.
VIEW_GROUP = 200
#: Documents read per round trip while a filter reads them all.
SCAN_PIECE = 1000

#: What a listing reads of each document's latest task.
LIST_FIELDS: tuple[str, ...] = (
    TENANT,
    DOCUMENT_ID,
    FILENAME,
    STATUS,
    KIND,
    SIZE,
    CREATED_AT,
    UPDATED_AT,
    VERSION,
    PIPELINE_VERSION,
    RESULT,
)

_LATEST = scripts.load(__file__, "library_latest", {"LIST_FIELDS": LIST_FIELDS})
# Takes a document out of a tenant's set only while nothing names it; returns 1 when it did.
_FORGET = scripts.load(__file__, "library_forget")
# Adds a document not in the set yet (one in it was placed by an upload, which knows better);
# returns 1 when it did.
_ADD = scripts.load(__file__, "library_add")


def document_url(document_id: str) -> str:
    """Where the API answers one document: its id, `/` kept and the rest percent-encoded, so
    that an id holding `?`, `#`, `%` or a space still names it when a client follows it."""
    return f"/api/documents/{quote(document_id, safe='/')}"


def original_url(document_id: str) -> str:
    """Where the API sends a document's original file back (encoded as `document_url`)."""
    return f"/api/originals/{quote(document_id, safe='/')}"


def with_original_urls(hits: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Search hits, each with its document's `original_url`."""
    return [{**hit, "original_url": original_url(hit["document_id"])} for hit in hits]


def page(
    connection: Redis,
    kb: KnowledgeBase,
    tenant: str,
    *,
    offset: int = 0,
    limit: int = 50,
    query: str | None = None,
    status: str | None = None,
) -> dict[str, Any]:
    """`{"total", "documents", "offset", "limit"}`: the tenant's documents newest first (by when
    new content was last submitted), from `offset`. `query` keeps those whose id or file name
    holds it (case-insensitive); `status` those whose latest task has it (states.STATUSES,
    else ValueError). `kb`: the process's knowledge base, where entries whose task records
    expired are read."""
    if status is not None and status not in states.STATUSES:
        raise ValueError(f"unknown status {status!r}")
    if query or status:
        return _filtered(connection, kb, tenant, offset, limit, query or "", status)
    key = keys.tenant_documents(tenant)
    pipe = connection.pipeline(transaction=False)
    pipe.zcard(key)
    pipe.zrevrange(key, offset, offset + limit - 1)
    total, members = pipe.execute()
    ids = [member.decode() for member in members]
    found = _read(connection, kb.redis, tenant, ids)
    gone = _forget(connection, kb, tenant, [i for i, entry in zip(ids, found) if entry is None])
    return {
        "total": max(total - gone, 0),
        "documents": [e for e in found if e is not None],
        "offset": offset,
        "limit": limit,
    }


def _filtered(
    connection: Redis,
    kb: KnowledgeBase,
    tenant: str,
    offset: int,
    limit: int,
    query: str,
    status: str | None,
) -> dict[str, Any]:
    """`page` with a filter: every document read, in pieces, newest first. A document that an
    upload moves to the top meanwhile may be missed by this read; none is counted twice."""
    key, needle = keys.tenant_documents(tenant), query.casefold()
    total, kept, stale, seen, start = 0, [], [], set(), 0
    while True:
        ids = [m.decode() for m in connection.zrevrange(key, start, start + SCAN_PIECE - 1)]
        if not ids:
            break
        start += len(ids)
        for document_id, entry in zip(ids, _read(connection, kb.redis, tenant, ids)):
            if document_id in seen:
                continue
            seen.add(document_id)
            if entry is None:
                stale.append(document_id)
            elif (status is None or entry["status"] == status) and (
                needle in document_id.casefold() or needle in (entry["filename"] or "").casefold()
            ):
                if offset <= total < offset + limit:
                    kept.append(entry)
                total += 1
    _forget(connection, kb, tenant, stale)
    return {"total": total, "documents": kept, "offset": offset, "limit": limit}


def document(connection: Redis, kb: KnowledgeBase, tenant: str, document_id: str) -> dict[str, Any]:
    """One document as a page of `page` shows it, with `tasks`: every task of it the records
    still hold, newest first. Raises NoSuchDocument (another tenant's is one)."""
    pipe = connection.pipeline(transaction=False)
    pipe.get(keys.document_latest(tenant, document_id))
    pipe.smembers(keys.document_tasks(tenant, document_id))
    latest, members = pipe.execute()
    latest_id = latest.decode() if latest else None
    task_ids = sorted({m.decode() for m in members} | ({latest_id} if latest_id else set()))
    found = [
        r
        for r in tasks.load_many(connection, task_ids)
        if r is not None and r.tenant == tenant and r.document_id == document_id
    ]
    found.sort(key=_newest_first)
    by_id = {record.id: record for record in found}
    entry: dict[str, Any] | None
    if latest_id in by_id:
        entry = _from_task(document_id, latest_id, by_id[latest_id])
    else:
        entry = _from_index(document_id, _indexed(kb.redis, tenant, [document_id])[0])
        if entry is None and found:  # the latest-task key expired before its records
            entry = _from_task(document_id, found[0].id, found[0])
    if entry is None:
        raise NoSuchDocument()
    return {**entry, "tasks": [_task_entry(record) for record in found]}


def older_versions(
    connection: Redis, kb: KnowledgeBase, tenant: str, document_id: str, current: str
) -> list[str]:
    """The document's other versions than `current`, newest first: its tasks the records
    still hold, then the one the knowledge base holds. Read only when the current version's
    original is missing, to find the newest one that is stored."""
    members = connection.smembers(keys.document_tasks(tenant, document_id))
    found = [
        r
        for r in tasks.load_many(connection, sorted(m.decode() for m in members))
        if r is not None and r.tenant == tenant and r.id != current
    ]
    found.sort(key=_newest_first)
    indexed = kb.redis.hget(keys.kb_document(tenant, document_id), "task_id")
    older = [record.id for record in found]
    if indexed is not None and indexed.decode() not in older + [current]:
        older.append(indexed.decode())
    return older


def _newest_first(record: TaskRecord) -> tuple[int, float]:
    """Latest submitted first: by version (the submission's time, µs), then by created_at."""
    return (-record.version, -timestamp(record.created_at))


def _read(
    connection: Redis, kb: Redis, tenant: str, document_ids: list[str]
) -> list[dict[str, Any] | None]:
    """Each document's entry (None when nothing names it any more), in order: from its latest
    task's record, else from the knowledge base's entry."""
    if not document_ids:
        return []
    rows = _latest_rows(connection, [keys.document_latest(tenant, d) for d in document_ids])
    found: list[dict[str, Any] | None] = []
    for document_id, row in zip(document_ids, rows):
        record = TaskRecord.from_row(LIST_FIELDS, row[1:], task_id=row[0].decode()) if row else None
        if record is not None and record.tenant == tenant and record.document_id == document_id:
            found.append(_from_task(document_id, record.id, record))
        else:
            found.append(None)
    missing = [n for n, entry in enumerate(found) if entry is None]
    if missing:
        indexed = _indexed(kb, tenant, [document_ids[n] for n in missing])
        for n, fields in zip(missing, indexed):
            found[n] = _from_index(document_ids[n], fields)
    return found


def _latest_rows(connection: Redis, latest_keys: list[str]) -> list[list[Any]]:
    """_LATEST over `latest_keys`, VIEW_GROUP per call, in one round trip."""
    groups = [latest_keys[i : i + VIEW_GROUP] for i in range(0, len(latest_keys), VIEW_GROUP)]

    def build(pipe: Pipeline) -> None:  # reads only: safe to send again (scripts.send)
        for group in groups:
            _LATEST.queue(pipe, args={"task_prefix": keys.TASK_PREFIX}, more_keys=group)

    return [row for reply in scripts.send(connection, build) for row in reply]


def _indexed(kb: Redis, tenant: str, document_ids: list[str]) -> list[list[bytes | None]]:
    """What the knowledge base's entry of each document keeps, in order (all None: none)."""
    pipe = kb.pipeline(transaction=False)
    for document_id in document_ids:
        pipe.hmget(
            keys.kb_document(tenant, document_id), "task_id", "filename", "chunks", "version"
        )
    return pipe.execute()


def _from_task(document_id: str, task_id: str, record: TaskRecord) -> dict[str, Any]:
    """A document's entry from its latest task's record (a size or version of 0 is none: no
    file is empty, a version is a time)."""
    result = json.loads(record.result) if record.result else {}
    return _entry(
        document_id,
        task_id=task_id,
        filename=record.filename,
        status=record.status or states.PENDING,
        version=record.version or None,
        pipeline_version=record.pipeline_version or None,
        chunks=_int(result.get("chunks")),
        size=record.size or None,
        content_type=media_type(record.kind),
        created_at=record.created_at or None,
        updated_at=record.updated_at or record.created_at or None,
    )


def _from_index(document_id: str, fields: list[bytes | None]) -> dict[str, Any] | None:
    """A document's entry from the knowledge base's, once its task records have expired: it is
    indexed, so its task succeeded; its size and pipeline version were not kept."""
    task_id, filename, chunks, version = (v.decode() if v is not None else None for v in fields)
    if task_id is None:
        return None
    when = _time_of_version(_int(version))
    return _entry(
        document_id,
        task_id=task_id,
        filename=filename or "",
        status=states.SUCCEEDED,
        version=_int(version),
        pipeline_version=None,
        chunks=_int(chunks),
        size=None,
        content_type=media_type(extension_kind(filename or "")),
        created_at=when,
        updated_at=when,
    )


def _entry(
    document_id: str,
    *,
    task_id: str,
    filename: str,
    status: str,
    version: int | None,
    pipeline_version: str | None,
    chunks: int | None,
    size: int | None,
    content_type: str,
    created_at: str | None,
    updated_at: str | None,
) -> dict[str, Any]:
    """The one builder of a document's JSON (docs/architecture.md §5, "Document")."""
    return {
        "document_id": document_id,
        "filename": filename,
        "status": status,
        "version": version,
        "pipeline_version": pipeline_version,
        "chunks": chunks,
        "bytes": size,
        "content_type": content_type,
        "created_at": created_at,
        "updated_at": updated_at,
        "task_id": task_id,
        "url": document_url(document_id),
        "original_url": original_url(document_id),
    }


def _task_entry(record: TaskRecord) -> dict[str, Any]:
    """One task of a document's history: what tells its versions and runs apart."""
    view = tasks.view(record)
    result = view["result"] or {}
    return {
        "id": view["id"],
        "batch_id": view["batch_id"],
        "status": view["status"],
        "status_text": view["status_text"],
        "filename": view["filename"],
        "bytes": record.size or None,
        "version": record.version or None,
        "pipeline_version": view["pipeline_version"] or None,
        "chunks": _int(result.get("chunks")),
        "error": view["error"],
        "created_at": view["created_at"],
        "started_at": view["started_at"],
        "ended_at": view["ended_at"],
        "updated_at": view["updated_at"],
        "url": view["url"],
        "page_url": view["page_url"],
    }


def _int(raw: Any) -> int | None:
    try:
        return int(raw) if raw not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _time_of_version(version: int | None) -> str | None:
    """A version is its run's submission time in µs (jobs.tasks.record.created)."""
    if not version:
        return None
    try:
        return iso(datetime.fromtimestamp(version / 1e6, UTC))
    except (OverflowError, OSError, ValueError):
        return None


def _forget(connection: Redis, kb: KnowledgeBase, tenant: str, document_ids: list[str]) -> int:
    """Take out of the tenant's set the documents a read found nothing of, each only while
    that still holds (_FORGET: while no key named names it, the indexed entry among them
    where the script can read it); returns how many went."""
    if not document_ids:
        return 0

    def build(pipe: Pipeline) -> None:  # each a ZREM on a condition: safe to send again
        for document_id in document_ids:
            named = [
                keys.document_latest(tenant, document_id),
                *kb.keys_on_queue(keys.kb_document(tenant, document_id)),
            ]
            _FORGET.queue(
                pipe,
                keys={"documents": keys.tenant_documents(tenant)},
                args={"document_id": document_id},
                more_keys=named,
            )

    return sum(int(gone) for gone in scripts.send(connection, build))
