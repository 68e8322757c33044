"""The reconciler: makes every task's record agree with its RQ job, so nothing stays stuck.

RQ notices a job whose worker died with it only when the job's heartbeat expires and a worker's
maintenance cleans the started registry (then RQ retries or fails it), and it never tells
Intake. Dashboard actions and deleted keys change jobs behind Intake's back. So, every few
seconds, one worker (whichever takes the lock) compares each active task with its job:

| task                      | job                    | becomes                                |
|---------------------------|------------------------|----------------------------------------|
| running                   | scheduled or queued    | retrying ("worker lost"): RQ retried it|
| pending/running/retrying  | failed or stopped      | failed ("worker lost"), a dead letter  |
| pending/running/retrying  | gone                   | failed ("job lost"), retryable         |
| pending/retrying          | canceled (dashboard)   | canceled                               |

A task is only judged once its record has been still for GRACE_SECONDS, and every change is a
compare-and-set on status and attempts, so a task that moves on meanwhile is left alone. Jobs
stopped by a cancel are taken out of the failed registry: a cancel is not a dead letter.
"""
from __future__ import annotations

import contextlib
import json
import logging
import time
from datetime import datetime
from typing import Any

from redis import Redis
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

from jobs import blobs, index, keys, lifecycle, metrics
from jobs.failures import IntakeError, job_lost, worker_lost
from jobs.settings import Settings
from jobs.tasks import iso_in, now_iso

log = logging.getLogger(__name__)

GRACE_SECONDS = 10
INTERVAL_SECONDS = 4
HOUSEKEEPING_SECONDS = 60

# KEYS: task. ARGV: expected status, attempts, attempt id and job id, then field/value pairs:
# a task that moved on since it was read (another attempt, another run) is left alone.
_COMPARE_AND_SET = """
local current = redis.call('HMGET', KEYS[1], 'status', 'attempts', 'attempt_id', 'job_id')
if current[1] ~= ARGV[1] or (current[2] or '0') ~= ARGV[2] or (current[3] or '') ~= ARGV[3]
   or (current[4] or '') ~= ARGV[4] then
  return 0
end
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""
_FIELDS = ("status", "attempts", "updated_at", "tenant", "queue", "created_at", "attempt_id",
           "job_id")


def run_if_due(connection: Redis) -> bool:
    """Reconcile unless another worker did in the last INTERVAL_SECONDS; True if it ran.

    Less often (HOUSEKEEPING_SECONDS), also recount the upload bytes waiting (expired uploads
    give theirs back) and keep the uploads of waiting tasks from expiring before their tasks.
    """
    if not connection.set(keys.reconcile_lock(), 1, nx=True, ex=INTERVAL_SECONDS):
        return False
    reconcile(connection)
    if connection.set(keys.housekeeping_lock(), 1, nx=True, ex=HOUSEKEEPING_SECONDS):
        housekeeping(connection, Settings.from_env().retention_seconds)
    return True


def job_of(task_id: str, task: dict[str, Any]) -> str:
    """The RQ job of the task's current run (the first run's job has the task's id)."""
    return task.get("job_id") or task_id


def housekeeping(connection: Redis, ttl_seconds: int) -> None:
    """Keep waiting uploads alive, recount upload bytes, and trim the lists of batches and dead
    letters of entries older than the retention (their records have expired by then)."""
    pipe = connection.pipeline(transaction=False)
    for task_id in connection.zrange(keys.active(), 0, -1):
        pipe.expire(keys.blob(task_id.decode()), ttl_seconds)
    horizon = time.time() - ttl_seconds
    pipe.zremrangebyscore(keys.failed_all(), "-inf", horizon)
    for pattern in (keys.tenant_batches("*"), keys.tenant_failed("*")):
        for key in connection.scan_iter(match=pattern, count=500):
            pipe.zremrangebyscore(key, "-inf", horizon)
    pipe.execute()
    blobs.recount(connection)
    index.ensure_chunk_counts(connection)


def reconcile(connection: Redis, *, grace_seconds: float = GRACE_SECONDS) -> dict[str, int]:
    """One pass over the active tasks and the canceling set; returns what it changed."""
    changed = {"retrying": 0, "failed": 0, "canceled": 0, "forgotten": 0, "uncanceled": 0}
    task_ids = [t.decode() for t in connection.zrange(keys.active(), 0, -1)]
    pipe = connection.pipeline(transaction=False)
    for task_id in task_ids:
        pipe.hmget(keys.task(task_id), *_FIELDS)
    records = [dict(zip(_FIELDS, (v.decode() if v is not None else None for v in fields)))
               for fields in pipe.execute()]
    pipe = connection.pipeline(transaction=False)
    for task_id, task in zip(task_ids, records):
        pipe.hget(Job.key_for(job_of(task_id, task)), "status")
    cutoff = time.time() - grace_seconds
    for task_id, task, job_status in zip(task_ids, records, pipe.execute()):
        outcome = _judge(connection, task_id, task, job_status and job_status.decode(), cutoff)
        if outcome:
            changed[outcome] += 1
    changed["uncanceled"] = _clear_canceled_jobs(connection)
    if any(changed.values()):
        log.info("reconciled tasks: %s", changed)
    return changed


