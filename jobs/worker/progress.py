"""ProgressReporter: the one writer of a running attempt's progress.

Each write goes to Intake's plain task hash (what the API reads) through the attempt's fence
(jobs.tasks.attempts): nothing is written once the attempt no longer owns the running task, so
a cancel, a Retry or a delete is never undone by a late write. Only a write the fence let
through is then copied to the RQ job's meta (what rq-dashboard shows) with RQ's own
`Job.save_meta()`: the job is the one writer of its meta, and an attempt that lost its task
stops updating it too. The copy is for operators' eyes: if Redis refuses it, the task hash
already holds the progress and the next write copies it again. Writes are throttled so that
no job makes more than four in any second: intermediate updates need 0.5 s since the previous
write, which leaves room for the final state's write (the commit, whose MULTI also carries the
steps' timings and lets go of the task). An intermediate write that finds Redis unreachable (a
failover) is tried again half a second later instead of failing the attempt; the final state's
write is not optional and fails it (to be retried).

rq-dashboard 0.9 renders a job's meta as raw HTML, so every text Intake puts there is escaped
(`dashboard_text`): a document's name or an error's words show as text and never run.
"""

from __future__ import annotations

import _thread
import html
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from redis.client import Pipeline

from jobs.core.clock import now_iso
from jobs.core.redis_client import is_outage
from jobs.tasks import record as task_record
from jobs.tasks.attempts import AttemptFence

log = logging.getLogger(__name__)

MIN_INTERVAL_SECONDS = 0.5


def dashboard_text(value: Any) -> Any:
    """`value` fit for rq-dashboard's raw HTML: strings escaped, containers walked, rest as is."""
    if isinstance(value, str):
        return html.escape(value, quote=True)
    if isinstance(value, dict):
        return {key: dashboard_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [dashboard_text(item) for item in value]
    return value


class ProgressReporter:
    """Throttled, never-decreasing progress of one attempt, mirrored to job meta and task hash.

    An update the throttle holds back is written by a flusher thread as soon as the throttle
    allows, so a step that begins just before a long call (an embedding request) is shown
    during it.
    """

    def __init__(
        self,
        fence: AttemptFence,
        *,
        job: Any = None,
        ttl_seconds: int,
        steps: list[dict[str, Any]] | None = None,
        attempt: int = 1,
    ) -> None:
        self.fence = fence
        self.job = job
        self.ttl_seconds = ttl_seconds
        self.steps = steps or []
        self.attempt = attempt
        self.progress = 0
        self.current_step = "queued"
        self.step_detail = ""
        # The attempt's start (AttemptFence.start) wrote the task's status and first step: it
        # counts as the first write, so the first update waits for the throttle like any other,
        # and a document done within MIN_INTERVAL_SECONDS makes no intermediate write at all.
        self._last_write = fence.confirmed
        self._dirty = False
        self._closed = False
        self._armed = False  # a flusher thread is waiting to write a held-back update
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
            self.steps.append(
                {"name": name, "attempt": self.attempt, "started_at": now_iso(), "ended_at": None}
            )
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
                try:
                    fields = self._fields({})
                    if self.fence.write(fields, self.ttl_seconds):
                        self._save_meta(fields)
                except Exception as exc:
                    if not is_outage(exc):
                        raise
                    # Redis unreachable or refusing writes (a failover): progress is shown
                    # late, not lost, and never fails the attempt; tried again in a moment.
                    log.info(
                        "progress of %s not written (%s); trying again", self.fence.task_id, exc
                    )
                    self._last_write = time.monotonic()
                    wait = MIN_INTERVAL_SECONDS
                else:
                    self._wrote()
                    return
            if not self._armed:
                # A bare thread, not threading.Timer: Thread.start waits until the new thread
                # runs, 0.2-0.4 ms on a busy worker, more than the rest of a tiny document's
                # progress costs; this one is started in ~30 µs and never waited for (it ends
                # with the work-horse, or finds the reporter closed).
                self._armed = True
                _thread.start_new_thread(self._flush_after, (wait,))

    def _flush_after(self, wait: float) -> None:
        """The flusher thread: write what is still held back once the throttle allows."""
        time.sleep(wait)
        with self._lock:
            self._armed = False
            try:
                self._flush()
            except Exception:  # no one to raise to here; the next write carries it anyway
                log.exception("progress of %s not written", self.fence.task_id)

    def close(self) -> None:
        """No more progress from this attempt (its final state is being written)."""
        with self._lock:
            self._closed = True  # a waiting flusher thread then writes nothing

    def commit(
        self,
        extra: dict[str, Any],
        queue_more: Callable[[Pipeline], None] | None = None,
        **options: Any,
    ) -> None:
        """A write that changes the task's status, with `queue_more`'s writes in the same MULTI
        after it (so what they read of the task, a webhook event's copy, is its new state); it
        applies only while this attempt owns the running task (`AttemptFence.commit`, which
        takes `options`), else raises CancelRequested or Superseded."""
        fields = self._fields(extra)
        with self._lock:
            self.fence.commit(fields, self.ttl_seconds, queue_more, **options)
            self._wrote()
            self._save_meta(fields)

    def write_canceled(self) -> None:
        """The last word of an attempt that was canceled (the cancel already set the status)."""
        with self._lock:
            fields = self._fields(task_record.cancel_noted())
            if self.fence.write_canceled(fields, self.ttl_seconds):
                self._save_meta(fields)

    def _fields(self, extra: dict[str, Any]) -> dict[str, Any]:
        fields = {
            **task_record.progressed(
                self.progress, self.current_step, self.step_detail, self.steps, now_iso()
            ),
            **extra,
        }
        return {k: task_record.value(v) for k, v in fields.items()}

    def _save_meta(self, fields: dict[str, Any]) -> None:
        """Copy a write the fence let through to the job's meta, with RQ's Job.save_meta()
        (nothing without a job). An outage loses only this copy: logged, never raised."""
        if self.job is None:
            return
        error = json.loads(fields["error"]) if fields.get("error") else None
        self.job.meta.update(
            dashboard_text(
                {
                    "progress": int(fields["progress"]),
                    "current_step": fields["current_step"],
                    "step_detail": fields["step_detail"],
                    "attempt": self.attempt,
                    "error": error,
                }
            )
        )
        try:
            self.job.save_meta()
        except Exception as exc:
            if not is_outage(exc):
                raise
            log.info("job meta of %s not written (%s)", self.fence.task_id, exc)

    def _wrote(self) -> None:
        self._last_write = time.monotonic()
        self._dirty = False
