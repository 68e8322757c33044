"""What a person does to a task: cancel it, retry it, delete its document.

Each status change is one Lua script that checks the status it starts from (the statuses come
from jobs.tasks.states as arguments), so two people (or a person and a worker) never both win: a
task is canceled at most once, retried at most once per failure. Each script carries the id
of the request that sent it, so when the client re-sends it (redis-py does after a timeout or
a reset) the second run answers what the first did and changes nothing. What follows a change
(states.changed, the RQ job) is sent right after it. A Retry starts a new run with an RQ job of
its own (`run_job_id`): the job of the run it replaces may still be stopping, and RQ's handling
of that stop must never land on the new one.
"""
from __future__ import annotations

import secrets
from typing import Any

from redis import Redis, WatchError
from rq.command import send_stop_job_command
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from jobs.tasks import blobs, states

from jobs.core import keys, metrics
from jobs.core.clock import now_iso
from jobs.core.exceptions import NoSuchDocument, NoSuchTask, NotNow, NotRetryable, UploadExpired
from jobs.core.queues import Queues, queue_name
from jobs.core.queues import parse as parse_queue
from jobs.core.queues import register as register_queues
from jobs.core.settings import Settings
from jobs.tasks.submit import job_data

# KEYS: task. ARGV: tenant, now, task id, request id, the status it moves to and its step,
# then the statuses that may be canceled. Returns {outcome, previous status, the run's job id}.
_CANCEL = """
if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[1] then return {'missing', '', ''} end
local r = redis.call('HMGET', KEYS[1], 'status', 'job_id', 'cancel_request', 'canceled_from')
local job = r[2]
if not job or job == '' then job = ARGV[3] end
if r[3] == ARGV[4] then return {'ok', r[4] or '', job} end
local cancelable = false
for i = 7, #ARGV do if ARGV[i] == r[1] then cancelable = true end end
if not cancelable then return {'conflict', r[1] or '', job} end
redis.call('HSET', KEYS[1], 'status', ARGV[5], 'current_step', ARGV[6],
           'step_detail', 'Canceled', 'ended_at', ARGV[2], 'updated_at', ARGV[2],
           'next_attempt_at', '', 'error', '', 'cancel_request', ARGV[4], 'canceled_from', r[1])
return {'ok', r[1], job}
"""

# KEYS: task, upload, checkpoint. ARGV: tenant, now, ttl, task id, max attempts, request id,
# the new run's job id, the run it replaces, the status it moves to and its step, the status
# whose error must say a Retry can help, then the statuses that may be retried.
# Returns {outcome, previous status, the replaced run's job id}.
_RETRY = """
if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[1] then return {'missing', '', ''} end
local r = redis.call('HMGET', KEYS[1], 'status', 'error', 'run', 'retry_request',
                     'retried_from', 'job_id')
local old_job = r[6]
if not old_job or old_job == '' then old_job = ARGV[4] end
if r[4] == ARGV[6] then return {'ok', r[5] or '', redis.call('HGET', KEYS[1], 'replaced_job')} end
local status, retryable = r[1], false
for i = 12, #ARGV do if ARGV[i] == status then retryable = true end end
if not retryable then return {'conflict', status or '', old_job} end
if status == ARGV[11] and (not r[2] or r[2] == '' or not cjson.decode(r[2])['retryable']) then
  return {'not_retryable', status, old_job}
end
if tonumber(r[3] or '0') ~= tonumber(ARGV[8]) then return {'conflict', status, old_job} end
if redis.call('EXISTS', KEYS[2]) == 0 and redis.call('HEXISTS', KEYS[3], 'chunks') == 0 then
  if status == ARGV[11] then
    local error = cjson.decode(r[2])
    error['retryable'] = false
    error['message'] = error['message'] .. ' Its upload is no longer kept: upload the file again.'
    redis.call('HSET', KEYS[1], 'error', cjson.encode(error))
  end
  return {'upload_expired', status, old_job}
end
redis.call('HSET', KEYS[1], 'status', ARGV[9], 'current_step', ARGV[10],
           'step_detail', 'Waiting for a worker', 'progress', 0, 'attempts', 0,
           'max_attempts', ARGV[5], 'error', '', 'next_attempt_at', '', 'started_at', '',
           'ended_at', '', 'result', '', 'updated_at', ARGV[2], 'attempt_id', '',
           'run', tonumber(ARGV[8]) + 1, 'job_id', ARGV[7], 'replaced_job', old_job,
           'retry_request', ARGV[6], 'retried_from', status)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[3])
return {'ok', status, old_job}
"""


