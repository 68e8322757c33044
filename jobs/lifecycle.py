"""Transitions of a task that happen outside a running attempt: the indexes that follow a task's
status, and what a person does to a task (cancel, retry, delete).

Each transition that depends on the current status is one Lua script, so two people (or a person
and a worker) never both win: a task is canceled at most once, retried at most once per failure.
Each script carries the id of the request that sent it, so when the client re-sends it (redis-py
does after a timeout or a reset) the second run answers what the first did and changes nothing.
A Retry starts a new run with an RQ job of its own (`run_job_id`): the job of the run it
replaces may still be stopping, and RQ's handling of that stop must never land on the new one.
"""
from __future__ import annotations

import secrets
import time

from redis import Redis
from redis.client import Pipeline
from rq import Queue
from rq.command import send_stop_job_command
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from jobs import keys, metrics
from jobs.settings import Settings
from jobs.submit import REPLAY_LUA, job_data, recorded_enqueue
from jobs.tasks import ACTIVE, now_iso

# KEYS: task, active set, tenant's active set, upload, checkpoint.
# ARGV: tenant, now, kept-upload ttl, task id, request id, then the statuses that can be canceled.
# Returns {outcome, previous status, the current run's job id}.
_CANCEL = """
if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[1] then return {'missing', '', ''} end
local r = redis.call('HMGET', KEYS[1], 'status', 'job_id', 'cancel_request', 'canceled_from')
local job = r[2]
if not job or job == '' then job = ARGV[4] end
if r[3] == ARGV[5] then return {'ok', r[4] or '', job} end
local cancelable = false
for i = 6, #ARGV do if ARGV[i] == r[1] then cancelable = true end end
if not cancelable then return {'conflict', r[1] or '', job} end
redis.call('HSET', KEYS[1], 'status', 'canceled', 'current_step', 'canceled',
           'step_detail', 'Canceled', 'ended_at', ARGV[2], 'updated_at', ARGV[2],
           'next_attempt_at', '', 'error', '', 'cancel_request', ARGV[5], 'canceled_from', r[1])
redis.call('ZREM', KEYS[2], ARGV[4])
redis.call('ZREM', KEYS[3], ARGV[4])
redis.call('EXPIRE', KEYS[4], ARGV[3])
redis.call('EXPIRE', KEYS[5], ARGV[3])
return {'ok', r[1], job}
"""

# KEYS: task, active set, tenant failed index, all failed index, tenant active, upload, checkpoint.
# ARGV: tenant, now, ttl, task id, max attempts, score, request id, new job id, the run it
#       replaces, then the new job's recorded enqueue (jobs.submit.recorded_enqueue).
# Returns {outcome, previous status, the replaced run's job id}.
_RETRY = REPLAY_LUA + """
if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[1] then return {'missing', '', ''} end
local r = redis.call('HMGET', KEYS[1], 'status', 'error', 'run', 'retry_request',
                     'retried_from', 'job_id')
local old_job = r[6]
if not old_job or old_job == '' then old_job = ARGV[4] end
if r[4] == ARGV[7] then return {'ok', r[5] or '', redis.call('HGET', KEYS[1], 'replaced_job')} end
local status = r[1]
if status == 'failed' then
  if not r[2] or r[2] == '' or not cjson.decode(r[2])['retryable'] then
    return {'not_retryable', status, old_job}
  end
elseif status ~= 'canceled' then
  return {'conflict', status or '', old_job}
end
if tonumber(r[3] or '0') ~= tonumber(ARGV[9]) then return {'conflict', status, old_job} end
if redis.call('EXISTS', KEYS[6]) == 0 and redis.call('HEXISTS', KEYS[7], 'chunks') == 0 then
  if status == 'failed' then
    local error = cjson.decode(r[2])
    error['retryable'] = false
    error['message'] = error['message'] .. ' Its upload is no longer kept: upload the file again.'
    redis.call('HSET', KEYS[1], 'error', cjson.encode(error))
  end
  return {'upload_expired', status, old_job}
end
redis.call('HSET', KEYS[1], 'status', 'pending', 'current_step', 'queued',
           'step_detail', 'Waiting for a worker', 'progress', 0, 'attempts', 0,
           'max_attempts', ARGV[5], 'error', '', 'next_attempt_at', '', 'started_at', '',
           'ended_at', '', 'result', '', 'updated_at', ARGV[2], 'attempt_id', '',
           'run', tonumber(ARGV[9]) + 1, 'job_id', ARGV[8], 'replaced_job', old_job,
           'retry_request', ARGV[7], 'retried_from', status)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[6], ARGV[3])
redis.call('EXPIRE', KEYS[7], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[4])
redis.call('ZADD', KEYS[5], ARGV[6], ARGV[4])
redis.call('ZREM', KEYS[3], ARGV[4])
redis.call('ZREM', KEYS[4], ARGV[4])
replay(10)
return {'ok', status, old_job}
"""


def run_job_id(task_id: str, run: int) -> str:
    """The RQ job of a task's run: the task's own id for the first, a name of its own after."""
    return task_id if run == 0 else f"{task_id}-run{run}"


