"""ProgressReporter: the one writer of a running task's progress.

Each write updates the RQ job's meta (what rq-dashboard shows) and Intake's plain task hash (what
the API reads) in one round trip. Writes are throttled so that no job makes more than four in
any second: intermediate updates need 0.35 s since the previous write, which leaves room for the
write of the final state. Progress is only written while the task is `running`, so a cancel is
never undone by a late progress write.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

from redis import Redis
from redis.exceptions import WatchError

from jobs import keys
from jobs.failures import CancelRequested
from jobs.tasks import now_iso

MIN_INTERVAL_SECONDS = 0.35

# Progress is written only while the task runs: a cancel (or the reconciler) that changed the
# status meanwhile must not be overwritten by a late progress write.
# KEYS: task. ARGV: ttl, then field/value pairs.
_WRITE_IF_RUNNING = """
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""


class ProgressReporter:
    """Throttled, never-decreasing progress of one attempt, mirrored to job meta and task hash.

    An update the throttle holds back is written by a timer as soon as the throttle allows, so
    a step that begins just before a long call (an embedding request) is shown during it.
    """

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
        self.writes: list[float] = []
        self._last_write = 0.0
        self._dirty = False
        self._closed = False
        self._timer: threading.Timer | None = None
        self._lock = threading.RLock()

    def update(self, progress: int, detail: str | None = None) -> None:
        """Record progress; written now if the throttle allows, else as soon as it does."""
        with self._lock:
            self.progress = max(self.progress, min(100, int(progress)))
            if detail is not None:
                self.step_detail = detail
            self._dirty = True
            self._flush()

    def begin_step(self, name: str, progress: int, detail: str) -> None:
        """Start a step: its timing is kept for `steps`, replacing an earlier attempt's entry."""
        with self._lock:
            self.steps = [s for s in self.steps if s["name"] != name]
            self.steps.append({"name": name, "attempt": self.attempt, "started_at": now_iso(),
                               "ended_at": None})
            self.current_step = name
            self.update(progress, detail)

    def end_step(self, name: str) -> None:
        with self._lock:
            for step in self.steps:
                if step["name"] == name:
                    step["ended_at"] = now_iso()

    def _flush(self) -> None:
        """Write if dirty and allowed; otherwise make sure a timer will."""
        with self._lock:
            if not self._dirty or self._closed:
                return
            wait = self._last_write + MIN_INTERVAL_SECONDS - time.monotonic()
            if wait <= 0:
                self._write({}, pipe=None, only_if_running=True)
            elif self._timer is None or not self._timer.is_alive():
                self._timer = threading.Timer(wait, self._flush)
                self._timer.daemon = True
                self._timer.start()

    def close(self) -> None:
        """No more progress from this attempt (its final state is being written)."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()

    def commit(self, extra: dict[str, Any], queue_more: Callable[[Any], None] | None = None) -> None:
        """A write that changes the task's status; it loses to a cancel.

        The cancel flag is WATCHed: if a person cancels between the check and EXEC, nothing is
        written (no index update either) and CancelRequested is raised instead.
        """
        flag = keys.cancel_flag(self.task_id)
        with self._lock, self.connection.pipeline() as pipe:
            try:
                pipe.watch(flag)
                if pipe.exists(flag):
                    raise CancelRequested()
                pipe.multi()
                if queue_more is not None:
                    queue_more(pipe)
                self._write(extra, pipe=pipe, only_if_running=False)
                pipe.execute()
            except WatchError:
                raise CancelRequested() from None

    def write(self, extra: dict[str, Any], *, pipe: Any = None) -> None:
        """Write a final state (and `extra` record fields) whatever the current status."""
        with self._lock:
            self._write(extra, pipe=pipe, only_if_running=False)

    def _write(self, extra: dict[str, Any], *, pipe: Any, only_if_running: bool) -> None:
        fields: dict[str, Any] = {
            "progress": self.progress, "current_step": self.current_step,
            "step_detail": self.step_detail, "steps": json.dumps(self.steps),
            "updated_at": now_iso(), **extra,
        }
        record = {k: _field(v) for k, v in fields.items()}
        own_pipe = pipe is None
        pipe = self.connection.pipeline() if own_pipe else pipe
        task_key = keys.task(self.task_id)
        if only_if_running:
            pipe.eval(_WRITE_IF_RUNNING, 1, task_key, self.ttl_seconds,
                      *[item for pair in record.items() for item in pair])
        else:
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
