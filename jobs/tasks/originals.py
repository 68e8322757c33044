"""The originals: every accepted file, stored once as uploaded, in the object store that
INTAKE_STORAGE_URL names (jobs.core.object_store), until its document is deleted.

An original is named by its tenant, its document (a digest of the id) and the task that
brought it: `tasks/<tenant>/<first two digits of the digest>/<document digest>-<task id>`. A
task id is unguessable and never reused, so two uploads never share a name; the tenant and the
document in the name let the sweep tell a kept original from an orphan without any index of
its own. The two digits spread a tenant's originals over 256 folders made once, so that on a
directory store no upload waits for a folder of its own (a mkdir costs as much as the file).
A job never runs before its original is there: the web stores a small file's original just
before the claim that registers its task (the claim and the job travel together; a claim that
creates no task deletes it), a larger one's or a batch's right after the claim and before each
job is enqueued (jobs.tasks.submit).

What becomes of them: a document's delete deletes the originals of all its tasks (`delete`).
An original is kept while its task record lives (INTAKE_RETENTION_DAYS) or while its version
is the one the knowledge base holds, however old, except that of a failed or canceled task,
kept only for the upload retention (INTAKE_UPLOAD_RETENTION_HOURS: a Retry within it resumes;
after it, Retry answers `upload_expired`), so that failed uploads do not fill the store;
`sweep`, run by the housekeeping at most once an hour, removes the others once they are an
hour old (a document deleted while the store did not answer, versions replaced long ago), and
what writes cut off by a kill left a day ago. What each tenant keeps is counted against its
quota (jobs.tasks.stored_bytes). Uploads an older release kept in Redis are moved to the store
by the first worker that reads them (`load`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import BinaryIO

from redis import Redis

from jobs.core import keys
from jobs.core.clock import timestamp
from jobs.core.exceptions import NoSuchDocument
from jobs.core.failures import PermanentError, TransientError
from jobs.core.object_store import NotStored, ObjectStore, open_store
from jobs.core.settings import Settings
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import record as task_record
from jobs.tasks import states, stored_bytes
from jobs.tasks.record import TaskRecord
from jobs.text.filetypes import media_type

log = logging.getLogger(__name__)
PREFIX = "tasks/"
SWEEP_EVERY_SECONDS = 3600
#: An orphan younger than this is left alone: a sweep never races an upload on its way.
SWEEP_MIN_AGE_SECONDS = 3600
#: A write cut off (a `.part-` file, an S3 multipart upload) is removed once its last piece
#: (a file) or its start (S3) is this old. Far beyond any write: the longest, a web storing an
#: upload of INTAKE_MAX_FILE_BYTES (512 MiB) from its spooled copy, takes under 90 minutes even
#: at 100 KB/s, and an S3 upload fails within minutes of a store that stops answering
#: (jobs.core.object_store's timeouts); a day also leaves any clock skew between machines and
#: the store out of the question.
UNFINISHED_MIN_AGE_SECONDS = 24 * 3600
_SWEEP_PAGE = 500
#: A task in one of these keeps its original only for the upload retention (unless indexed):
#: no attempt will read it again unless a person retries within that time.
_DROPPED_AFTER_RETENTION = (states.FAILED, states.CANCELED)


def name(tenant: str, document_id: str, task_id: str) -> str:
    """The object name of a task's original."""
    digest = keys.document_digest(document_id)
    return f"{PREFIX}{tenant}/{digest[:2]}/{digest}-{task_id}"


def _parsed(stored_name: str) -> tuple[str, str, str] | None:
    """(tenant, document digest, task id) of an original's name; None for any other name."""
    parts = stored_name[len(PREFIX) :].split("/")
    if len(parts) != 3 or parts[2].count("-") != 1:
        return None
    digest, task_id = parts[2].split("-")
    return (parts[0], digest, task_id) if digest[:2] == parts[1] else None


@lru_cache(maxsize=8)
def _store_at(address: str, pid: int) -> ObjectStore:
    return open_store(address)


def store(settings: Settings) -> ObjectStore:
    """The store of originals, one client per process and address: a work-horse forked from a
    worker whose maintenance thread swept the store must not share that client's sockets."""
    return _store_at(settings.storage_address, os.getpid())