def run_job_id(task_id: str, run: int) -> str:
    """The RQ job of a task's run: the task's own id for the first, a name of its own after."""
    return task_id if run == 0 else f"{task_id}-run{run}"


def cancel_task(connection: Redis, settings: Settings, tenant: str, task_id: str) -> str:
    """Cancel a pending, retrying or running task; returns the status it had.

    A waiting job is removed from its queue or the scheduler; a running one is told to stop (RQ's
    stop command kills its work-horse at once; the attempt's own checks stop it on any worker
    class, since it no longer owns a running task). Raises NoSuchTask or NotNow.
    """
    outcome, previous, job_id = _decoded(connection.eval(*_cancel_call(tenant, task_id)))
    if outcome == "missing":
        raise NoSuchTask()
    if outcome != "ok":
        raise NotNow(previous, "cancel")
    _stop_canceled(connection, settings, tenant, task_id, previous, job_id)
    return previous


def _cancel_call(tenant: str, task_id: str) -> list[Any]:
    """_CANCEL with its keys and arguments, for an EVAL sent alone or queued in a MULTI."""
    move = states.CANCEL
    return [_CANCEL, 1, keys.task(task_id), tenant, now_iso(), task_id, secrets.token_hex(8),
            move.target, states.STEP_OF[move.target], *move.sources]


def _stop_canceled(connection: Redis, settings: Settings, tenant: str, task_id: str,
                   previous: str, job_id: str) -> None:
    """What follows a cancel's script: the task leaves the live sets, its job its queue (or,
    running, it is told to stop)."""
    move = states.CANCEL
    pipe = connection.pipeline()
    states.changed(pipe, tenant, task_id, move.target, settings=settings)
    blobs.keep_for_retry(pipe, task_id, settings.upload_retention_seconds)
    if previous == states.RUNNING:
        pipe.sadd(keys.canceling(), job_id)
    pipe.execute()
    if previous == states.RUNNING:
        send_stop_job_command(connection, job_id)
    else:
        delete_job(connection, job_id)


def retry_task(connection: Redis, queues: Queues, settings: Settings, tenant: str,
               task_id: str) -> str:
    """Start a new run of a failed (retryable) or canceled task under the same id; returns
    the status it had.

    The new run gets a fresh attempt budget and a job of its own (RQ's enqueue, right after
    the script); the replaced run's job is deleted unless it is still stopping. Raises
    NoSuchTask, NotNow, NotRetryable or UploadExpired.
    """
    move = states.RETRY
    run_raw, queue_raw = connection.hmget(keys.task(task_id), "run", "queue")
    run = int(run_raw or 0)
    job_id = run_job_id(task_id, run + 1)
    outcome, previous, old_job = _decoded(connection.eval(
        _RETRY, 3, keys.task(task_id), keys.blob(task_id), keys.checkpoint(task_id), tenant,
        now_iso(), settings.retention_seconds, task_id, settings.max_attempts,
        secrets.token_hex(8), job_id, run, move.target, states.STEP_OF[move.target],
        states.FAILED, *move.sources))
    if outcome == "missing":
        raise NoSuchTask()
    refusal = {"not_retryable": NotRetryable, "upload_expired": UploadExpired}.get(outcome)
    if refusal is not None:
        raise refusal(previous)
    if outcome != "ok":
        raise NotNow(previous, "retry")
    queue = queues.get(_retry_queue(queue_raw, tenant))
    pipe = connection.pipeline()
    register_queues(pipe, tenant)
    states.changed(pipe, tenant, task_id, move.target, settings=settings)
    metrics.count(pipe, "manual_retries_total")
    queue.enqueue_many([job_data(task_id, settings, job_id=job_id)], pipeline=pipe)
    pipe.execute()
    if old_job:
        delete_job(connection, old_job, unless_started=True)
    return previous


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


