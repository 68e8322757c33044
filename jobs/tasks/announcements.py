"""Announcing that a task's visible state changed, so that open pages update without polling.

Whoever writes a task's status, progress or error also publishes the task's id on one Redis
pub/sub channel (`keys.changes_channel`), in the same round trip as the write. Each web process
subscribes once and reads a changed batch once for all the pages watching it (webapp.watchers).
Pub/sub delivers to whoever is connected and forgets the rest, which is all a live page needs:
a subscriber that reconnects re-reads everything it watches. Pure redis, no rq.
"""

from __future__ import annotations

from collections.abc import Iterable

from redis import Redis
from redis.client import Pipeline

from jobs.core import keys


def announce(target: Redis | Pipeline, task_ids: Iterable[str] | str) -> None:
    """Publish each task id (queued on `target` when it is a pipeline: same round trip)."""
    for task_id in [task_ids] if isinstance(task_ids, str) else task_ids:
        target.publish(keys.changes_channel(), task_id)


def changes_channel() -> str:
    return keys.changes_channel()


def changed_task(message: dict) -> str | None:
    """The task id a pub/sub message of the channel announces, else None."""
    if message.get("type") != "message":
        return None
    data = message.get("data")
    return data.decode() if isinstance(data, bytes) else data if isinstance(data, str) else None
