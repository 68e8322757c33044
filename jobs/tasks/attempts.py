"""An attempt's hold on its task: every write an attempt makes is fenced by its own id.

Why: one task can have an older attempt still running while a newer one owns it — a cancel
followed at once by a Retry (the old work-horse is still being stopped), a job pushed twice by
a client that re-sent its enqueue, a worker cut off from Redis that comes back. So an attempt
starts only when its job is the job of the task's current run and the task may run; it takes a
fresh attempt id; and every later write of it (progress, the final state, the index) applies
only while the task is `running` under that id. A cancel, a Retry, a DELETE or the reconciler
changes the status or the id, and the old attempt's next write is refused: it stops, having
changed nothing.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import WatchError

from jobs.core import keys, scripts
from jobs.core.clock import now_iso
from jobs.core.failures import CancelRequested, TransientError
from jobs.core.scripts import WatchedCheck
from jobs.core.settings import Settings
from jobs.tasks import record as task_record
from jobs.tasks import states, transitions
from jobs.tasks.announcements import announce
from jobs.tasks.record import TaskRecord

COMMIT_TRIES = 5
#: A check between steps (`check()` with nothing queued) is skipped when this attempt's
#: ownership was confirmed this recently: a tiny document's steps follow each other in
#: milliseconds, and a cancel is promised within 2 s (docs/architecture.md), which a check every
#: quarter second keeps with room to spare. The commit of a result always reads it again.
RECHECK_SECONDS = 0.25
# What an attempt's ownership is read from: the task's status and the attempt that holds it.
_OWNER = (task_record.STATUS, task_record.ATTEMPT_ID)
_START = scripts.load(__file__, "attempts_start", task_record.SCRIPT_NAMES)
_WRITE = scripts.load(__file__, "attempts_write", task_record.SCRIPT_NAMES)


class Superseded(Exception):
    """This attempt no longer owns its task: another attempt or run took over, or it is gone."""


class Refused(Exception):
    """The task may not start now (it is canceled, finished or failed); `status` says which."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class AttemptFence:
    """One attempt's id and the fenced writes made with it."""

    def __init__(self, connection: Redis, task_id: str) -> None:
        self.connection = connection
        self.task_id = task_id
        self.key = keys.task(task_id)
        self.attempt_id = secrets.token_hex(8)
        self.attempt = 0
        self.prefetched: list[Any] = []
        #: When this attempt last saw (time.monotonic()) that it owns the running task; 0: never.
        self.confirmed = 0.0

    def start(
        self,
        job_id: str,
        *,
        settings: Settings,
        prefetch: Callable[[Pipeline], None] | None = None,
        tenant: str | None = None,
    ) -> TaskRecord:
        """Take the task for this attempt; returns its record as it then is. The reads that
        `prefetch` queues travel in the same round trip, their replies into `prefetched` (the
        attempt's checkpoint and upload: a tiny document's attempt is a few round trips in
        all). What follows the move to `running` (jobs.tasks.transitions.changed) is queued
        behind the move in that round trip too when the caller knows the task's `tenant` (its
        job's queue says it); else, or when the record names another tenant, it is sent next.
        What follows `running` is only its announcement (it starts no webhook event and leaves
        the active sets as they are), so a start refused after it was queued costs a page one
        re-read.

        Raises Superseded (another run's job, or no record) or Refused (a status it may not
        start from, e.g. canceled just as it was dequeued).
        """
        move = states.START
        started = task_record.started(self.attempt_id, now_iso())
        followed = 0

        def build(pipe: Pipeline) -> None:
            nonlocal followed
            _START.queue(
                pipe,
                keys={"task": self.key},
                args={"first_job": self.task_id, "job": job_id, "sources": len(move.sources)},
                rest=[*move.sources, *task_record.as_argv(started)],
            )
            if tenant is not None:
                transitions.changed(pipe, tenant, self.task_id, move.target, settings=settings)
            followed = len(pipe)
            if prefetch is not None:
                prefetch(pipe)

        # The script first, then an announcement and reads: safe to send again on NOSCRIPT.
        replies = scripts.send(self.connection, build)
        self.prefetched = replies[followed:]
        reply = replies[0]
        outcome, value = reply[0].decode(), reply[1].decode()
        if outcome == "refused":
            raise Refused(value)
        if outcome != "ok":
            raise Superseded(outcome)
        self.attempt = int(value)
        self.confirmed = time.monotonic()
        taken = TaskRecord.from_hash(dict(zip(reply[2::2], reply[3::2])))
        if taken.tenant != tenant:
            after = self.connection.pipeline()
            transitions.changed(after, taken.tenant, self.task_id, move.target, settings=settings)
            after.execute()
        return taken

    def write(self, fields: dict[str, Any], ttl_seconds: int, pipe: Pipeline | None = None) -> bool:
        """Queue (on `pipe`) or send a progress write; it applies only while this attempt owns
        the running task. Sent here: True when it applied (queued: False, the reply is the
        pipeline's)."""
        return self._write(states.RUNNING, fields, ttl_seconds, pipe)

    def write_canceled(self, fields: dict[str, Any], ttl_seconds: int) -> bool:
        """The last word of this attempt, only if the cancel that stopped it was of this one;
        True when it applied."""
        return self._write(states.CANCELED, fields, ttl_seconds, None)

    def _write(
        self, owned_as: str, fields: dict[str, Any], ttl_seconds: int, pipe: Pipeline | None
    ) -> bool:
        task = {"task": self.key}
        args = {"attempt_id": self.attempt_id, "owned_as": owned_as, "ttl": ttl_seconds}
        rest = task_record.as_argv(fields)
        if pipe is not None:  # the caller's pipeline, checked by redis-py before it is sent
            _WRITE(pipe, task, args, rest=rest)
            announce(pipe, self.task_id)
            return False

        def build(own: Pipeline) -> None:  # a fenced write and an announcement: safe twice
            _WRITE.queue(own, task, args, rest=rest)
            announce(own, self.task_id)

        applied = scripts.send(self.connection, build)[0] == 1
        if applied and owned_as == states.RUNNING:
            self.confirmed = time.monotonic()
        return applied

    def check(self, pipe: Pipeline | None = None) -> None:
        """Raise CancelRequested or Superseded unless this attempt still owns the running task.

        With `pipe` (writes queued on it, e.g. a checkpoint), the check travels in the same
        round trip as those writes. Without, it is skipped when the ownership was confirmed
        less than RECHECK_SECONDS ago.
        """
        if pipe is None:
            if time.monotonic() - self.confirmed < RECHECK_SECONDS:
                return
            status, owner = self.connection.hmget(self.key, *_OWNER)
        else:
            pipe.hmget(self.key, *_OWNER)
            status, owner = pipe.execute()[-1]
        self._verify(status, owner)
        self.confirmed = time.monotonic()

    def commit(
        self,
        fields: Mapping[str, Any],
        ttl_seconds: int,
        build: Callable[[Pipeline], None] | None = None,
        *,
        watch: Iterable[str] = (),
        check: WatchedCheck | None = None,
    ) -> list[Any]:
        """Write `fields` (jobs.tasks.record's: a change of status) into the task, then
        `build`'s writes, in one MULTI, only while this attempt owns the running task.

        The task key (and `watch`) are WATCHed: if anyone changes them before EXEC, the writes
        are not applied and the ownership is checked again. `check` reads the watched keys
        first (its read goes with the WATCH and the ownership's: one round trip) and may raise
        to refuse the commit (e.g. a full knowledge base).
        """
        reads: list[Sequence[Any]] = [("HMGET", self.key, *_OWNER)]
        if check is not None:
            reads.append(check.read)
        for _ in range(COMMIT_TRIES):
            with self.connection.pipeline() as pipe:
                try:
                    # WATCH, the reads and SCRIPT EXISTS in one round trip (jobs.core.scripts)
                    replies = scripts.watch(pipe, self.key, *watch, reads=reads)
                    self._verify(*replies[0])
                    if check is not None:
                        check.judge(replies[1])
                    pipe.multi()
                    pipe.hset(self.key, mapping=dict(fields))
                    pipe.expire(self.key, ttl_seconds)
                    if build is not None:
                        build(pipe)
                    return pipe.execute()
                except WatchError:
                    continue
        raise TransientError(
            "The task's record kept changing while its result was being "
            "saved; it will be tried again.",
            code="commit_contended",
        )

    def _verify(self, status: bytes | None, owner: bytes | None) -> None:
        if owner is None or owner.decode() != self.attempt_id:
            raise Superseded("another attempt owns the task")
        current = status.decode() if status else None
        if current == states.CANCELED:
            raise CancelRequested()
        if current != states.RUNNING:
            raise Superseded(f"the task is {current or 'gone'}")
