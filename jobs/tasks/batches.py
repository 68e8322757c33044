"""Reading batches: one batch with all its tasks, a tenant's recent batches, their summaries.

Why a JSON cache lives here: a page polls a batch of 200 tasks every second or two. Each task's
JSON text is kept with the raw fields it was rendered from (`TaskJsonCache`) and reused only
when every field read now is the same, so a poll renders and serialises only what changed, and
`get_json` joins the texts into exactly the JSON `get` would give (one test holds it).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redis import Redis

from jobs.core import keys
from jobs.core.exceptions import NoSuchBatch
from jobs.core.health import ingestion_workers
from jobs.core.jsontext import compact
from jobs.tasks import eta, states
from jobs.tasks import record as task_record
from jobs.tasks import records as tasks
from jobs.tasks.record import TaskRecord

# What a batch's summary reads of each of its tasks (BatchReader.recent).
_SUMMED = (task_record.STATUS, task_record.PROGRESS, task_record.ERROR)


@dataclass(frozen=True)
class TaskJson:
    """One task's JSON text, with the raw fields it was rendered from."""

    fields: tuple[bytes | None, ...]
    status: str
    progress: int
    can_retry: bool
    text: str
    seconds: float | None = None  # how long it took, once finished (jobs.tasks.eta)


class TaskJsonCache:
    """Task JSON per task id, never stale (see the module's docstring). Bounded: the older half
    is dropped when full. A process's requests share it (greenlets or threads): a race at worst
    renders one task twice."""

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self._entries: dict[str, TaskJson] = {}
        self._lock = threading.Lock()

    def render(self, task_id: str, raw: list[bytes | None]) -> TaskJson | None:
        """The JSON of a task from its VIEW_FIELDS as read (None: no such task)."""
        fields = tuple(raw)
        entry = self._entries.get(task_id)
        if entry is not None and entry.fields == fields:
            return entry
        record = tasks.view_record(raw)
        if record is None:
            return None
        view = tasks.view(record)
        entry = TaskJson(
            fields,
            view["status"],
            view["progress"],
            view["can_retry"],
            compact(view),
            eta.seconds_taken(view),
        )
        with self._lock:
            if len(self._entries) >= self.limit:
                for old in list(itertools.islice(self._entries, self.limit // 2)):
                    del self._entries[old]
            self._entries[task_id] = entry
        return entry


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Status, counts of all six statuses, mean progress (terminal tasks count 100), and what a
    person may do with the batch as a whole: cancel what is live, retry what failed retryably."""
    counts = dict.fromkeys(states.STATUSES, 0)
    total_progress, retryable = 0, False
    for row in rows:
        counts[row["status"]] += 1
        total_progress += 100 if states.is_terminal(row["status"]) else row["progress"]
        retryable = retryable or (row["status"] == states.FAILED and row["can_retry"])
    progress = round(total_progress / len(rows)) if rows else 0
    return {
        "status": states.batch_status(counts),
        "progress": progress,
        "counts": counts,
        "can_retry": retryable,
        "can_cancel": any(counts[s] for s in states.CANCEL.sources),
    }


def view(
    batch: dict[str, str], rows: list[dict[str, Any]], workers: int | None = None
) -> dict[str, Any]:
    """A batch's JSON without its tasks (docs/architecture.md §5), from its record and its tasks'
    rows; `eta_seconds` (jobs.tasks.eta) where the workers at work are given, else null."""
    summary = summarize(rows)
    return {
        "id": batch["id"],
        "created_at": batch.get("created_at", ""),
        **summary,
        "size": len(rows),
        "poll_after_ms": tasks.poll_after_ms(summary["status"]),
        "eta_seconds": None if workers is None else eta.estimate(rows, workers),
        "url": f"/api/batches/{batch['id']}",
        "page_url": f"/batches/{batch['id']}",
    }


class BatchReader:
    """Batches of one Redis, with this process's task JSON cache."""

    def __init__(self, connection: Redis) -> None:
        self.connection = connection
        self.cache = TaskJsonCache()

    def get(
        self, tenant: str, batch_id: str, before_tasks: Callable[[int], None] | None = None
    ) -> dict[str, Any]:
        """The batch with every task: two round trips whatever its size. Raises NoSuchBatch.
        `before_tasks`: as for `get_json`."""
        head, entries = self._read(tenant, batch_id, before_tasks)
        return {**head, "tasks": [json.loads(entry.text) for entry in entries]}

    def get_json(
        self, tenant: str, batch_id: str, before_tasks: Callable[[int], None] | None = None
    ) -> str:
        """`get` as compact JSON text, joined from each task's JSON as last rendered.
        `before_tasks(count)` is called once the batch is known and before its tasks are read
        (most of a large batch's cost): a rate limit raises there (webapp.api)."""
        head, entries = self._read(tenant, batch_id, before_tasks)
        return f'{compact(head)[:-1]},"tasks":[' + ",".join(e.text for e in entries) + "]}"

    def _read(
        self,
        tenant: str,
        batch_id: str,
        before_tasks: Callable[[int], None] | None = None,
    ) -> tuple[dict[str, Any], list[TaskJson]]:
        """The batch's view without "tasks", and every task's JSON: the batch, then one
        pipelined HMGET of the view's fields per task."""
        if not tasks.is_id(batch_id):
            raise NoSuchBatch()
        pipe = self.connection.pipeline(transaction=False)
        pipe.hgetall(keys.batch(batch_id))
        pipe.lrange(keys.batch_tasks(batch_id), 0, -1)
        raw, task_ids = pipe.execute()
        batch = tasks.decode(raw)
        if batch.get("tenant") != tenant:
            raise NoSuchBatch()
        ids = [t.decode() for t in task_ids]
        if before_tasks is not None:
            before_tasks(len(ids))
        entries = [
            entry
            for entry in (
                self.cache.render(task_id, fields)
                for task_id, fields in zip(ids, tasks.load_view_fields(self.connection, ids))
            )
            if entry is not None
        ]
        rows = [
            {
                "status": e.status,
                "progress": e.progress,
                "can_retry": e.can_retry,
                "seconds": e.seconds,
            }
            for e in entries
        ]
        # The workers at work: read only when an estimate is possible (a live batch with a
        # finished document), so a finished batch's poll stays two round trips.
        live = any(row["status"] in states.LIVE for row in rows)
        workers = (
            ingestion_workers(self.connection)
            if live and any(row["seconds"] is not None for row in rows)
            else 0
        )
        return view(batch, rows, workers), entries

    def task_ids(self, tenant: str, batch_id: str) -> list[str]:
        """The ids of a batch's tasks. Raises NoSuchBatch."""
        if not tasks.is_id(batch_id):
            raise NoSuchBatch()
        pipe = self.connection.pipeline(transaction=False)
        pipe.hget(keys.batch(batch_id), "tenant")
        pipe.lrange(keys.batch_tasks(batch_id), 0, -1)
        owner, task_ids = pipe.execute()
        if owner is None or owner.decode() != tenant:
            raise NoSuchBatch()
        return [t.decode() for t in task_ids]

    def recent(self, tenant: str, *, offset: int = 0, limit: int = 20) -> dict[str, Any]:
        """Recent batches, newest first, each with its status, progress and counts."""
        ids = [
            b.decode()
            for b in self.connection.zrevrange(
                keys.tenant_batches(tenant), offset, offset + limit - 1
            )
        ]
        pipe = self.connection.pipeline(transaction=False)
        for batch_id in ids:
            pipe.hgetall(keys.batch(batch_id))
            pipe.lrange(keys.batch_tasks(batch_id), 0, -1)
        replies = pipe.execute()
        pipe = self.connection.pipeline(transaction=False)
        found = []
        for raw, task_ids in zip(replies[::2], replies[1::2]):
            if raw:
                found.append((tasks.decode(raw), task_ids))
                for task_id in task_ids:
                    pipe.hmget(keys.task(task_id.decode()), *_SUMMED)
        states_read = iter(pipe.execute())
        items = []
        for batch, task_ids in found:
            rows = []
            for row in (next(states_read) for _ in task_ids):
                if row[0] is None:  # deleted with its document: gone, never a phantom pending
                    continue
                task = TaskRecord.from_row(_SUMMED, row)
                rows.append(
                    {
                        "status": task.status,
                        "progress": task.progress,
                        "can_retry": states.can_retry(
                            task.status, json.loads(task.error or "null")
                        ),
                    }
                )
            items.append(view(batch, rows))
        total = self.connection.zcard(keys.tenant_batches(tenant))
        return {"batches": items, "offset": offset, "limit": limit, "total": total}