def put(settings: Settings, tenant: str, document_id: str, task_id: str, source: BinaryIO) -> int:
    """Store a task's original from `source` (read from where it stands); the bytes stored."""
    return store(settings).put(name(tenant, document_id, task_id), source)


def open_original(settings: Settings, tenant: str, document_id: str, task_id: str) -> BinaryIO:
    """A stream of a task's original; raises NotStored."""
    return store(settings).open(name(tenant, document_id, task_id))


def stored(
    connection: Redis,
    settings: Settings,
    tenant: str,
    document_id: str,
    task_id: str,
    original_of: str = "",
) -> bool:
    """Whether a task's original is there to be read again (a Retry needs it): its own, the
    one a re-index reads (`original_of`), or one an older release kept in Redis."""
    target = store(settings)
    return (
        target.exists(name(tenant, document_id, task_id))
        or bool(original_of and target.exists(name(tenant, document_id, original_of)))
        or bool(connection.exists(keys.blob(task_id)))
    )


@dataclass(frozen=True)
class Original:
    """A document's original, ready to be sent: its name, media type, size and bytes."""

    task_id: str
    filename: str
    content_type: str
    size: int
    stream: BinaryIO


def of_task(
    connection: Redis, settings: Settings, tenant: str, task_id: str | None, document_id: str
) -> Original:
    """The original a task of `tenant` brought. Raises NoSuchDocument for another tenant's
    task as for an unknown one, or when its original is not stored."""
    record = TaskRecord.from_hash(connection.hgetall(keys.task(task_id))) if task_id else None
    if not task_id or record is None or record.tenant != tenant:
        raise NoSuchDocument()
    document_id = record.document_id or document_id
    # A re-index not run yet has no copy of its own: the one it will copy is the same bytes.
    source = record.original_of or task_id
    try:
        stream = open_original(settings, tenant, document_id, task_id)
    except NotStored:
        try:
            stream = open_original(settings, tenant, document_id, source)
        except NotStored:
            moved = _moved_from_redis(connection, settings, tenant, document_id, task_id)
            if moved is None:
                raise NoSuchDocument() from None
            stream = io.BytesIO(moved)
    return Original(
        task_id,
        record.filename or document_id,
        media_type(record.kind),
        record.size,
        stream,
    )


def load(
    connection: Redis,
    settings: Settings,
    tenant: str,
    document_id: str,
    task_id: str,
    size: int,
    original_of: str = "",
) -> bytes:
    """A task's original, whole (the parse reads it whole, in its sandbox); a re-index's
    (`original_of`: the task whose original it reads) is first copied under its own name
    inside the store, so that it belongs to the new version like any upload's. Its loss is
    permanent: the file must be uploaded again. A store that does not answer is transient: the
    attempt is retried like any outage, with a message that names the store."""
    data: bytes | None
    try:
        if original_of and not store(settings).exists(name(tenant, document_id, task_id)):
            store(settings).copy(
                name(tenant, document_id, original_of), name(tenant, document_id, task_id)
            )
        with contextlib.closing(open_original(settings, tenant, document_id, task_id)) as stream:
            data = stream.read()
    except NotStored:
        data = _moved_from_redis(connection, settings, tenant, document_id, task_id)
        if data is None:
            raise PermanentError(
                "The uploaded file is no longer stored (it was removed with "
                "its document, or never arrived); upload it again.",
                code="upload_expired",
            ) from None
    except Exception as exc:  # noqa: BLE001 - a disk's OSError, any of the S3 client's errors
        raise TransientError(
            "The store of uploaded files did not answer "
            f"({type(exc).__name__}); the attempt will be retried.",
            code="storage_unavailable",
        ) from exc
    if size and len(data) != size:
        raise PermanentError(
            "The upload of this file did not finish (the connection or the "
            "server was interrupted); upload it again.",
            code="upload_incomplete",
        )
    return data


