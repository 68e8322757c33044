"""GET /api/batches/<id>/events: a batch's changes pushed as Server-Sent Events
(docs/architecture.md §5).

Why a stream at all: a page of 200 documents would otherwise poll the whole batch every second.
Here the page is sent only what changed: an `event: task` per task whose state moved, an
`event: batch` when the summary moved.

Why it costs almost nothing while nothing changes: a stream reads Redis once, when it opens;
after that it waits on its batch's watcher (webapp.watchers), which the process's one
subscription to the workers' announcements wakes, with one read of a changed batch for every
stream watching it. Under the Procfile's gevent workers an open stream is a greenlet, not a
thread. A stream still ends after `EVENTS_MAX_SECONDS` (25 s, under the Procfile's 30 s graceful
timeout, so a deploy never waits on streams) and starts with a `retry:` hint; EventSource
reconnects by itself. Each stream's own bound is drawn between 84 % and 100 % of that (21–25 s): a
thousand pages opened together (a deploy, a benchmark) do not all reconnect in the same second.
A stream ends at once when the batch (or, with `?task=<id>`, that task) is terminal, after
sending the final state, so a finished page stops. Each connection starts with the whole current
state: a reconnect costs what one poll costs.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, Response, current_app, request, stream_with_context

from jobs import BATCH_LIVE, TERMINAL, Intake, NoSuchBatch, compact_json
from webapp import limits, tenancy
from webapp.errors import ApiError
from webapp.extensions import intake
from webapp.ids import is_id
from webapp.watchers import GONE, Broadcaster

bp = Blueprint("events", __name__, url_prefix="/api")

# What a person can see change on a page; `updated_at` also moves the "no progress" hint.
WATCHED = (
    "status",
    "progress",
    "current_step",
    "step_detail",
    "attempts",
    "updated_at",
    "error",
    "next_attempt_at",
)
BATCH_FIELDS = (
    "id",
    "status",
    "progress",
    "counts",
    "size",
    "poll_after_ms",
    "can_retry",
    "can_cancel",
    "eta_seconds",
)


@dataclass(frozen=True)
class Timing:
    """How long a stream lasts, when it sends a heartbeat, how soon a client reconnects."""

    max_seconds: float = 25.0
    heartbeat_seconds: float = 10.0
    retry_ms: int = 2000
    #: A stream lasts max_seconds × (1 - spread × a random number in [0, 1)).
    spread: float = 0.16  # 21–25 s: two heartbeats fit in the shortest

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Timing:
        """Tests shorten the timing with EVENTS_* keys in the app's config mapping."""
        return cls(
            max_seconds=float(config.get("EVENTS_MAX_SECONDS", cls.max_seconds)),
            heartbeat_seconds=float(config.get("EVENTS_HEARTBEAT_SECONDS", cls.heartbeat_seconds)),
            retry_ms=int(config.get("EVENTS_RETRY_MS", cls.retry_ms)),
        )


def broadcaster(service: Intake, config: Mapping[str, Any]) -> Broadcaster:
    """The app's Broadcaster: it reads a batch as GET /api/batches/<id> does."""

    def read(tenant: str, batch_id: str) -> dict[str, Any] | None:
        try:
            return service.batches.get(tenant, batch_id)
        except NoSuchBatch:  # expired or deleted meanwhile
            return None

    return Broadcaster(
        lambda: service.connection,
        read,
        min_interval=float(config.get("EVENTS_MIN_INTERVAL_SECONDS", 0.25)),
        refresh_seconds=float(config.get("EVENTS_REFRESH_SECONDS", 15.0)),
    )


