"""Transitions of a task that happen outside a running attempt: the indexes that follow a task's
status, and what a person does to a task (cancel, retry).

Each transition that depends on the current status is one Lua script, so two people (or a person
and a worker) never both win: a task is canceled at most once, retried at most once per failure.
"""
from __future__ import annotations

import time
from redis import Redis
from redis.client import Pipeline
from rq import Queue
from rq.command import send_stop_job_command
from rq.exceptions import NoSuchJobError
from rq.job import Job

from jobs import keys, metrics
from jobs.settings import Settings
from jobs.tasks import now_iso

# KEYS: task, cancel flag, active set, tenant's active set. ARGV: tenant, now, ttl, task id.
_CANCEL = """
if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[1] then return {'missing', ''} end
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'pending' and status ~= 'retrying' and status ~= 'running' then
  return {'conflict', status}
end
redis.call('SET', KEYS[2], '1', 'EX', ARGV[3])
redis.call('HSET', KEYS[1], 'status', 'canceled', 'current_step', 'canceled',
           'step_detail', 'Canceled', 'ended_at', ARGV[2], 'updated_at', ARGV[2],
           'next_attempt_at', '', 'error', '')
redis.call('ZREM', KEYS[3], ARGV[4])
redis.call('ZREM', KEYS[4], ARGV[4])
return {'ok', status}
"""

# KEYS: task, cancel flag, active set, tenant failed index, all failed index, tenant active.
# ARGV: tenant, now, ttl, task id, max attempts, score.
_RETRY = """
if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[1] then return {'missing', ''} end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'failed' then
  local raw = redis.call('HGET', KEYS[1], 'error')
  if not raw or raw == '' or not cjson.decode(raw)['retryable'] then
    return {'not_retryable', status}
  end
elseif status ~= 'canceled' then
  return {'conflict', status}
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'status', 'pending', 'current_step', 'queued',
           'step_detail', 'Waiting for a worker', 'progress', 0, 'attempts', 0,
           'max_attempts', ARGV[5], 'error', '', 'next_attempt_at', '', 'started_at', '',
           'ended_at', '', 'result', '', 'updated_at', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'run', 1)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[4])
redis.call('ZADD', KEYS[6], ARGV[6], ARGV[4])
redis.call('ZREM', KEYS[4], ARGV[4])
redis.call('ZREM', KEYS[5], ARGV[4])
return {'ok', status}
"""


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


def cancel_task(connection: Redis, tenant: str, task_id: str,
                ttl_seconds: int) -> tuple[str, str]:
    """Cancel a pending, retrying or running task: ('ok' | 'missing' | 'conflict', old status).

    A waiting job is removed from its queue or the scheduler; a running one is told to stop (RQ's
    stop command kills its work-horse at once; the job's own checks of the cancel flag stop it on
    any worker class).
    """
    outcome, previous = (v.decode() for v in connection.eval(
        _CANCEL, 4, keys.task(task_id), keys.cancel_flag(task_id), keys.active(),
        keys.tenant_active(tenant), tenant, now_iso(), ttl_seconds, task_id))
    if outcome != "ok":
        return outcome, previous
    metrics.count(connection, "tasks_finished_total", status="canceled")
    if previous == "running":
        connection.sadd(keys.canceling(), task_id)
        try:
            send_stop_job_command(connection, task_id)
        except Exception:  # the job may have ended between our check and the command
            pass
    else:
        _delete_job(connection, task_id)
    return outcome, previous


def retry_task(connection: Redis, queues: dict[str, Queue], settings: Settings, tenant: str,
               task_id: str) -> tuple[str, str]:
    """Start a new run of a failed (retryable) or canceled task under the same id.

    Returns ('ok' | 'missing' | 'conflict' | 'not_retryable', old status). The old RQ job, if
    still there, is replaced by a fresh one with a fresh attempt budget.
    """
    from jobs.submit import job_data  # submit builds jobs the same way for new tasks

    outcome, previous = (v.decode() for v in connection.eval(
        _RETRY, 6, keys.task(task_id), keys.cancel_flag(task_id), keys.active(),
        keys.tenant_failed(tenant), keys.failed_all(), keys.tenant_active(tenant),
        tenant, now_iso(), settings.retention_seconds, task_id, settings.max_attempts,
        time.time()))
    if outcome != "ok":
        return outcome, previous
    queue_name = (connection.hget(keys.task(task_id), "queue") or b"intake").decode()
    queue = queues.get(queue_name) or queues["intake"]
    pipe = connection.pipeline()
    _delete_job(connection, task_id, pipe=pipe)
    pipe.srem(keys.canceling(), task_id)
    metrics.count(pipe, "manual_retries_total")
    queue.enqueue_many([job_data(task_id, settings)], pipeline=pipe)
    pipe.execute()
    return outcome, previous


def _delete_job(connection: Redis, task_id: str, pipe: Pipeline | None = None) -> None:
    """Remove the RQ job from its queue and every registry; Intake's record keeps the state."""
    try:
        job = Job.fetch(task_id, connection=connection)
    except NoSuchJobError:
        return
    job.delete(pipeline=pipe)


def delete_document(connection: Redis, tenant: str, document_id: str, ttl_seconds: int) -> bool:
    """Remove a document: its chunks, and every task of it (stopped first if still running).

    Its idempotency keys go too, so the same file uploaded again is ingested again. True when
    there was anything to remove.
    """
    from jobs import blobs, index, tasks  # the index and records are what is being removed

    task_ids = [t.decode() for t in connection.smembers(keys.document_tasks(tenant, document_id))]
    for task_id in task_ids:
        cancel_task(connection, tenant, task_id, ttl_seconds)  # a finished one answers conflict
    records = [r for r in tasks.load_many(connection, task_ids)
               if r is not None and r.get("tenant") == tenant]
    had_chunks = index.remove_document(connection, tenant, document_id)
    pipe = connection.pipeline()
    for record in records:
        task_id = record["id"]
        if record.get("status") != "succeeded":  # a success already gave its upload back
            blobs.delete(pipe, task_id, int(record.get("size") or 0))
        pipe.delete(keys.task(task_id), keys.checkpoint(task_id), keys.cancel_flag(task_id),
                    keys.idempotency(record.get("idempotency", "")))
        mark_finished(pipe, tenant, task_id)
        pipe.zrem(keys.failed_all(), task_id)
    pipe.delete(keys.document_tasks(tenant, document_id))
    pipe.execute()
    return had_chunks or bool(records)