def _moved_from_redis(
    connection: Redis, settings: Settings, tenant: str, document_id: str, task_id: str
) -> bytes | None:
    """An upload an older release kept in Redis: stored as an original, then let go there."""
    data = connection.get(keys.blob(task_id))
    if data is not None:
        put(settings, tenant, document_id, task_id, io.BytesIO(data))
        connection.delete(keys.blob(task_id))
    return data


def delete(settings: Settings, tenant: str, document_id: str, task_ids: Iterable[str]) -> None:
    """Delete these tasks' originals. A store that does not answer leaves them to `sweep`
    (logged, never failing the delete that asked)."""
    target = store(settings)
    for task_id in task_ids:
        try:
            target.delete(name(tenant, document_id, task_id))
        except Exception:  # noqa: BLE001 - any store error: the sweep removes it later
            log.warning(
                "original of task %s not deleted now; the sweep will", task_id, exc_info=True
            )


def sweep(connection: Redis, settings: Settings, kb: KnowledgeBase | None = None) -> int:
    """Remove the originals that are neither their task's (a record that lives) nor their
    document's indexed version, once an hour old, and those of failed or canceled tasks that
    ended more than the upload retention ago unless their version is indexed; returns how
    many. Counts what stays against its tenant's quota where the count missed it
    (jobs.tasks.stored_bytes). At most once per SWEEP_EVERY_SECONDS over the whole fleet (a
    lock key), since it lists the whole store. `kb`: the process's knowledge base, where the
    indexed versions are read (KnowledgeBase.of `settings` and `connection` when None).

    Writes cut off by a kill are cleared too, once a day old (UNFINISHED_MIN_AGE_SECONDS):
    no listing shows them, so nothing else would ever remove them."""
    if not connection.set(keys.originals_sweep(), 1, nx=True, ex=SWEEP_EVERY_SECONDS):
        return 0
    kb = KnowledgeBase.of(settings, connection) if kb is None else kb
    target, removed, page = store(settings), 0, []
    now = time.time()
    cleared = target.clear_unfinished(now - UNFINISHED_MIN_AGE_SECONDS)
    if cleared:
        log.info("cleared %d unfinished writes from the store of originals", cleared)
    for stored_name, modified, size in target.listing(PREFIX):
        parts = _parsed(stored_name)
        if modified > now - SWEEP_MIN_AGE_SECONDS or parts is None:
            continue
        page.append(Listed(stored_name, *parts, size))
        if len(page) >= _SWEEP_PAGE:
            removed += _sweep_page(connection, kb.redis, target, page, settings, now)
            page = []
    if page:
        removed += _sweep_page(connection, kb.redis, target, page, settings, now)
    return removed


def _seconds(iso_time: bytes | None) -> float:
    return timestamp(iso_time.decode()) if iso_time else 0.0


@dataclass(frozen=True)
class Listed:
    """An original the sweep listed."""

    name: str
    tenant: str
    digest: str
    task_id: str
    size: int


def _sweep_page(
    connection: Redis,
    kb: Redis,
    target: ObjectStore,
    page: list[Listed],
    settings: Settings,
    now: float,
) -> int:
    alive = connection.pipeline(transaction=False)
    indexed = kb.pipeline(transaction=False)
    for listed in page:
        alive.hmget(keys.task(listed.task_id), task_record.STATUS, task_record.ENDED_AT)
        indexed.hget(keys.kb_document_at(listed.tenant, listed.digest), "task_id")
    dropped, kept = [], []
    ended_before = now - settings.upload_retention_seconds
    for listed, (status, ended_at), holder in zip(page, alive.execute(), indexed.execute()):
        if (holder or b"").decode() == listed.task_id:
            kept.append(listed)
        elif status is None or (
            status.decode() in _DROPPED_AFTER_RETENTION and 0 < _seconds(ended_at) < ended_before
        ):
            dropped.append(listed)
        else:
            kept.append(listed)
    for listed in dropped:
        target.delete(listed.name)
    pipe = connection.pipeline(transaction=False)
    for tenant in {listed.tenant for listed in page}:
        stored_bytes.forget(pipe, tenant, [d.task_id for d in dropped if d.tenant == tenant])
        stored_bytes.count(pipe, tenant, [(k.task_id, k.size) for k in kept if k.tenant == tenant])
    pipe.execute()
    return len(dropped)
