"""Uploaded bytes, kept in Redis so that any worker on any machine can process any task.

They are bounded by the upload limits and by a budget for all of them (INTAKE_BLOB_BUDGET_BYTES,
counted in blob_bytes), expire with the retention period, and are deleted as soon as their task
succeeds.
"""
from __future__ import annotations

from redis import Redis
from redis.client import Pipeline

from jobs import keys
from jobs.failures import PermanentError


def load(connection: Redis, task_id: str) -> bytes:
    """The uploaded bytes of a task; their loss is permanent (the file must be uploaded again)."""
    data = connection.get(keys.blob(task_id))
    if data is None:
        raise PermanentError("The uploaded file is no longer stored (it expired or was removed); "
                             "upload it again.", code="upload_expired")
    return data


def delete(pipe: Pipeline, task_id: str, size: int) -> None:
    """Drop a task's upload and give its bytes back to the budget (jobs.submit stores them)."""
    pipe.delete(keys.blob(task_id))
    pipe.decrby(keys.blob_bytes(), size)
    pipe.hdel(keys.blob_sizes(), task_id)


def recount(connection: Redis) -> int:
    """Recount the bytes waiting from the uploads that still exist (expired ones give theirs back).

    Run now and then by the reconciler; returns the new total.
    """
    sizes = {k.decode(): int(v) for k, v in connection.hgetall(keys.blob_sizes()).items()}
    pipe = connection.pipeline(transaction=False)
    for task_id in sizes:
        pipe.exists(keys.blob(task_id))
    gone = [task_id for task_id, there in zip(sizes, pipe.execute()) if not there]
    total = sum(size for task_id, size in sizes.items() if task_id not in gone)
    pipe = connection.pipeline()
    if gone:
        pipe.hdel(keys.blob_sizes(), *gone)
    pipe.set(keys.blob_bytes(), total)
    pipe.execute()
    return total
