"""Re-index: documents run again from their stored originals under today's pipeline version,
after a deploy that changed the pipeline (chunk size, embedder, OCR setting).

A re-index is an upload whose files are already stored: one task per document, registered by
the same claim as any upload (jobs.tasks.submit), so it has a batch with progress, counts
against the same limits, waits on the tenant's `bulk` queue unless told otherwise (fresh
uploads go first; fair share between tenants as for any job), and is a duplicate when the
document's content is already indexed under this pipeline version, unless forced. No byte
travels in the request: each new task names the task whose original it reads
(record.ORIGINAL_OF), and its worker copies that original under its own name in the store
before reading it (a hard link, or S3's copy inside the store: jobs.tasks.originals.load).

While it runs, every document stays findable from its previous version: the new version
replaces it in one flip (jobs.kb.index), never before it is indexed, so none is missing and
none is found twice at any moment.

What keeps it from multiplying work:
- A document has at most one re-index waiting. A forced one is claimed as a re-run
  (Upload.rerun): a new task unless the task of that content is pending, retrying or running,
  which it answers as a duplicate, decided in the claim's own script, so two clicks at once
  are one run.
- `all` leaves out a document whose latest task failed (a bad file, a bomb: it would fail
  again, at full cost, at each click) unless forced; by its id it is re-run as asked.
- `all` reads the library a PAGE at a time and stops as soon as more documents are chosen
  than the queues have room for, refusing the request whole (429, or 503 when all tenants'
  queue is full) before reading the rest: the claim would refuse it anyway, and one more
  document than the room is all it takes to know.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from redis import Redis

from jobs.core import keys
from jobs.core.exceptions import LimitReached
from jobs.core.settings import Settings
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import library, lifecycle, originals, states
from jobs.tasks import records as tasks
from jobs.tasks.record import TaskRecord
from jobs.tasks.submit import Upload, measure

#: The most documents one `all` re-index reads at once (ids, then their records).
PAGE = 1000
#: The code of a document `all` leaves out because its latest task failed.
LAST_RUN_FAILED = "last_run_failed"


@dataclass(frozen=True)
class Chosen:
    """What a re-index request comes to: one Upload per document found, and the ids refused
    (`{"document_id", "code", "message"}`, like an upload's `rejected`)."""

    uploads: list[Upload]
    rejected: list[dict[str, str]]


def choose_all(
    connection: Redis, kb: KnowledgeBase, settings: Settings, tenant: str, *, force: bool = False
) -> Chosen:
    """Every document of the tenant (keys.tenant_documents), oldest first, so that a re-index
    of all goes through the library in the order it was built, read a PAGE at a time; those
    whose latest task failed are left out unless `force`. Raises LimitReached once more
    documents are chosen than the queues have room for (`_room`), without reading further."""
    limit, room = _room(connection, settings, tenant)
    uploads: list[Upload] = []
    rejected: list[dict[str, str]] = []
    seen: set[str] = set()
    start = 0
    while True:
        page = connection.zrange(keys.tenant_documents(tenant), start, start + PAGE - 1)
        start += PAGE
        ids = [i for i in (member.decode() for member in page) if i not in seen]
        seen.update(ids)  # an upload meanwhile moves a document to the end: read it once
        chosen = choose(connection, kb, settings, tenant, ids, force=force, skip_failed=not force)
        uploads += chosen.uploads
        rejected += chosen.rejected
        if len(uploads) > room:
            raise LimitReached(
                "reindex_too_large" if len(uploads) > settings.tenant_queue_limit else limit
            )
        if len(page) < PAGE:
            return Chosen(uploads, rejected)


def _room(connection: Redis, settings: Settings, tenant: str) -> tuple[str, int]:
    """The limit a re-index would pass first, and how many more tasks it lets wait: the
    claim's own (INTAKE_TENANT_QUEUE_LIMIT, INTAKE_QUEUE_LIMIT), which count every file of a
    batch, duplicates too. (A library larger than the tenant's whole queue is refused as
    `reindex_too_large` instead: waiting would not cure it.)"""
    pipe = connection.pipeline(transaction=False)
    pipe.zcard(keys.tenant_active(tenant))
    pipe.zcard(keys.active())
    tenant_waiting, waiting = pipe.execute()
    tenant_room = settings.tenant_queue_limit - tenant_waiting
    room = settings.queue_limit - waiting
    if room < tenant_room:
        return "queue_full", max(room, 0)
    return "tenant_full", max(tenant_room, 0)


def choose(
    connection: Redis,
    kb: KnowledgeBase,
    settings: Settings,
    tenant: str,
    document_ids: Iterable[str],
    *,
    force: bool = False,
    skip_failed: bool = False,
) -> Chosen:
    """The current version of each document (lifecycle.current_version) as an Upload that
    reads that version's original, a re-run when `force`; an id with no document of this
    tenant, or whose original is gone, is refused, and one whose latest task failed when
    `skip_failed`. Two round trips for the records, none for any byte, except for a
    version stored by a release that did not record its digest (its original is read once)."""
    ids = list(dict.fromkeys(document_ids))
    pipe = connection.pipeline(transaction=False)
    for document_id in ids:
        pipe.get(keys.document_latest(tenant, document_id))
    latest = pipe.execute()
    pipe = kb.redis.pipeline(transaction=False)
    for document_id in ids:
        pipe.hget(keys.kb_document(tenant, document_id), "task_id")
    indexed = pipe.execute()
    versions = [lifecycle.current_version(a, b) for a, b in zip(latest, indexed)]
    records = tasks.load_many(connection, [v or "" for v in versions])
    uploads, rejected = [], []
    for document_id, task_id, record in zip(ids, versions, records):
        if task_id is None or record is None or record.tenant != tenant:
            rejected.append(_refused(document_id, "not_found", "No such document."))
            continue
        if skip_failed and record.status == states.FAILED:
            rejected.append(
                _refused(
                    document_id,
                    LAST_RUN_FAILED,
                    "Its last run failed; re-index it by itself, or with force, to run it again.",
                )
            )
            continue
        if record.status in (states.FAILED, states.CANCELED):
            task_id, record = _stored_version(
                connection, kb, settings, tenant, document_id, task_id, record
            )
        sha256 = record.sha256 or _digest(connection, settings, tenant, document_id, task_id)
        if sha256 is None:
            rejected.append(
                _refused(
                    document_id,
                    "upload_expired",
                    "The original of this document is no longer stored; upload it again.",
                )
            )
            continue
        uploads.append(
            Upload(
                filename=record.filename or document_id,
                document_id=document_id,
                kind=record.kind,
                size=record.size,
                sha256=sha256,
                original_of=task_id,
                rerun=force,
            )
        )
    return Chosen(uploads, rejected)


def _stored_version(
    connection: Redis,
    kb: KnowledgeBase,
    settings: Settings,
    tenant: str,
    document_id: str,
    task_id: str,
    record: TaskRecord,
) -> tuple[str, TaskRecord]:
    """A failed or canceled version keeps its original only for the upload retention
    (jobs.tasks.originals): past it, the newest older version whose original is stored runs
    instead (the one indexed, most often); the version itself when none is."""
    if originals.stored(connection, settings, tenant, document_id, task_id, record.original_of):
        return task_id, record
    for older in library.older_versions(connection, kb, tenant, document_id, task_id):
        [found] = tasks.load_many(connection, [older])
        if (
            found is not None
            and found.tenant == tenant
            and originals.stored(
                connection,
                settings,
                tenant,
                document_id,
                older,
                found.original_of,
            )
        ):
            return older, found
    return task_id, record


def _digest(
    connection: Redis, settings: Settings, tenant: str, document_id: str, task_id: str
) -> str | None:
    """The sha256 of an original whose record does not carry it; None when it is gone."""
    try:
        stream = originals.open_original(settings, tenant, document_id, task_id)
    except originals.NotStored:
        return None
    with contextlib.closing(stream):
        return measure(stream, settings.max_file_bytes).sha256


def _refused(document_id: str, code: str, message: str) -> dict[str, Any]:
    return {"document_id": document_id, "code": code, "message": message}
