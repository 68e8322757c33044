"""Task records: the plain Redis hash each document's state lives in, and the one place that
turns a record into the task JSON of docs/architecture.md §4.

The web never unpickles RQ job meta: the worker writes the same progress into this hash in the
same round trip, so a poll is one HGETALL. The record outlives RQ's job (retention days).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from redis import Redis
from redis.client import Pipeline

from jobs.core import keys, scripts
from jobs.core.ids import is_id, new_id  # noqa: F401  (callers take them from here too)
from jobs.tasks import record as task_record
from jobs.tasks import states
from jobs.tasks.record import TaskRecord

_WAITING = {states.PENDING: "Waiting for a worker"}


def decode(raw: Mapping[bytes, bytes]) -> dict[str, str]:
    """A hash read whole, as text (a batch's, a webhook event's; a task's is a TaskRecord)."""
    return {k.decode(): v.decode() for k, v in raw.items()}


_TENANT_KEY = task_record.TENANT.encode()


def _found(raw: Mapping[bytes, bytes]) -> TaskRecord | None:
    # No tenant: an unknown task, or an expired one.
    return TaskRecord.from_hash(raw) if raw and _TENANT_KEY in raw else None


def load(connection: Redis, task_id: str) -> TaskRecord | None:
    """The record of one task, or None when there is none (unknown or expired)."""
    return _found(connection.hgetall(keys.task(task_id)))


def load_many(connection: Redis, task_ids: Iterable[str]) -> list[TaskRecord | None]:
    """Records of many tasks in one pipelined round trip, in order."""
    pipe = connection.pipeline(transaction=False)
    for task_id in task_ids:
        pipe.hgetall(keys.task(task_id))
    return [_found(raw) for raw in pipe.execute()]


# Every field `view` reads (and `tenant`, whose presence tells that a record exists): a batch
# reads only these, with HMGET, instead of the whole record.
VIEW_FIELDS: tuple[str, ...] = (
    task_record.ID,
    task_record.TENANT,
    task_record.BATCH_ID,
    task_record.DOCUMENT_ID,
    task_record.FILENAME,
    task_record.STATUS,
    task_record.CURRENT_STEP,
    task_record.STEP_DETAIL,
    task_record.CREATED_AT,
    task_record.UPDATED_AT,
    task_record.STEPS,
    task_record.PIPELINE_VERSION,
    task_record.PROGRESS,
    task_record.ATTEMPTS,
    task_record.MAX_ATTEMPTS,
    task_record.ERROR,
    task_record.RESULT,
    task_record.NEXT_ATTEMPT_AT,
    task_record.STARTED_AT,
    task_record.ENDED_AT,
)
_TENANT = VIEW_FIELDS.index(task_record.TENANT)


# Returns each task's HMGET of VIEW_FIELDS, in order (nil where missing).
_VIEW = scripts.load(__file__, "records_view", {"VIEW_FIELDS": VIEW_FIELDS})
# Tasks per script call: each call holds Redis for ~1 ms at most, the rest of the pipeline
# waits its turn like any other client's commands.
VIEW_GROUP = 100


def load_view_fields(connection: Redis, task_ids: list[str]) -> list[list[bytes | None]]:
    """VIEW_FIELDS of many tasks (raw values, None where missing) in one pipelined round trip,
    in order; `view_record` turns one into a record.

    A batch poll reads 200 tasks. redis-py's Pipeline spends ~20 µs of Python on each command
    (argument checks, packing, reply dispatch), more than Redis takes for an HMGET, so the
    HMGETs run in a script, a hundred tasks per call: a few commands for redis-py to handle,
    one round trip, through its public client alone.
    """
    if not task_ids:
        return []
    task_keys = [keys.task(task_id) for task_id in task_ids]
    groups = [task_keys[i : i + VIEW_GROUP] for i in range(0, len(task_keys), VIEW_GROUP)]

    def build(pipe: Pipeline) -> None:  # reads only: safe to send again (scripts.send)
        for group in groups:
            _VIEW.queue(pipe, more_keys=group)

    return [row for reply in scripts.send(connection, build) for row in reply]


def view_record(raw: list[bytes | None]) -> TaskRecord | None:
    """The record `load` would give, restricted to VIEW_FIELDS (None for a missing task)."""
    if raw[_TENANT] is None:  # no tenant: unknown or expired
        return None
    return TaskRecord.from_row(VIEW_FIELDS, raw)


def poll_after_ms(status: str) -> int:
    """A running task moves quickly; anything else can be polled more slowly."""
    return 1000 if status == states.RUNNING else 2000


def view(record: TaskRecord) -> dict[str, Any]:
    """The task JSON of docs/architecture.md §4, built from a task's record. The only builder of
    that shape (its keys are the API's, not the hash's: the two agree today, by choice)."""
    task_id = record.id
    status = record.status or states.PENDING
    error = json.loads(record.error) if record.error else None
    task: dict[str, Any] = {
        "id": task_id,
        "batch_id": record.batch_id,
        "document_id": record.document_id,
        "filename": record.filename,
        "status": status,
        "current_step": record.current_step or "queued",
        "step_detail": record.step_detail or _WAITING.get(status, ""),
        "created_at": record.created_at,
        "updated_at": record.updated_at or record.created_at,
        "steps": json.loads(record.steps or "[]"),
        "pipeline_version": record.pipeline_version,
        "poll_after_ms": poll_after_ms(status),
        "url": f"/api/tasks/{task_id}",
        "page_url": f"/tasks/{task_id}",
        "progress": record.progress,
        "attempts": record.attempts,
        "max_attempts": record.max_attempts,
        "error": error,
        "result": json.loads(record.result) if record.result else None,
        "next_attempt_at": record.next_attempt_at or None,
        "started_at": record.started_at or None,
        "ended_at": record.ended_at or None,
        "can_retry": states.can_retry(status, error),
        "can_cancel": states.can_cancel(status),
    }
    task["status_text"] = status_text(task)
    return task


STEP_LABELS = {
    "queued": "Queued",
    "parsing": "Parsing",
    "chunking": "Chunking",
    "embedding": "Embedding",
    "indexing": "Indexing",
    "done": "Done",
    "waiting_retry": "Waiting to retry",
    "failed": "Failed",
    "canceled": "Canceled",
}
_FINAL_WORDS = {
    states.PENDING: "Queued",
    states.SUCCEEDED: "Succeeded",
    states.CANCELED: "Canceled",
}
# How the wait before the next attempt reads ({n}: that attempt; {of}: attempts in all;
# {s}: seconds): the page script fills the same words in as it counts down.
ATTEMPT_WORDS = {"in": "Attempt {n} of {of} in {s} s", "soon": "Attempt {n} of {of} soon"}


def attempt_words(next_attempt: int, max_attempts: int, seconds: float | None = None) -> str:
    """ "Attempt 3 of 4 in 4 s", or "… soon" when the time is unknown or has come."""
    if seconds is not None and round(seconds) > 0:
        return ATTEMPT_WORDS["in"].format(n=next_attempt, of=max_attempts, s=round(seconds))
    return ATTEMPT_WORDS["soon"].format(n=next_attempt, of=max_attempts)


def status_text(task: Mapping[str, Any]) -> str:
    """The words a page shows for a task's state (docs/architecture.md §3), shared by pages and
    scripts."""
    status = task["status"]
    if status == states.RUNNING:
        return f"{STEP_LABELS.get(task['current_step'], 'Running')} ({task['progress']} %)"
    if status == states.RETRYING:
        return attempt_words(task["attempts"] + 1, task["max_attempts"])
    if status == states.FAILED:
        reason = (task.get("error") or {}).get("message") or "unknown reason"
        return f"Failed: {reason}"
    return _FINAL_WORDS[status]
