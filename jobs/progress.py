"""ProgressReporter: the one writer of a running task's progress.

Each write updates the RQ job's meta (what rq-dashboard shows) and Intake's plain task hash (what
the API reads) in one MULTI round trip. Writes are throttled so that no job makes more than four
in any second: intermediate updates need 0.35 s since the previous write, which leaves room for
the forced write at a terminal state.
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable

from redis import Redis
from redis.exceptions import WatchError

from jobs import keys
from jobs.failures import CancelRequested
from jobs.tasks import now_iso

MIN_INTERVAL_SECONDS = 0.35


class ProgressReporter:
    """Throttled, never-decreasing progress of one attempt, mirrored to job meta and task hash."""

    def __init__(self, connection: Redis, task_id: str, *, job: Any = None,
                 ttl_seconds: int, steps: list[dict[str, Any]] | None = None,
                 attempt: int = 1) -> None:
        self.connection = connection
        self.task_id = task_id
        self.job = job
        self.ttl_seconds = ttl_seconds
        self.steps = steps or []
        self.attempt = attempt
        self.progress = 0
        self.current_step = "queued"
        self.step_detail = ""
        self._last_write = 0.0
        self._dirty = False
        self.writes: list[float] = []

    def update(self, progress: int, detail: str | None = None, *, force: bool = False) -> None:
        """Record progress; written now if forced or the throttle allows, else at the next write."""
        self.progress = max(self.progress, min(100, int(progress)))
        if detail is not None:
            self.step_detail = detail
        self._dirty = True
        if force or time.monotonic() - self._last_write >= MIN_INTERVAL_SECONDS:
            self.write()

    def begin_step(self, name: str, progress: int, detail: str) -> None:
        """Start a step: its timing is kept for `steps`, replacing an earlier attempt's entry."""
        self.steps = [s for s in self.steps if s["name"] != name]
        self.steps.append({"name": name, "attempt": self.attempt, "started_at": now_iso(),
                           "ended_at": None})
        self.current_step = name
        self.update(progress, detail)

    def end_step(self, name: str) -> None:
        for step in self.steps:
            if step["name"] == name:
                step["ended_at"] = now_iso()

    def commit(self, extra: dict[str, Any], queue_more: Callable[[Any], None] | None = None) -> None:
        """A write that changes the task's status; it loses to a cancel.

        The cancel flag is WATCHed: if a person cancels between the check and EXEC, nothing is
        written (no index update either) and CancelRequested is raised instead.
        """
        flag = keys.cancel_flag(self.task_id)
        with self.connection.pipeline() as pipe:
            try:
                pipe.watch(flag)
                if pipe.exists(flag):
                    raise CancelRequested()
                pipe.multi()
                if queue_more is not None:
                    queue_more(pipe)
                self.write(extra, pipe=pipe)
                pipe.execute()
            except WatchError:
                raise CancelRequested() from None

    def write(self, extra: dict[str, Any] | None = None, *, pipe: Any = None) -> None:
        """Write progress (and `extra` record fields) to the task hash and the job meta at once."""
        fields: dict[str, Any] = {
            "progress": self.progress, "current_step": self.current_step,
            "step_detail": self.step_detail, "steps": json.dumps(self.steps),
            "updated_at": now_iso(),
        }
        fields.update(extra or {})
        own_pipe = pipe is None
        pipe = self.connection.pipeline() if own_pipe else pipe
        record = {k: _field(v) for k, v in fields.items()}
        task_key = keys.task(self.task_id)
        pipe.hset(task_key, mapping=record)
        pipe.expire(task_key, self.ttl_seconds)
        if self.job is not None:
            self.job.meta.update({
                "progress": int(record["progress"]), "current_step": record["current_step"],
                "step_detail": record["step_detail"], "attempt": self.attempt,
                "error": json.loads(record["error"]) if record.get("error") else None,
            })
            # Same HSET as Job.save_meta(), queued on this pipeline to share the round trip.
            pipe.hset(self.job.key, "meta", self.job.serializer.dumps(self.job.meta))
        if own_pipe:
            pipe.execute()
        self._last_write = time.monotonic()
        self.writes.append(time.time())
        self._dirty = False


def _field(value: Any) -> str | int:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value