@bp.get("/batches/<hexid:batch_id>/events")
def batch_events(batch_id: str) -> Response:
    """Scoped like GET /api/batches/<id>: an unknown or another tenant's batch is a JSON 404.
    Each open reads the whole batch: a large one's is an expensive read (webapp.limits), 429
    past the limit."""
    tenant, service = tenancy.current_tenant(), intake()
    # NoSuchBatch: a JSON 404 (webapp.errors)
    batch = service.batches.get(tenant, batch_id, limits.batch_meter(tenant, "event streams"))
    only = request.args.get("task") or None
    if only is not None and (not is_id(only) or not any(t["id"] == only for t in batch["tasks"])):
        raise ApiError(404, "not_found", "No such task in this batch.")
    watchers: Broadcaster = current_app.extensions["watchers"]
    stream = BatchStream(Timing.from_config(current_app.config), only)
    response = Response(
        stream_with_context(watched(watchers, tenant, batch_id, batch, stream)),
        mimetype="text/event-stream",
    )
    response.headers["X-Accel-Buffering"] = "no"  # a proxy (nginx) must pass events at once
    return response


def watched(
    watchers: Broadcaster, tenant: str, batch_id: str, batch: dict[str, Any], stream: BatchStream
) -> Iterator[str]:
    """The stream's events, its watcher held while it is open and let go however it ends."""
    watcher = watchers.watch(tenant, batch_id, batch)
    seen = 0

    def next_batch(timeout: float) -> dict[str, Any] | None:
        nonlocal seen
        seen, snapshot = watcher.wait(seen, timeout)
        return None if snapshot is GONE else snapshot

    try:
        yield from stream.events(batch, next_batch)
    finally:
        watchers.unwatch(watcher)


def message(event: str, payload: Any) -> str:
    """One SSE message; compact JSON has no newline, so one `data:` line carries it."""
    return f"event: {event}\ndata: {compact_json(payload)}\n\n"


class BatchStream:
    """The changes of one batch since the stream began, as SSE text."""

    def __init__(
        self,
        timing: Timing,
        only_task: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timing, self.only_task, self.clock = timing, only_task, clock
        self.lifetime = timing.max_seconds * (1 - timing.spread * random.random())
        self.sent_tasks: dict[str, tuple] = {}
        self.sent_batch: tuple | None = None

    def events(
        self, batch: dict[str, Any], next_batch: Callable[[float], dict[str, Any] | None]
    ) -> Iterator[str]:
        """Yield the retry hint, then the changes of each new state `next_batch(timeout)` gives
        (the same state again when nothing changed within `timeout`; None: the batch is gone),
        heartbeats when quiet, and stop at a terminal state or when the time is up."""
        yield f"retry: {self.timing.retry_ms}\n\n"
        started = last_sent = self.clock()
        while True:
            changes = self.changes(batch)
            now = self.clock()
            if changes:
                yield changes
                last_sent = now
            if self.finished(batch) or now - started >= self.lifetime:
                return
            if now - last_sent >= self.timing.heartbeat_seconds:
                yield ": ping\n\n"
                last_sent = now
            wait = min(
                self.timing.heartbeat_seconds - (now - last_sent), self.lifetime - (now - started)
            )
            following = next_batch(max(wait, 0.01))
            if following is None:  # expired or deleted meanwhile
                return
            batch = following

    def changes(self, batch: dict[str, Any]) -> str:
        """SSE text for every task whose watched fields moved, then the summary if it moved."""
        parts = []
        for task in batch["tasks"]:
            if self.only_task is not None and task["id"] != self.only_task:
                continue
            mark = tuple(task.get(name) for name in WATCHED)  # `error` is a dict: == compares it
            if self.sent_tasks.get(task["id"]) != mark:
                self.sent_tasks[task["id"]] = mark
                parts.append(message("task", task))
        summary: dict[str, Any] = {name: batch.get(name) for name in BATCH_FIELDS}
        mark = (summary["status"], summary["progress"], tuple(sorted(summary["counts"].items())))
        if mark != self.sent_batch:
            self.sent_batch = mark
            parts.append(message("batch", summary))
        return "".join(parts)

    def finished(self, batch: dict[str, Any]) -> bool:
        if self.only_task is None:
            return batch["status"] not in BATCH_LIVE
        return any(t["id"] == self.only_task and t["status"] in TERMINAL for t in batch["tasks"])
