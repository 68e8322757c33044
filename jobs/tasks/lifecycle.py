"""What a person does to a task: cancel it, retry it, delete its document.

Each status change is one Lua script that checks the status it starts from, so two people (or a
person and a worker) never both win: a task is canceled at most once, retried at most once per
failure. A cancel's script gets the statuses it may act on from jobs.tasks.states; a Retry is
judged in Python by the one retry rule (states.can_retry) and its script applies it only while
the task still holds what was judged. The fields each script writes come from
jobs.tasks.record. Each script carries the id of the request that sent it, so when the client
re-sends it (redis-py does after a timeout or a reset) the second run answers what the first
did and changes nothing. What follows a change
(transitions.changed, the RQ job) is sent right after it. A Retry starts a new run with an RQ job of
its own (`run_job_id`): the job of the run it replaces may still be stopping, and RQ's handling
of that stop must never land on the new one.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis import Redis, WatchError
from redis.client import Pipeline
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus

from jobs.core import keys, metrics, scripts
from jobs.core.clock import now_iso
from jobs.core.exceptions import NoSuchDocument, NoSuchTask, NotNow, NotRetryable, UploadExpired
from jobs.core.queues import Queues, queue_name
from jobs.core.queues import parse as parse_queue
from jobs.core.queues import register as register_queues
from jobs.core.settings import Settings
from jobs.tasks import originals, states, stored_bytes, transitions
from jobs.tasks import record as task_record
from jobs.tasks.submit import job_data

if TYPE_CHECKING:
    from jobs.kb.knowledge_base import KnowledgeBase

_CANCEL = scripts.load(__file__, "lifecycle_cancel", task_record.SCRIPT_NAMES)
_RETRY = scripts.load(__file__, "lifecycle_retry", task_record.SCRIPT_NAMES)


# A Retry that finds its task changed since it was judged judges it again, this many times.
RETRY_TRIES = 5


def run_job_id(task_id: str, run: int) -> str:
    """The RQ job of a task's run: the task's own id for the first, a name of its own after."""
    return task_id if run == 0 else f"{task_id}-run{run}"


def cancel_task(connection: Redis, settings: Settings, tenant: str, task_id: str) -> str:
    """Cancel a pending, retrying or running task; returns the status it had.

    A waiting job is removed from its queue or the scheduler; a running one is told to stop (RQ's
    stop command kills its work-horse at once; the attempt's own checks stop it on any worker
    class, since it no longer owns a running task). Raises NoSuchTask or NotNow.
    """
    outcome, previous, job_id = _decoded(_cancel(connection, tenant, task_id))
    if outcome == "missing":
        raise NoSuchTask()
    if outcome != "ok":
        raise NotNow(previous, "cancel")
    _stop_canceled(connection, settings, tenant, task_id, previous, job_id)
    return previous


def _cancel(target: Redis | Pipeline, tenant: str, task_id: str) -> Any:
    """_CANCEL sent alone (a client) or queued in a MULTI (a pipeline, which checks the
    script exists before it is sent: a MULTI is not sent twice)."""
    move, request_id = states.CANCEL, secrets.token_hex(8)
    return _CANCEL(
        target,
        keys={"task": keys.task(task_id)},
        args={
            "tenant": tenant,
            "first_job": task_id,
            "request_id": request_id,
            "sources": len(move.sources),
        },
        rest=[*move.sources, *task_record.as_argv(task_record.canceled(request_id, now_iso()))],
    )


def _stop_canceled(
    connection: Redis, settings: Settings, tenant: str, task_id: str, previous: str, job_id: str
) -> None:
    """What follows a cancel's script: the task leaves the live sets, its job its queue (or,
    running, it is told to stop)."""
    move = states.CANCEL
    pipe = connection.pipeline()
    transitions.changed(pipe, tenant, task_id, move.target, settings=settings)
    if previous == states.RUNNING:
        pipe.sadd(keys.canceling(), job_id)
    pipe.execute()
    if previous == states.RUNNING:
        send_stop_job_command(connection, job_id)
        _stop_range_readers(connection, job_id, task_id)
    else:
        delete_job(connection, job_id)


def _stop_range_readers(connection: Redis, job_id: str, task_id: str) -> None:
    """Stop the range jobs reading a scan's pages for the task (jobs.worker.page_ranges): they
    are stopped like its own job; those still queued end at once when they start.

    A reader lost with its worker stays listed (its range claimed again by another) while RQ
    forgets its job once failure_ttl has passed: there is nothing left to stop, and the others
    must still be stopped."""
    readers = [r.decode() for r in connection.hkeys(keys.page_range_readers(task_id))]
    readers = [reader for reader in readers if reader != job_id]
    if not readers:
        return
    connection.sadd(keys.canceling(), *readers)
    for reader in readers:
        with contextlib.suppress(NoSuchJobError, InvalidJobOperation):
            send_stop_job_command(connection, reader)


def retry_task(
    connection: Redis, queues: Queues, settings: Settings, tenant: str, task_id: str
) -> str:
    """Start a new run of a failed (retryable) or canceled task under the same id; returns
    the status it had.

    The new run gets a fresh attempt budget and a job of its own (RQ's enqueue, right after
    the script); the replaced run's job is deleted unless it is still stopping. Raises
    NoSuchTask, NotNow, NotRetryable or UploadExpired.
    """
    move = states.RETRY
    for _ in range(RETRY_TRIES):
        judged = _judge_retry(connection, settings, tenant, task_id)
        outcome = _decoded(
            [
                _RETRY(
                    connection,
                    keys={"task": keys.task(task_id), "checkpoint": keys.checkpoint(task_id)},
                    args=judged.args,
                    rest=judged.rest,
                )
            ]
        )[0]
        if outcome != "changed":
            break
    else:
        raise NotNow(judged.status, "retry")
    if outcome == "missing":
        raise NoSuchTask()
    if outcome == "upload_expired":
        raise UploadExpired(judged.status)
    queue = queues.get(_retry_queue(judged.queue, tenant))
    pipe = connection.pipeline()
    register_queues(pipe, tenant)
    transitions.changed(pipe, tenant, task_id, move.target, settings=settings)
    metrics.count(pipe, "manual_retries_total")
    queue.enqueue_many([job_data(task_id, settings, job_id=judged.job_id)], pipeline=pipe)
    pipe.execute()
    delete_job(connection, judged.replaced_job, unless_started=True)
    return judged.status


@dataclass(frozen=True)
class _JudgedRetry:
    """A task judged retryable as it was read, and the _RETRY arguments that apply the Retry
    only while it still is so."""

    status: str
    queue: bytes | None
    job_id: str
    replaced_job: str
    args: dict[str, Any]
    rest: list[Any]


# What a Retry is judged on (besides the tenant), read in one HMGET.
_JUDGED_ON = (
    task_record.STATUS,
    task_record.ERROR,
    task_record.RUN,
    task_record.JOB_ID,
    task_record.QUEUE,
)


def _judge_retry(connection: Redis, settings: Settings, tenant: str, task_id: str) -> _JudgedRetry:
    """Read the task and judge it by the one retry rule (states.can_retry); raises NoSuchTask,
    NotNow or NotRetryable when the Retry is refused as the task is."""
    raw = connection.hmget(
        keys.task(task_id),
        task_record.TENANT,
        *_JUDGED_ON,
        task_record.DOCUMENT_ID,
        task_record.ORIGINAL_OF,
    )
    if raw[0] is None or raw[0].decode() != tenant:
        raise NoSuchTask()
    status, error_raw, run_raw, job_raw = (v.decode() if v is not None else "" for v in raw[1:5])
    error = json.loads(error_raw) if error_raw else None
    if not states.RETRY.allows(status):
        raise NotNow(status, "retry")
    if not states.can_retry(status, error):
        raise NotRetryable(status)
    run = int(run_raw or 0)
    fields = task_record.retried(
        previous=status,
        run=run + 1,
        job_id=run_job_id(task_id, run + 1),
        replaced_job=job_raw or task_id,
        max_attempts=settings.max_attempts,
        request_id=secrets.token_hex(8),
        now=now_iso(),
    )
    expected = {task_record.STATUS: status, task_record.ERROR: error_raw, task_record.RUN: run_raw}
    gone = task_record.upload_gone(error if status == states.FAILED else None)
    document_id, original_of = ((value or b"").decode() for value in raw[-2:])
    stored = originals.stored(connection, settings, tenant, document_id, task_id, original_of)
    args = {
        "tenant": tenant,
        "ttl": settings.retention_seconds,
        "request_id": fields[task_record.RETRY_REQUEST],
        "stored": "1" if stored else "0",
        "compared": len(expected),
        "gone": len(gone),
    }
    rest = [
        *task_record.as_argv(expected),
        *task_record.as_argv(gone),
        *task_record.as_argv(fields),
    ]
    return _JudgedRetry(
        status, raw[5], str(fields[task_record.JOB_ID]), job_raw or task_id, args, rest
    )


def _retry_queue(recorded: bytes | None, tenant: str) -> str:
    """The queue the task was submitted to (one of Intake's); else the tenant's normal one."""
    name = (recorded or b"").decode()
    return name if parse_queue(name) else queue_name(tenant, "normal")


def delete_job(connection: Redis, job_id: str, *, unless_started: bool = False) -> None:
    """Remove an RQ job from its queue and every registry; Intake's record keeps the state.

    A job still being stopped (`started`) is left to finish: the reconciler takes it out of
    the failed registry once RQ has recorded the stop.
    """
    try:
        job = Job.fetch(job_id, connection=connection)
    except NoSuchJobError:
        return
    if unless_started and job.get_status(refresh=False) == JobStatus.STARTED:
        return
    job.delete()


def delete_document(
    connection: Redis,
    settings: Settings,
    tenant: str,
    document_id: str,
    *,
    version: str | None = None,
    kb: KnowledgeBase | None = None,
) -> bool:
    """Remove a document: its chunks, and every task of it (stopped first if still running);
    True when it was removed.

    With `version` (a task id), only while that task is the document's current version
    (`current_version`): False, removing nothing, when another one is. So a caller that
    brought one version (`ingest --sync`) never removes what someone else uploaded since,
    even an upload still on its way.

    Its idempotency keys go too, so the same file uploaded again is ingested again. A running
    attempt finds its task canceled, then gone, so it can never put the document back. Raises
    NoSuchDocument when there was nothing to remove. `kb`: the process's knowledge base
    (KnowledgeBase.of `settings` and `connection` when None).
    """
    from jobs.kb import index  # the index and records are what is removed
    from jobs.kb.knowledge_base import KnowledgeBase
    from jobs.tasks import records as tasks

    kb = KnowledgeBase.of(settings, connection) if kb is None else kb
    detached = _detach(connection, tenant, document_id, version, kb)
    if detached is None:
        return False
    task_ids, cancels, had_chunks = detached
    for task_id, (outcome, previous, job_id) in zip(task_ids, cancels):
        if outcome == "ok":
            _stop_canceled(connection, settings, tenant, task_id, previous, job_id)
    records = [
        r for r in tasks.load_many(connection, task_ids) if r is not None and r.tenant == tenant
    ]
    pipe = connection.pipeline()
    for record in records:
        task_id = record.id
        pipe.delete(keys.task(task_id), keys.idempotency(record.idempotency))
        transitions.drop_checkpoint(pipe, task_id)
        transitions.forget(pipe, tenant, task_id)
    stored_bytes.forget(pipe, tenant, task_ids)
    pipe.execute()
    originals.delete(settings, tenant, document_id, task_ids)
    if had_chunks:
        store = kb.open_vectors()
        try:
            index.collect_garbage(kb.redis, tenant, store)
        finally:
            if store is not None:
                store.close()
    if not (had_chunks or records):
        raise NoSuchDocument()
    return True


def current_version(latest: bytes | None, indexed: bytes | None) -> str | None:
    """The task a document is, or is about to become: the latest content submitted for it,
    else (that record expired with its tasks) the indexed one; None when there is neither.

    The latest rather than the indexed: pending or running, it is what a search will soon
    show; failed or canceled, removing the document would take that upload's task (its dead
    letter, its Retry) with it, so it is someone's version all the same."""
    found = latest if latest is not None else indexed
    return found.decode() if found is not None else None


