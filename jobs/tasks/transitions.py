"""What follows a task's move, whoever makes it: the one home of a move's consequences
(docs/architecture.md §3).

A mover (a worker's attempt, a person's cancel or Retry, the reconciler) makes its move behind
its own guard (the attempt's fence, a script's compare-and-set) and queues `changed` on the same
pipeline, a MULTI where it has one, after its write of the task's hash. Here, and nowhere else,
a move to a status decides: the sets the limits and the reconciler watch, the dead-letter
indexes, the finished counters, the upload budget a finished task gives back, what becomes of
the checkpoint kept for a retry, and, with webhooks on, the event and its delivery. The facts
themselves (statuses, who may move a task where) are jobs.tasks.states'.

| status    | active sets | dead letters | upload budget | checkpoint and page ranges           |
|-----------|-------------|--------------|---------------|--------------------------------------|
| pending   | enters      | leaves       | (reserved)    | -                                    |
| running   | -           | -            | -             | -                                    |
| retrying  | -           | -            | -             | - (the attempt keeps what it wrote)  |
| succeeded | leaves      | leaves       | given back    | dropped                              |
| failed    | leaves      | enters       | given back    | kept the upload retention if a Retry |
|           |             |              |               | can help, else dropped               |
| canceled  | leaves      | leaves       | given back    | kept the upload retention            |

Each write is idempotent (a budget is given back once, whoever asks), so a change recorded twice
(a re-sent command, a reconciler behind a worker) leaves the same state.

A mover whose guard is a comparison with what it read (the reconciler) moves through
`compare_and_move`: the comparison, the task's write and all of the above in one WATCHed MULTI.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import WatchError

from jobs.core import keys, metrics, scripts
from jobs.core.settings import Settings
from jobs.tasks import states, upload_budgets, webhook_events
from jobs.tasks.announcements import announce
from jobs.tasks.record import Fields, TaskRecord
from jobs.tasks.states import Transition


def changed(
    pipe: Pipeline,
    tenant: str,
    task_id: str,
    status: str,
    *,
    settings: Settings,
    retryable: bool = True,
) -> None:
    """Queue what follows a task's move to `status` (the table above); `retryable`: whether a
    Retry can help a task that `failed` (its error says so), which keeps its checkpoint.

    Queue it after the write of the task's new state: the event keeps a copy of the task as it
    is then. Every status change goes through here (a submit creates a task `pending` in its
    own script, with the limits it checks), and is announced to the pages watching the task.
    """
    announce(pipe, task_id)
    if webhook_events.enabled(settings):  # off, nothing more is written
        if status == states.PENDING:  # a Retry: the batches that list the task wait for it again
            webhook_events.task_reopened(pipe, settings, task_id)
        elif status in states.EVENT_TYPES:
            webhook_events.task_finished(
                pipe, settings, tenant, task_id, states.EVENT_TYPES[status]
            )
    if status in states.LIVE:
        if status == states.PENDING:
            now = time.time()
            pipe.zadd(keys.active(), {task_id: now})
            pipe.zadd(keys.tenant_active(tenant), {task_id: now})
            _not_a_dead_letter(pipe, tenant, task_id)
        return
    pipe.zrem(keys.active(), task_id)
    pipe.zrem(keys.tenant_active(tenant), task_id)
    if status == states.FAILED:
        now = time.time()
        pipe.zadd(keys.tenant_failed(tenant), {task_id: now})
        pipe.zadd(keys.failed_all(), {task_id: now})
    else:
        _not_a_dead_letter(pipe, tenant, task_id)
    upload_budgets.release(pipe, tenant, task_id)
    if status == states.CANCELED or (status == states.FAILED and retryable):
        pipe.expire(keys.checkpoint(task_id), settings.upload_retention_seconds)
    else:
        drop_checkpoint(pipe, task_id)
    metrics.count(pipe, "tasks_finished_total", status=status)


def compare_and_move(
    connection: Redis,
    settings: Settings,
    judged: TaskRecord,
    move: Transition,
    fields: Fields,
    *,
    compared: tuple[str, ...],
    retryable: bool = True,
    also: Callable[[Pipeline], None] | None = None,
) -> bool:
    """Write `fields` (jobs.tasks.record's writes of `move`) and what follows the move
    (`changed`, then `also`'s writes) in one MULTI, only while the task's `compared` fields
    still hold what `judged` read; False, having written nothing, when it moved on.

    Why a WATCH and not a script: a script can compare and write the task, but what follows a
    move is queued by `changed` (scripts of its own among it), which a MULTI runs whatever a
    script before it found. So the task is WATCHed and its compared fields read again in the
    WATCH's round trip (jobs.core.scripts.watch), and the MULTI goes only if they agree: two
    round trips. Whoever writes the task between the two (a worker's end, a cancel) makes the
    EXEC fail, and the mover loses cleanly; one that wrote before the WATCH is seen by the read.
    """
    key = keys.task(judged.id)
    with connection.pipeline() as pipe:
        try:
            [now] = scripts.watch(pipe, key, reads=[("HMGET", key, *compared)])
            current = TaskRecord.from_row(compared, now)
            if any(getattr(current, name) != getattr(judged, name) for name in compared):
                return False
            pipe.multi()
            pipe.hset(key, mapping=fields)
            changed(
                pipe, judged.tenant, judged.id, move.target, settings=settings, retryable=retryable
            )
            if also is not None:
                also(pipe)
            pipe.execute()
        except WatchError:
            return False
    return True


def drop_checkpoint(pipe: Pipeline, task_id: str) -> None:
    """Queue the removal of everything kept for a retry: the checkpoint and a scan's page
    ranges (jobs.worker.page_ranges)."""
    pipe.delete(
        keys.checkpoint(task_id),
        keys.page_ranges(task_id),
        keys.page_range_readers(task_id),
        keys.page_ranges_done(task_id),
    )


def forget(pipe: Pipeline, tenant: str, task_id: str) -> None:
    """A task is removed (its document deleted, or a finished one the active set still lists):
    it leaves every index, with no counter, and gives back the upload budget it still holds."""
    announce(pipe, task_id)
    pipe.zrem(keys.active(), task_id)
    pipe.zrem(keys.tenant_active(tenant), task_id)
    _not_a_dead_letter(pipe, tenant, task_id)
    upload_budgets.release(pipe, tenant, task_id)


def _not_a_dead_letter(pipe: Pipeline, tenant: str, task_id: str) -> None:
    pipe.zrem(keys.tenant_failed(tenant), task_id)
    pipe.zrem(keys.failed_all(), task_id)