def mark_dead_letter(pipe: Pipeline, tenant: str, task_id: str) -> None:
    """A task became `failed`: list it as a dead letter and stop watching it."""
    now = time.time()
    pipe.zadd(keys.tenant_failed(tenant), {task_id: now})
    pipe.zadd(keys.failed_all(), {task_id: now})
    mark_inactive(pipe, tenant, task_id)


def mark_inactive(pipe: Pipeline, tenant: str, task_id: str) -> None:
    """The task no longer waits nor runs: it leaves the sets the limits and reconciler use."""
    pipe.zrem(keys.active(), task_id)
    pipe.zrem(keys.tenant_active(tenant), task_id)


def mark_finished(pipe: Pipeline, tenant: str, task_id: str) -> None:
    """A task succeeded or was canceled: it is neither watched nor a dead letter."""
    mark_inactive(pipe, tenant, task_id)
    pipe.zrem(keys.tenant_failed(tenant), task_id)
    pipe.zrem(keys.failed_all(), task_id)


def keep_for_retry(pipe: Pipeline, task_id: str, seconds: int) -> None:
    """A task failed (retryably) or was canceled: keep its upload and checkpoint for a Retry,
    for INTAKE_UPLOAD_RETENTION_HOURS, far less than its record."""
    pipe.expire(keys.blob(task_id), seconds)
    pipe.expire(keys.checkpoint(task_id), seconds)


def cancel_task(connection: Redis, settings: Settings, tenant: str,
                task_id: str) -> tuple[str, str]:
    """Cancel a pending, retrying or running task: ('ok' | 'missing' | 'conflict', old status).

    A waiting job is removed from its queue or the scheduler; a running one is told to stop (RQ's
    stop command kills its work-horse at once; the attempt's own checks stop it on any worker
    class, since it no longer owns a running task).
    """
    outcome, previous, job_id = (v.decode() for v in connection.eval(
        _CANCEL, 5, keys.task(task_id), keys.active(), keys.tenant_active(tenant),
        keys.blob(task_id), keys.checkpoint(task_id), tenant, now_iso(),
        settings.upload_retention_seconds, task_id, secrets.token_hex(8), *sorted(ACTIVE)))
    if outcome != "ok":
        return outcome, previous
    metrics.count(connection, "tasks_finished_total", status="canceled")
    if previous == "running":
        connection.sadd(keys.canceling(), job_id)
        send_stop_job_command(connection, job_id)
    else:
        delete_job(connection, job_id)
    return outcome, previous


def retry_task(connection: Redis, queues: dict[str, Queue], settings: Settings, tenant: str,
               task_id: str) -> tuple[str, str]:
    """Start a new run of a failed (retryable) or canceled task under the same id.

    Returns ('ok' | 'missing' | 'conflict' | 'not_retryable' | 'upload_expired', old status).
    The new run gets a fresh attempt budget and a job of its own, enqueued by the same script
    that changes the status; the replaced run's job is deleted unless it is still stopping.
    """
    run_raw, queue_raw = connection.hmget(keys.task(task_id), "run", "queue")
    run = int(run_raw or 0)
    job_id = run_job_id(task_id, run + 1)
    queue = queues.get((queue_raw or b"intake").decode()) or queues["intake"]
    enqueue = recorded_enqueue(connection, queue, job_data(task_id, settings, job_id=job_id),
                               lambda pipe: metrics.count(pipe, "manual_retries_total"))
    outcome, previous, old_job = (v.decode() if v is not None else "" for v in connection.eval(
        _RETRY, 7, keys.task(task_id), keys.active(), keys.tenant_failed(tenant),
        keys.failed_all(), keys.tenant_active(tenant), keys.blob(task_id),
        keys.checkpoint(task_id), tenant, now_iso(), settings.retention_seconds, task_id,
        settings.max_attempts, time.time(), secrets.token_hex(8), job_id, run, *enqueue))
    if outcome == "ok" and old_job:
        delete_job(connection, old_job, unless_started=True)
    return outcome, previous


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


def delete_document(connection: Redis, settings: Settings, tenant: str, document_id: str) -> bool:
    """Remove a document: its chunks, and every task of it (stopped first if still running).

    Its idempotency keys go too, so the same file uploaded again is ingested again. A running
    attempt finds its task canceled, then gone, so it can never put the document back. True
    when there was anything to remove.
    """
    from jobs import blobs, index, tasks  # the index and records are what is being removed

    task_ids = [t.decode() for t in connection.smembers(keys.document_tasks(tenant, document_id))]
    for task_id in task_ids:
        cancel_task(connection, settings, tenant, task_id)  # a finished one answers conflict
    records = [r for r in tasks.load_many(connection, task_ids)
               if r is not None and r.get("tenant") == tenant]
    had_chunks = index.remove_document(connection, tenant, document_id)
    pipe = connection.pipeline()
    for record in records:
        task_id = record["id"]
        blobs.release(pipe, tenant, task_id)
        pipe.delete(keys.task(task_id), keys.checkpoint(task_id),
                    keys.idempotency(record.get("idempotency", "")))
        mark_finished(pipe, tenant, task_id)
    pipe.delete(keys.document_tasks(tenant, document_id), keys.document_latest(tenant, document_id))
    pipe.execute()
    return had_chunks or bool(records)