def horse_lost(connection: Redis, job: Any) -> str | None:
    """The work-horse of `job` died under its worker (OOM, kill -9): say so at once.

    Called by IntakeWorker before RQ retries or fails the job, so RQ's own decision is known:
    retries left → `retrying` at the time RQ will use; none → `failed` ("worker lost").
    """
    task_id = job.args[0] if job.args else job.id
    raw = connection.hmget(keys.task(task_id), *_FIELDS)
    task = dict(zip(_FIELDS, (v.decode() if v is not None else None for v in raw)))
    if task["status"] != "running" or job_of(task_id, task) != job.id:
        return None  # not this job's run any more: a Retry replaced it
    if job.retries_left:
        return _retrying(connection, task_id, task, "scheduled", delay=job.get_retry_interval())
    return _fail(connection, task_id, task, worker_lost())


def _judge(connection: Redis, task_id: str, task: dict[str, Any], job_status: str | None,
           cutoff: float) -> str | None:
    status = task["status"]
    if status not in ("pending", "running", "retrying"):
        pipe = connection.pipeline()
        lifecycle.mark_inactive(pipe, task["tenant"] or "default", task_id)
        pipe.execute()
        return "forgotten"
    if _timestamp(task["updated_at"] or task["created_at"]) > cutoff:
        return None
    if job_status is None:
        return _fail(connection, task_id, task, job_lost())
    if job_status in ("failed", "stopped"):
        return _fail(connection, task_id, task, worker_lost())
    if job_status == "canceled" and status != "running":
        return _set(connection, task_id, task, "canceled", status="canceled",
                    current_step="canceled", step_detail="Canceled", ended_at=now_iso())
    if job_status in ("scheduled", "queued") and status == "running":
        return _retrying(connection, task_id, task, job_status)
    return None


def _retrying(connection: Redis, task_id: str, task: dict[str, Any], job_status: str,
              delay: float | None = None) -> str | None:
    if delay is None and job_status == "scheduled":
        delay = 0.0
        registry = ScheduledJobRegistry(task["queue"] or "intake", connection=connection)
        with contextlib.suppress(Exception):  # it may have just been enqueued
            delay = max(0.0, registry.get_scheduled_time(task_id).timestamp() - time.time())
    delay = delay or 0.0
    error = worker_lost()
    error.message = ("The worker processing this document stopped unexpectedly; it will be "
                     "tried again.")
    outcome = _set(connection, task_id, task, "retrying", status="retrying",
                   current_step="waiting_retry", next_attempt_at=iso_in(delay),
                   error=json.dumps(error.as_dict(None)),
                   step_detail=f"Attempt {int(task['attempts'] or 0) + 1} soon")
    if outcome:
        metrics.count(connection, "tasks_lost_total", reason="worker_lost_retried")
    return outcome


def _fail(connection: Redis, task_id: str, task: dict[str, Any], error: IntakeError) -> str | None:
    outcome = _set(connection, task_id, task, "failed", status="failed", current_step="failed",
                   step_detail=error.message, error=json.dumps(error.as_dict(None)),
                   next_attempt_at="", ended_at=now_iso())
    if outcome:
        pipe = connection.pipeline()
        lifecycle.mark_dead_letter(pipe, task["tenant"] or "default", task_id)
        lifecycle.keep_for_retry(pipe, task_id,
                                 Settings.from_env().upload_retention_seconds)
        metrics.count(pipe, "tasks_finished_total", status="failed")
        metrics.count(pipe, "tasks_lost_total", reason=error.code)
        pipe.execute()
    return outcome


def _set(connection: Redis, task_id: str, task: dict[str, Any], outcome: str,
         **fields: str) -> str | None:
    fields["updated_at"] = now_iso()
    args = [task["status"], task["attempts"] or "0", task["attempt_id"] or "",
            task["job_id"] or ""]
    for name, value in fields.items():
        args += [name, value]
    applied = connection.eval(_COMPARE_AND_SET, 1, keys.task(task_id), *args)
    if applied and outcome == "canceled":
        pipe = connection.pipeline()
        lifecycle.mark_finished(pipe, task["tenant"] or "default", task_id)
        pipe.execute()
    return outcome if applied else None


def _clear_canceled_jobs(connection: Redis) -> int:
    """A job stopped by a cancel lands in RQ's failed registry; take it out once it is there."""
    cleared = 0
    for raw in connection.smembers(keys.canceling()):
        job_id = raw.decode()
        try:
            job = Job.fetch(job_id, connection=connection)
        except NoSuchJobError:
            connection.srem(keys.canceling(), job_id)
            continue
        status = job.get_status(refresh=False)
        if status in (JobStatus.STARTED, JobStatus.QUEUED, JobStatus.SCHEDULED):
            continue
        if status in (JobStatus.FAILED, JobStatus.STOPPED):
            FailedJobRegistry(job.origin, connection=connection).remove(job, delete_job=True)
            cleared += 1
        connection.srem(keys.canceling(), job_id)
    return cleared


def _timestamp(iso: str | None) -> float:
    if not iso:
        return 0.0
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