def _detach(
    connection: Redis, tenant: str, document_id: str, version: str | None, kb: KnowledgeBase
) -> tuple[list[str], list[list[str]], bool] | None:
    """In one MULTI: cancel the document's live tasks, take it out of the index and forget
    its task list, its latest task and its place in the tenant's documents. Returns the tasks,
    their cancels' replies and whether it had chunks; None when `version` is given and is not
    the current one.

    What the check reads is WATCHed: an upload (a new latest task) or a flip landing between
    the check and the EXEC makes it run again, so it is never removed unseen. Canceling in the
    same MULTI means a running attempt's own commit (which WATCHes its task) cannot flip its
    version back in after the removal.

    The knowledge base decides its own part (KnowledgeBase): what of it is WATCHed and read
    here, and how the document leaves it: in this MULTI, or, with the knowledge base on a
    Redis of its own, right after it, leaving a tombstone that refuses any flip staged before
    it, so that a flip already on its way cannot bring the document back.
    """
    latest_key = keys.document_latest(tenant, document_id)
    tasks_key = keys.document_tasks(tenant, document_id)
    while True:
        with connection.pipeline() as pipe:
            try:
                pipe.watch(
                    latest_key, tasks_key, *kb.keys_on_queue(keys.kb_document(tenant, document_id))
                )
                indexed = kb.indexed_task(pipe, tenant, document_id)
                current = current_version(pipe.get(latest_key), indexed)
                if version is not None and current is not None and current != version:
                    return None
                task_ids = sorted(t.decode() for t in pipe.smembers(tasks_key))
                pipe.multi()
                for task_id in task_ids:
                    _cancel(pipe, tenant, task_id)
                had_chunks = kb.queue_removal(pipe, tenant, document_id, task_ids)
                pipe.delete(latest_key, tasks_key)
                pipe.zrem(keys.tenant_documents(tenant), document_id)
                replies = pipe.execute()
            except WatchError:
                continue
        cancels = [_decoded(r) for r in replies[: len(task_ids)]]
        return task_ids, cancels, had_chunks(replies)


def _decoded(reply: list[Any]) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else (v or "") for v in reply]
