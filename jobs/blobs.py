"""Uploaded bytes, kept in Redis so that any worker on any machine can process any task.

They are bounded by the upload limits, expire with the retention period, and are deleted as
soon as their task succeeds.
"""
from __future__ import annotations

from redis import Redis
from redis.client import Pipeline

from jobs import keys
from jobs.failures import PermanentError


def store(pipe: Pipeline, task_id: str, data: bytes, ttl_seconds: int) -> None:
    pipe.set(keys.blob(task_id), data, ex=ttl_seconds)


def load(connection: Redis, task_id: str) -> bytes:
    """The uploaded bytes of a task; their loss is permanent (the file must be uploaded again)."""
    data = connection.get(keys.blob(task_id))
    if data is None:
        raise PermanentError("The uploaded file is no longer stored (it expired or was removed); "
                             "upload it again.", code="upload_expired")
    return data


def delete(pipe: Pipeline, task_id: str) -> None:
    pipe.delete(keys.blob(task_id))
