"""The reconciler: makes every task's record agree with its RQ job, so nothing stays stuck.

RQ notices a job whose worker died with it only when the job's heartbeat expires and a
cleanup of the started registry runs (then RQ retries or fails it), and it never tells Intake.
Dashboard actions and deleted keys change jobs behind Intake's back. So, every few seconds,
one worker (jobs.worker.maintenance, whichever takes the lock) compares each live task with the job
of its current run, read through RQ's public API only:

| task                      | job                    | becomes (states.*)                       |
|---------------------------|------------------------|------------------------------------------|
| running                   | scheduled or queued    | retrying ("worker lost"): RQ retried it  |
| pending/running/retrying  | failed or stopped      | failed ("worker lost"), a dead letter    |
| pending/running/retrying  | gone                   | failed ("job lost"), retryable           |
| pending/retrying          | canceled (dashboard)   | canceled                                 |

A task is only judged once its record has been still for GRACE_SECONDS, and every change is a
compare-and-set on status, attempts, attempt and run (jobs.tasks.transitions.compare_and_move:
the comparison, the write and what follows it in one MULTI), so a task that moves on meanwhile
is left alone. Jobs stopped by a cancel are taken out of the failed registry: a cancel is not a dead
letter.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from redis import Redis
from redis.client import Pipeline
from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

from jobs.core import keys, metrics, queues
from jobs.core.clock import iso_in, now_iso, timestamp
from jobs.core.failures import IntakeError, job_lost, worker_lost
from jobs.core.settings import QUEUE_NAMES, Settings
from jobs.tasks import record as task_record
from jobs.tasks import records as tasks
from jobs.tasks import states, transitions
from jobs.tasks.record import TaskRecord
from jobs.tasks.states import Transition
from jobs.worker import parts

log = logging.getLogger(__name__)

GRACE_SECONDS = 10

_FIELDS = (
    task_record.STATUS,
    task_record.ATTEMPTS,
    task_record.UPDATED_AT,
    task_record.TENANT,
    task_record.QUEUE,
    task_record.CREATED_AT,
    task_record.ATTEMPT_ID,
    task_record.JOB_ID,
    task_record.MAX_ATTEMPTS,
)
# What a compare-and-set finds unchanged: the status, and the attempt and run it was judged in.
_COMPARED = (task_record.STATUS, task_record.ATTEMPTS, task_record.ATTEMPT_ID, task_record.JOB_ID)


def job_of(task: TaskRecord) -> str:
    """The RQ job of the task's current run (the first run's job has the task's id)."""
    return task.job_id or task.id


def reconcile(
    connection: Redis, settings: Settings, *, grace_seconds: float = GRACE_SECONDS
) -> dict[str, int]:
    """One pass over the live tasks and the canceling set; returns what it changed."""
    changed = {"retrying": 0, "failed": 0, "canceled": 0, "forgotten": 0, "uncanceled": 0}
    task_ids = [t.decode() for t in connection.zrange(keys.active(), 0, -1)]
    pipe = connection.pipeline(transaction=False)
    for task_id in task_ids:
        pipe.hmget(keys.task(task_id), *_FIELDS)
    records = [
        TaskRecord.from_row(_FIELDS, row, task_id=task_id)
        for task_id, row in zip(task_ids, pipe.execute())
    ]
    cutoff = time.time() - grace_seconds
    still = [
        task
        for task in records
        if not states.is_live(task.status)
        or timestamp(task.updated_at or task.created_at) <= cutoff
    ]
    statuses = _job_statuses(connection, still)
    for task in still:
        outcome = _judge(connection, settings, task, statuses.get(job_of(task)))
        if outcome:
            changed[outcome] += 1
    changed["uncanceled"] = _clear_canceled_jobs(connection)
    if any(changed.values()):
        log.info("reconciled tasks: %s", changed)
    return changed


def _job_statuses(connection: Redis, judged: list[TaskRecord]) -> dict[str, str]:
    """The status of each judged task's job (missing: the job is gone).

    A waiting job is found in its queue or the scheduled registry (one read each of the queues
    the waiting tasks were submitted to, and the static three, for the whole backlog) and only
    checked to exist; only the others are fetched whole.
    """
    waiting: dict[str, str] = {}
    recorded = {task.queue for task in judged if task.status in (states.PENDING, states.RETRYING)}
    if recorded:
        names = list(QUEUE_NAMES) + sorted(
            name for name in recorded - set(QUEUE_NAMES) if name and queues.parse(name)
        )
        for name in names:
            waiting.update(
                dict.fromkeys(
                    Queue(name, connection=connection).get_job_ids(), JobStatus.QUEUED.value
                )
            )
            waiting.update(
                dict.fromkeys(
                    ScheduledJobRegistry(name, connection=connection).get_job_ids(cleanup=False),
                    JobStatus.SCHEDULED.value,
                )
            )
    job_ids = [job_of(task) for task in judged]
    listed = [job_id for job_id in job_ids if job_id in waiting]
    pipe = connection.pipeline(transaction=False)
    for job_id in listed:
        pipe.exists(Job.key_for(job_id))
    found = {job_id: waiting[job_id] for job_id, there in zip(listed, pipe.execute()) if there}
    others = [job_id for job_id in job_ids if job_id not in waiting]
    found.update(
        {
            job.id: job.get_status(refresh=False).value
            for job in Job.fetch_many(others, connection=connection)
            if job is not None
        }
    )
    return found


