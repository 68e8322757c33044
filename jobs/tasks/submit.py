"""Registering uploaded documents as tasks: idempotency claims, records, originals and RQ jobs.

A submit never parses. One script checks every limit, claims every file and registers what is
new — records, the reservation of its bytes in both upload budgets, the batch — and RQ's own
enqueue of each new task's job follows its original into the object store
(jobs.tasks.originals): a job never runs before its original is stored.

- One small file (`_submit_one`), what a person sending a note waits for: one round trip. The
  original is stored first, under the id the claim will give its task, then the claim and the
  job travel in one pipeline. When the claim does not create the task (a duplicate, a
  refusal), the job is taken back and the original deleted; a job a worker took first finds no
  task and does nothing.
- A batch or a large file (`_submit_many`), or any upload when webhooks are on (the batch's
  event is queued before any job runs): the claim first, so that a refused batch or a
  duplicate costs no byte in the store; then each new task's original and its job, on a
  pipeline sent every few files. A store that does not answer takes back the claims of the
  files not stored before the 503 (StorageUnavailable, jobs.tasks.unclaim). If the web dies
  in between, the reconciler fails the task as "job lost" (retryable), and an original cut
  short fails readably if retried.

The batch keeps what its claim decided (which files were new), so a re-send of the script by
the client (redis-py re-sends after a reset) answers the same and registers nothing twice.

The claim also says how many replicas are online (INFO replication, read in the script); with
one attached, WAIT ends a pipeline that holds one of the upload's last writes, and the upload
is accepted only once a replica confirmed it (jobs.core.replicas).
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from redis import Redis
from redis.client import Pipeline
from rq import Queue, Retry
from rq.job import Job
from rq.queue import EnqueueData

from jobs.core import keys, logs, metrics, scripts
from jobs.core import replicas as replicas_
from jobs.core.clock import now_iso
from jobs.core.exceptions import LimitReached, NotReplicated, StorageUnavailable
from jobs.core.failures import backoff_delays
from jobs.core.queues import DEFAULT_TENANT, PRIORITIES, Queues, queue_name
from jobs.core.queues import register as register_queues
from jobs.core.settings import Settings
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import originals, states, webhook_events
from jobs.tasks import record as task_record
from jobs.tasks.records import new_id
from jobs.tasks.unclaim import unclaim

JOB_FUNCTION = "jobs.pipeline.ingest_document"
SMALL_UPLOAD_FILES = 3  # this many files or fewer: intake-high, so one person's file is quick
BULK_UPLOAD_FILES = 50  # this many or more: intake-bulk, so a backlog never starves the rest
RESULT_TTL_SECONDS = 3600
ENQUEUE_EVERY = 20  # new tasks whose jobs are sent together, once their originals are stored
PIECE_BYTES = 1024 * 1024  # what `measure` reads of a stream at once
INLINE_BYTES = 256 * 1024  # a file this small is kept in memory by `measure` (Upload.data)

# The claim (jobs/tasks/lua/submit_claim.lua says what it receives and answers).
_SUBMIT = scripts.load(__file__, "submit_claim", task_record.SCRIPT_NAMES)


@dataclass
class _ClaimCall:
    """The claim's KEYS and ARGV by name, then, per file, its keys and its arguments (after
    the live statuses and the reusable one)."""

    keys: dict[str, str]
    args: dict[str, Any]
    file_keys: list[str]
    rest: list[Any]


@dataclass(frozen=True)
class Upload:
    """One accepted file: checked and named by the web layer, not yet parsed.

    Its bytes are held (`data`) only when small; a larger file is read again from `source`
    (a spooled file of the request) as it is stored, so a request never holds it in memory.
    """

    filename: str
    document_id: str
    kind: str
    size: int
    sha256: str
    data: bytes | None = None
    source: BinaryIO | None = None
    #: A re-index: the task whose stored original this one reads (jobs.tasks.reindex); no
    #: byte travels with it.
    original_of: str | None = None
    #: A forced re-index: a new run even of content indexed under this pipeline version, but
    #: the live task of this content when there is one (`_claimed_index`).
    rerun: bool = False

    @classmethod
    def from_bytes(cls, filename: str, document_id: str, data: bytes, kind: str) -> Upload:
        return cls(
            filename, document_id, kind, len(data), hashlib.sha256(data).hexdigest(), data=data
        )

    def stream(self) -> BinaryIO:
        """Its bytes from the first, to be read once."""
        if self.data is not None:
            return io.BytesIO(self.data)
        assert self.source is not None
        self.source.seek(0)
        return self.source


@dataclass(frozen=True)
class Measured:
    """What reading a stream once told: its size (up to the limit), digest and first bytes."""

    size: int
    sha256: str
    head: bytes
    data: bytes | None  # all of it, when no larger than INLINE_BYTES

    def too_large(self, limit: int) -> bool:
        return self.size > limit


def measure(stream: BinaryIO, limit: int, head_bytes: int = 4096) -> Measured:
    """Read a stream through in pieces: its size, sha256 and head, holding only a small file.

    Stops once more than `limit` bytes were read (the file is refused anyway).
    """
    digest, size, head, held = hashlib.sha256(), 0, b"", []
    while piece := stream.read(PIECE_BYTES):
        if len(head) < head_bytes:
            head += piece[: head_bytes - len(head)]
        size += len(piece)
        if size > limit:
            break
        digest.update(piece)
        if size <= INLINE_BYTES:
            held.append(piece)
    data = b"".join(held) if size <= INLINE_BYTES else None
    return Measured(size, digest.hexdigest(), head, data)


def choose_priority(file_count: int, priority: str | None) -> str:
    """An explicit priority wins; otherwise small uploads go first and large batches go last."""
    if priority in PRIORITIES:
        return priority
    if file_count <= SMALL_UPLOAD_FILES:
        return "high"
    if file_count >= BULK_UPLOAD_FILES:
        return "bulk"
    return "normal"


def choose_queue(file_count: int, priority: str | None, tenant: str = DEFAULT_TENANT) -> str:
    """The name of the tenant's queue at that priority (jobs.core.queues: `default`'s are the plain
    intake-high, intake, intake-bulk)."""
    return queue_name(tenant, choose_priority(file_count, priority))


def idempotency_digest(tenant: str, document_id: str, sha256: str, pipeline_version: str) -> str:
    material = json.dumps([tenant, document_id, sha256, pipeline_version])
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def submit_documents(
    connection: Redis,
    queues: Queues,
    settings: Settings,
    tenant: str,
    uploads: list[Upload],
    *,
    pipeline_version: str,
    priority: str | None = None,
    force: bool = False,
    trace_id: str | None = None,
    kb: KnowledgeBase | None = None,
) -> dict[str, Any]:
    """Create a batch of tasks (reusing duplicates) and enqueue one job per new task.

    `kb`: the process's knowledge base (KnowledgeBase.of `settings` and `connection` when
    None): what the claim is given of it (`KnowledgeBase.claim_reads`).

    Raises LimitReached when the batch is refused whole, and NotReplicated when the primary
    has a replica attached and none confirmed the upload within INTAKE_REPLICA_WAIT_MS: then
    everything is stored all the same, and a resend of the same files answers the same tasks
    (`duplicate: true`), nothing lost, nothing doubled (jobs.core.exceptions.NotReplicated).
    `trace_id` (the upload request's) is kept in each new task, for the logs of its worker.
    """
    ttl = settings.retention_seconds
    batch_id, created_at = new_id(), now_iso()
    firsts: dict[str, Upload] = {}
    for upload in uploads:  # the same file twice in one request is one task
        digest = idempotency_digest(tenant, upload.document_id, upload.sha256, pipeline_version)
        firsts.setdefault(digest, upload)
    queue = queues.get(choose_queue(len(firsts), priority, tenant))
    trace_id = trace_id or batch_id
    record = task_record.shared(
        tenant=tenant,
        batch_id=batch_id,
        created_at=created_at,
        queue=queue.name,
        pipeline_version=pipeline_version,
        trace_id=trace_id,
    )
    kb = KnowledgeBase.of(settings, connection) if kb is None else kb
    known = kb.claim_reads(tenant, [u.document_id for u in firsts.values()])
    call = _ClaimCall(
        keys={
            "active": keys.active(),
            "tenant_active": keys.tenant_active(tenant),
            "upload_bytes": keys.blob_bytes(),
            "tenant_upload_bytes": keys.tenant_blob_bytes(tenant),
            "upload_sizes": keys.tenant_blob_sizes(tenant),
            "batch_tasks": keys.batch_tasks(batch_id),
            "batch": keys.batch(batch_id),
            "tenant_batches": keys.tenant_batches(tenant),
            "tenant_chunks": keys.tenant_chunks(tenant),
            "all_chunks": keys.kb_total_chunks(),
            "documents": keys.tenant_documents(tenant),
            "metrics": keys.metrics(),
            "stored_sizes": keys.tenant_stored_sizes(tenant),
            "stored_bytes": keys.tenant_stored_bytes(tenant),
        },
        args={
            "force": "1" if force else "0",
            "ttl": ttl,
            "task_prefix": keys.TASK_PREFIX,
            "now": time.time(),
            "queue_places": settings.queue_limit,
            "tenant_places": settings.tenant_queue_limit,
            "blob_budget": settings.blob_budget_bytes,
            "tenant_blob_budget": settings.tenant_blob_budget_bytes,
            "chunk_limit": known.chunk_limit,
            "all_chunk_limit": known.all_chunk_limit,
            "file_count": len(firsts),
            "batch_id": batch_id,
            "tenant": tenant,
            "created_at": created_at,
            "submitted_field": metrics.field("tasks_submitted_total", queue=queue.name),
            "unconfirmed_field": metrics.field(replicas_.UNCONFIRMED, reason=""),
            "live_count": len(states.LIVE),
            "stored_quota": settings.tenant_stored_bytes,
            "reserved_places": settings.queue_reserve,
        },
        file_keys=[],
        rest=[*states.LIVE, states.SUCCEEDED],
    )
    new_ids: dict[str, str] = {}
    for number, (digest, upload) in enumerate(firsts.items()):
        task_id = new_ids[digest] = new_id()
        call.file_keys += [
            keys.idempotency(digest),
            keys.task(task_id),
            keys.document_tasks(tenant, upload.document_id),
            keys.document_latest(tenant, upload.document_id),
            keys.kb_document(tenant, upload.document_id),
        ]
        fields = _task_fields(task_id, upload, digest, settings, record)
        call.rest += [
            task_id,
            upload.size,
            _claimed_index(upload, known.indexed[number]),
            upload.document_id,
            len(fields),
        ]
        call.rest += [item for pair in fields.items() for item in pair]
    if _in_one_round_trip(list(firsts.values()), settings):
        [upload] = firsts.values()
        [task_id] = new_ids.values()
        claimed = _submit_one(
            connection, queues.pushed_by_claim(queue.name), settings, tenant, upload, task_id, call
        )
        last = connection.pipeline(transaction=False)
    else:
        claimed, last = _submit_many(
            connection, queue, settings, tenant, batch_id, list(firsts.values()), call
        )
    if replicas_.reported(claimed.replicas):
        if not len(last):  # WAIT counts its own connection's writes: one of the upload's
            last.expire(keys.batch(batch_id), ttl)
        replicas_.queue_wait(last, settings)
        _confirm(last.execute()[-1], settings, batch_id, tenant, trace_id)
    elif len(last):
        last.execute()
    return _summary(batch_id, created_at, firsts.values(), claimed.entries, tenant, trace_id)


def _claimed_index(upload: Upload, indexed: str) -> str:
    """What the claim takes for the task whose version the knowledge base holds: what the
    knowledge base said (`ClaimReads.indexed`), or, for a re-run, '' (none): then the claim,
    not forced, creates a task unless the one of this content is live, which it answers as a
    duplicate, in the same script as the creation, so a double click on Re-index is one run."""
    return "" if upload.rerun else indexed


@dataclass(frozen=True)
class Claimed:
    """What the claim answered: the replicas INFO listed online (-1: the server would not say),
    and per file its task's id and status (b'' for a task it created)."""

    replicas: int
    entries: list[bytes]

    @classmethod
    def of(cls, reply: list[Any]) -> Claimed:
        """Raises LimitReached for a refused batch."""
        if reply[0] != b"ok":
            raise LimitReached(reply[0].decode())
        return cls(int(reply[1]), reply[2:])

    def created(self, index: int) -> bool:
        return not self.entries[2 * index + 1]


def _in_one_round_trip(uploads: list[Upload], settings: Settings) -> bool:
    """One small file (held in memory), or one re-index, without webhooks: stored ahead of its
    claim, it costs at most INLINE_BYTES in the store when the claim refuses it; a larger
    file is claimed first, so that a refused one is never written."""
    return (
        len(uploads) == 1
        and not webhook_events.enabled(settings)
        and (uploads[0].data is not None or uploads[0].original_of is not None)
    )


def _submit_one(
    connection: Redis,
    queue: Queue,
    settings: Settings,
    tenant: str,
    upload: Upload,
    task_id: str,
    call: _ClaimCall,
) -> Claimed:
    """One file in one round trip, which is what a person sending a file waits for: its
    original is stored first, under the task id the claim will create; then RQ's enqueue of
    the job and the claim travel together. RQ writes the job's hash; the claim pushes the job
    onto its queue only when it creates the task, so a job is never queued for a duplicate, a
    refusal, or a claim the server could not run: a server that lost its scripts (a restart, a
    failover) answers NOSCRIPT and queues nothing, and the whole is sent again once the script
    is loaded (scripts.send: every command of this pipeline may run twice, the queues'
    registration being an SADD and RQ's enqueue the same job hash, pushed by the claim alone).
    When the claim does not create the task, its original is deleted."""
    stored = upload.original_of is None  # a re-index's worker copies its original itself
    if stored:
        try:
            originals.put(settings, tenant, upload.document_id, task_id, upload.stream())
        except Exception as exc:  # nothing is claimed yet: nothing to undo
            raise StorageUnavailable() from exc
    job_keys = [queue.key, Job.key_for(task_id)]

    def build(pipe: Pipeline) -> None:
        register_queues(pipe, tenant)
        queue.enqueue_many([job_data(task_id, settings)], pipeline=pipe)
        _SUBMIT.queue(
            pipe,
            keys=call.keys,
            args=call.args,
            more_keys=[*call.file_keys, *job_keys],
            rest=call.rest,
        )

    reply = scripts.send(connection, build, raise_on_error=False)[-1]
    if isinstance(reply, Exception) or reply[0] != b"ok" or reply[3]:
        if isinstance(reply, Exception):  # the claim never ran: its job's hash goes here
            connection.delete(Job.key_for(task_id))
        if stored:
            _withdraw_original(settings, tenant, upload, task_id)
    if isinstance(reply, Exception):
        raise reply
    return Claimed.of(reply)


def _withdraw_original(settings: Settings, tenant: str, upload: Upload, task_id: str) -> None:
    try:
        originals.delete(settings, tenant, upload.document_id, [task_id])
    except Exception:  # the sweep removes an original whose task does not exist
        logs.event("original_not_withdrawn", {"id": task_id, "tenant": tenant})


def _submit_many(
    connection: Redis,
    queue: Queue,
    settings: Settings,
    tenant: str,
    batch_id: str,
    uploads: list[Upload],
    call: _ClaimCall,
) -> tuple[Claimed, Pipeline]:
    """A batch is claimed first, so that nothing is stored for the files the claim turns away
    (duplicates, a full queue); then the originals and jobs of the new tasks. Returns the
    claim and the pipeline of the last jobs, not sent yet (WAIT may end it)."""
    claimed = Claimed.of(_claim(connection, call))
    if webhook_events.enabled(settings):  # before any job runs: the batch waits for them
        ids, statuses = claimed.entries[0::2], claimed.entries[1::2]
        webhook_events.batch_submitted(
            connection,
            settings,
            tenant,
            batch_id,
            [t.decode() for t in ids],
            live=states.LIVE,
            complete=all(s and not states.is_live(s.decode()) for s in statuses),
        )
    created = [
        (upload, claimed.entries[2 * i].decode())
        for i, upload in enumerate(uploads)
        if claimed.created(i)
    ]
    if not created:
        return claimed, connection.pipeline(transaction=False)
    return claimed, _store_and_enqueue(connection, queue, settings, tenant, batch_id, created)


def _confirm(
    acknowledged: int, settings: Settings, batch_id: str, tenant: str, trace_id: str
) -> None:
    """The 202 only once a replica has the upload; else NotReplicated (stored all the same).

    The refusal's log line is written at once: a request's held lines (logs.held) are written
    only after a 202 is sent."""
    try:
        replicas_.confirm(acknowledged, settings)
    except NotReplicated:
        logs.write(
            [
                (
                    "upload_not_replicated",
                    {
                        "batch_id": batch_id,
                        "tenant": tenant,
                        "trace_id": trace_id,
                        "wait_ms": settings.replica_wait_ms,
                    },
                    time.time(),
                )
            ]
        )
        raise


def _store_and_enqueue(
    connection: Redis,
    queue: Queue,
    settings: Settings,
    tenant: str,
    batch_id: str,
    created: list[tuple[Upload, str]],
) -> Pipeline:
    """Each new task's original into the store, then its job (RQ's own enqueue) queued on a
    pipeline sent every ENQUEUE_EVERY tasks, after the registration of the tenant's queues (so
    workers listen to them): a job never runs before its original is stored, and nothing
    waits long without its job. Returns that pipeline with its last part still to send.

    A store that fails halfway: the files stored keep their tasks and jobs, the claims of the
    others are taken back (jobs.tasks.unclaim), then StorageUnavailable (503): no task is left
    without its original, and a resend makes new tasks of the files not stored."""
    pipe = connection.pipeline(transaction=False)
    register_queues(pipe, tenant)
    for number, (upload, task_id) in enumerate(created, 1):
        try:
            if upload.original_of is None:  # a re-index's worker copies its original itself
                originals.put(settings, tenant, upload.document_id, task_id, upload.stream())
        except Exception as exc:  # any store error: what was enqueued stays, the rest goes back
            pipe.execute()
            unclaim(
                connection,
                tenant,
                batch_id,
                [(task_id, upload.document_id) for upload, task_id in created[number - 1 :]],
            )
            raise StorageUnavailable() from exc
        queue.enqueue_many([job_data(task_id, settings)], pipeline=pipe)
        if number % ENQUEUE_EVERY == 0 and number < len(created):
            pipe.execute()
    return pipe


def _summary(
    batch_id: str, created_at: str, uploads: Any, entries: list[bytes], tenant: str, trace_id: str
) -> dict[str, Any]:
    answer = []
    for upload, raw_id, raw_existing in zip(uploads, entries[0::2], entries[1::2]):
        task_id, existing = raw_id.decode(), raw_existing.decode()
        answer.append(
            {
                "id": task_id,
                "document_id": upload.document_id,
                "filename": upload.filename,
                "status": existing or states.PENDING,
                "duplicate": bool(existing),
            }
        )
        logs.event(
            "task_submitted" if not existing else "duplicate_submitted",
            {"id": task_id, "batch_id": batch_id, "tenant": tenant, "trace_id": trace_id},
            document_id=upload.document_id,
        )
    return {"batch_id": batch_id, "created_at": created_at, "tasks": answer}


def _claim(connection: Redis, call: _ClaimCall) -> list[Any]:
    """The claim's reply. EVALSHA: the script's text is sent only the first time a server
    lacks it. A reply lost with its connection is asked for again by redis-py's retry: the
    batch keeps what its first run decided, so the second answers the same."""
    return _SUBMIT(
        connection, keys=call.keys, args=call.args, more_keys=call.file_keys, rest=call.rest
    )


def job_data(task_id: str, settings: Settings, *, job_id: str | None = None) -> EnqueueData:
    """The RQ job of one run of a task: the first run's has the task's id, a Retry's its own
    (`job_id`); its retries are its own.

    Every TTL is explicit (RQ ignores Queue-level ones) and the retry delays are a per-job list
    of jittered exponential whole seconds (RQ has neither jitter nor a backoff factor).
    """
    delays = backoff_delays(settings.max_attempts, settings.retry_base_seconds)
    ttl = settings.retention_seconds
    return Queue.prepare_data(
        JOB_FUNCTION,
        args=(task_id,),
        job_id=job_id or task_id,
        timeout=settings.job_timeout,
        result_ttl=RESULT_TTL_SECONDS,
        failure_ttl=ttl,
        ttl=ttl,
        retry=Retry(max=len(delays), interval=delays) if delays else None,
    )


def _task_fields(
    task_id: str, upload: Upload, digest: str, settings: Settings, record: task_record.Fields
) -> dict[str, Any]:
    """The new task's record for the submit script (jobs.tasks.record.created)."""
    return task_record.created(
        task_id,
        record,
        document_id=upload.document_id,
        filename=upload.filename,
        kind=upload.kind,
        size=upload.size,
        max_attempts=settings.max_attempts,
        idempotency=digest,
        version=time.time_ns() // 1000,
        sha256=upload.sha256,
        original_of=upload.original_of,
    )