def delete_document(connection: Redis, settings: Settings, tenant: str, document_id: str, *,
                    version: str | None = None) -> bool:
    """Remove a document: its chunks, and every task of it (stopped first if still running);
    True when it was removed.

    With `version` (a task id), only while that task is the document's current version
    (`current_version`): False, removing nothing, when another one is. So a caller that
    brought one version (`ingest --sync`) never removes what someone else uploaded since,
    even an upload still on its way.

    Its idempotency keys go too, so the same file uploaded again is ingested again. A running
    attempt finds its task canceled, then gone, so it can never put the document back. Raises
    NoSuchDocument when there was nothing to remove.
    """
    from jobs.kb import index  # the index and records are what is removed
    from jobs.kb.vector_engine import vector_store
    from jobs.tasks import records as tasks

    detached = _detach(connection, tenant, document_id, version)
    if detached is None:
        return False
    task_ids, cancels, had_chunks = detached
    for task_id, (outcome, previous, job_id) in zip(task_ids, cancels):
        if outcome == "ok":
            _stop_canceled(connection, settings, tenant, task_id, previous, job_id)
    records = [r for r in tasks.load_many(connection, task_ids)
               if r is not None and r.get("tenant") == tenant]
    pipe = connection.pipeline()
    for record in records:
        task_id = record["id"]
        blobs.release(pipe, tenant, task_id)
        pipe.delete(keys.task(task_id), keys.checkpoint(task_id),
                    keys.idempotency(record.get("idempotency", "")))
        states.forget(pipe, tenant, task_id)
    pipe.execute()
    if had_chunks:
        store = vector_store(settings)
        try:
            index.collect_garbage(connection, tenant, store)
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


def _detach(connection: Redis, tenant: str, document_id: str, version: str | None,
            ) -> tuple[list[str], list[list[str]], bool] | None:
    """In one MULTI: cancel the document's live tasks, take it out of the index and forget
    its task list and latest task. Returns the tasks, their cancels' replies and whether it had
    chunks; None when `version` is given and is not the current one.

    What the check reads is WATCHed: an upload (a new latest task) or a flip landing between
    the check and the EXEC makes it run again, so it is never removed unseen. Canceling in the
    same MULTI means a running attempt's own commit (which WATCHes its task) cannot flip its
    version back in after the removal.
    """
    from jobs.kb import index

    latest_key, indexed_key = keys.document_latest(tenant, document_id), keys.kb_document(
        tenant, document_id)
    tasks_key = keys.document_tasks(tenant, document_id)
    while True:
        with connection.pipeline() as pipe:
            try:
                pipe.watch(latest_key, indexed_key, tasks_key)
                current = current_version(pipe.get(latest_key), pipe.hget(indexed_key, "task_id"))
                if version is not None and current is not None and current != version:
                    return None
                task_ids = sorted(t.decode() for t in pipe.smembers(tasks_key))
                pipe.multi()
                for task_id in task_ids:
                    pipe.eval(*_cancel_call(tenant, task_id))
                index.queue_removal(pipe, tenant, document_id)
                pipe.delete(latest_key, tasks_key)
                replies = pipe.execute()
            except WatchError:
                continue
        return task_ids, [_decoded(r) for r in replies[:len(task_ids)]], bool(
            replies[len(task_ids)])


def _decoded(reply: list[Any]) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else (v or "") for v in reply]