def horse_lost(connection: Redis, job: Any) -> str | None:
    """The work-horse of `job` died under its worker (OOM, kill -9): say so at once.

    Called (jobs.worker.workers, RQ's work_horse_killed_handler) before RQ retries or fails the job,
    so RQ's own decision is known: retries left → `retrying` at the time RQ will use; none →
    `failed` ("worker lost").
    """
    task_id = job.args[0] if job.args else job.id
    task = TaskRecord.from_row(
        _FIELDS, connection.hmget(keys.task(task_id), *_FIELDS), task_id=task_id
    )
    if task.status != states.RUNNING or job_of(task) != job.id:
        return None  # not this job's run any more: a Retry replaced it
    settings = parts.current().settings
    if job.retries_left:
        return _lose_attempt(connection, settings, task, delay=job.get_retry_interval())
    return _lose(connection, settings, task, worker_lost())


def _judge(
    connection: Redis, settings: Settings, task: TaskRecord, job_status: str | None
) -> str | None:
    status = task.status
    if not states.is_live(status):  # finished: only the active set still lists it
        pipe = connection.pipeline()
        transitions.forget(pipe, task.tenant or "default", task.id)
        pipe.execute()
        return "forgotten"
    if job_status is None:
        return _lose(connection, settings, task, job_lost())
    if job_status in (JobStatus.FAILED.value, JobStatus.STOPPED.value):
        return _lose(connection, settings, task, worker_lost())
    if job_status == JobStatus.CANCELED.value and states.CANCELED_ELSEWHERE.allows(status):
        return _move(
            connection,
            settings,
            task,
            states.CANCELED_ELSEWHERE,
            task_record.canceled_elsewhere(now_iso()),
        )
    waiting = (JobStatus.SCHEDULED.value, JobStatus.QUEUED.value)
    if job_status in waiting and states.LOSE_ATTEMPT.allows(status):
        return _lose_attempt(connection, settings, task, job_status=job_status)
    return None


def _lose_attempt(
    connection: Redis,
    settings: Settings,
    task: TaskRecord,
    job_status: str = JobStatus.SCHEDULED.value,
    delay: float | None = None,
) -> str | None:
    """RQ retried the job of an attempt nobody recorded the end of: `retrying`."""
    if delay is None and job_status == JobStatus.SCHEDULED.value:
        delay = 0.0
        registry = ScheduledJobRegistry(task.queue or "intake", connection=connection)
        with contextlib.suppress(Exception):  # it may have just been enqueued
            scheduled = registry.get_scheduled_time(job_of(task))
            delay = max(0.0, scheduled.timestamp() - time.time())
    error = worker_lost()
    error.message = (
        "The worker processing this document stopped unexpectedly; it will be tried again."
    )
    next_attempt = task.attempts + 1
    words = tasks.attempt_words(next_attempt, task.max_attempts or next_attempt)
    return _move(
        connection,
        settings,
        task,
        states.LOSE_ATTEMPT,
        task_record.retrying(error.as_dict(None), iso_in(delay or 0.0), words, now_iso()),
        counted=("tasks_lost_total", "worker_lost_retried"),
    )


def _lose(
    connection: Redis, settings: Settings, task: TaskRecord, error: IntakeError
) -> str | None:
    return _move(
        connection,
        settings,
        task,
        states.LOSE,
        task_record.lost(error.as_dict(None), now_iso()),
        retryable=error.retryable,
        counted=("tasks_lost_total", error.code),
    )


def _move(
    connection: Redis,
    settings: Settings,
    task: TaskRecord,
    move: Transition,
    fields: task_record.Fields,
    *,
    retryable: bool = True,
    counted: tuple[str, str] | None = None,
) -> str | None:
    """Move the task to `move.target` (`fields`, jobs.tasks.record's writes of that change)
    only while it is as judged; the counter `counted` (name, reason) goes in the same MULTI,
    `retryable` says whether a Retry can help a task that failed."""

    def count(pipe: Pipeline) -> None:
        if counted is not None:
            metrics.count(pipe, counted[0], reason=counted[1])

    moved = transitions.compare_and_move(
        connection,
        settings,
        task,
        move,
        fields,
        compared=_COMPARED,
        retryable=retryable,
        also=count,
    )
    return move.target if moved else None


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
