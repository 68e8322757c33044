"""Intake: the domain's public face for the web layer, one instance per web process.

It holds what a process should build once (queues, the search cache, the query embedder) and
answers every read in a fixed, small number of Redis round trips.
"""
from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from redis import Redis
from rq import Queue, Worker

from jobs import index, keys, lifecycle, tasks
from jobs.embedding import Embedder, SparseRows, make_embedder
from jobs.settings import QUEUE_NAMES, Settings
from jobs.submit import Upload, submit_documents
from jobs.versions import pipeline_version

MAX_SEARCH_K = 50


def compact_json(value: Any) -> str:
    """The API's JSON text: compact, ASCII (webapp.api.json_response writes the same)."""
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class TaskJson:
    """One task's JSON text, with the raw fields it was rendered from."""

    fields: tuple[bytes | None, ...]
    status: str
    progress: int
    text: str


class TaskJsonCache:
    """Task JSON kept per task id with the raw fields it came from, so that polling a batch
    of 200 renders and serialises only the tasks whose fields changed since the last poll.

    A cached text is reused only when every field read now equals the field it was built
    from, so it is never stale; `tasks.view` is a pure function of those fields. Bounded: the
    older half is dropped when full. Threads share it (gunicorn's gthread): a race at worst
    renders one task twice.
    """

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
        entry = TaskJson(fields, view["status"], view["progress"], compact_json(view))
        with self._lock:
            if len(self._entries) >= self.limit:
                for old in list(itertools.islice(self._entries, self.limit // 2)):
                    del self._entries[old]
            self._entries[task_id] = entry
        return entry


class Intake:
    """Submit documents and read tasks, batches and search results, scoped by tenant."""

    def __init__(self, connection: Redis, settings: Settings) -> None:
        self.connection = connection
        self.settings = settings
        self.queues = {name: Queue(name, connection=connection) for name in QUEUE_NAMES}
        self.search_index = index.SearchIndex(connection)
        self.task_json = TaskJsonCache()
        self._embedder: Embedder | None = None

    @cached_property
    def pipeline_version(self) -> str:
        """Settings never change in a process: worked out once, not hashed on every submit."""
        return pipeline_version(self.settings)

    def submit(self, tenant: str, uploads: list[Upload], *, priority: str | None = None,
               force: bool = False, trace_id: str | None = None) -> dict[str, Any]:
        return submit_documents(self.connection, self.queues, self.settings, tenant, uploads,
                                pipeline_version=self.pipeline_version, priority=priority,
                                force=force, trace_id=trace_id)

    def get_task(self, tenant: str, task_id: str) -> dict[str, Any] | None:
        """One HGETALL. Another tenant's task reads as missing."""
        if not tasks.is_id(task_id):
            return None
        record = tasks.load(self.connection, task_id)
        if record is None or record.get("tenant") != tenant:
            return None
        return tasks.view(record)

    def get_batch(self, tenant: str, batch_id: str) -> dict[str, Any] | None:
        """The batch with every task: two round trips whatever its size."""
        found = self._batch_tasks_json(tenant, batch_id)
        if found is None:
            return None
        head, entries = found
        return {**head, "tasks": [json.loads(entry.text) for entry in entries]}

    def get_batch_json(self, tenant: str, batch_id: str) -> str | None:
        """`get_batch` as compact JSON text (what json.dumps(…, separators=(",", ":")) gives),
        built from each task's JSON as last rendered: a poll serialises only what changed."""
        found = self._batch_tasks_json(tenant, batch_id)
        if found is None:
            return None
        head, entries = found
        return (f'{compact_json(head)[:-1]},"tasks":['
                + ",".join(entry.text for entry in entries) + "]}")

    def _batch_tasks_json(self, tenant: str, batch_id: str,
                          ) -> tuple[dict[str, Any], list[TaskJson]] | None:
        """The batch's view without "tasks", and every task's JSON: two round trips (the batch,
        then one pipelined HMGET of the view's fields per task)."""
        if not tasks.is_id(batch_id):
            return None
        pipe = self.connection.pipeline(transaction=False)
        pipe.hgetall(keys.batch(batch_id))
        pipe.lrange(keys.batch_tasks(batch_id), 0, -1)
        raw, task_ids = pipe.execute()
        batch = tasks.decode(raw)
        if batch.get("tenant") != tenant:
            return None
        ids = [t.decode() for t in task_ids]
        entries = [entry for entry in (self.task_json.render(task_id, fields) for task_id, fields
                                       in zip(ids, tasks.load_view_fields(self.connection, ids)))
                   if entry is not None]
        light = [{"status": entry.status, "progress": entry.progress} for entry in entries]
        return self._batch_view(batch, light), entries

    def list_batches(self, tenant: str, *, offset: int = 0, limit: int = 20) -> dict[str, Any]:
        """Recent batches, newest first, each with its status, progress and counts."""
        ids = [b.decode() for b in self.connection.zrevrange(
            keys.tenant_batches(tenant), offset, offset + limit - 1)]
        pipe = self.connection.pipeline(transaction=False)
        for batch_id in ids:
            pipe.hgetall(keys.batch(batch_id))
            pipe.lrange(keys.batch_tasks(batch_id), 0, -1)
        replies = pipe.execute()
        pipe = self.connection.pipeline(transaction=False)
        batches = []
        for raw, task_ids in zip(replies[::2], replies[1::2]):
            if raw:
                batches.append((tasks.decode(raw), task_ids))
                for task_id in task_ids:
                    pipe.hmget(keys.task(task_id.decode()), "status", "progress")
        states = iter(pipe.execute())
        items = []
        for batch, task_ids in batches:
            rows = [next(states) for _ in task_ids]
            # A task deleted with its document is gone from the batch, never a phantom pending.
            light = [{"status": s.decode(), "progress": int(p or 0)} for s, p in rows
                     if s is not None]
            items.append(self._batch_view(batch, light))
        total = self.connection.zcard(keys.tenant_batches(tenant))
        return {"batches": items, "offset": offset, "limit": limit, "total": total}

    def _batch_view(self, batch: dict[str, str], task_views: list[dict[str, Any]]
                    ) -> dict[str, Any]:
        summary = tasks.summarize(task_views)
        view = {"id": batch["id"], "created_at": batch.get("created_at", ""), **summary,
                "size": len(task_views), "poll_after_ms": tasks.poll_after_ms(summary["status"]),
                "url": f"/api/batches/{batch['id']}", "page_url": f"/batches/{batch['id']}"}
        return view

    def cancel(self, tenant: str, task_id: str) -> tuple[str, str]:
        """('ok' | 'missing' | 'conflict', previous status)."""
        if not tasks.is_id(task_id):
            return "missing", ""
        return lifecycle.cancel_task(self.connection, self.settings, tenant, task_id)

    def retry(self, tenant: str, task_id: str) -> tuple[str, str]:
        """('ok' | 'missing' | 'conflict' | 'not_retryable' | 'upload_expired', previous)."""
        if not tasks.is_id(task_id):
            return "missing", ""
        return lifecycle.retry_task(self.connection, self.queues, self.settings, tenant, task_id)

    def batch_task_ids(self, tenant: str, batch_id: str) -> list[str] | None:
        if not tasks.is_id(batch_id):
            return None
        pipe = self.connection.pipeline(transaction=False)
        pipe.hget(keys.batch(batch_id), "tenant")
        pipe.lrange(keys.batch_tasks(batch_id), 0, -1)
        owner, task_ids = pipe.execute()
        if owner is None or owner.decode() != tenant:
            return None
        return [t.decode() for t in task_ids]

    def retry_failed(self, tenant: str, task_ids: list[str]) -> dict[str, int]:
        """Retry the failed tasks among `task_ids`; failed ones that cannot be retried (a bad
        file) are skipped; tasks in other states are left alone."""
        counts = {"retried": 0, "skipped": 0}
        for record in tasks.load_many(self.connection, task_ids):
            if record is None or record.get("status") != "failed":
                continue
            outcome, _ = self.retry(tenant, record["id"])
            counts["retried" if outcome == "ok" else "skipped"] += 1
        return counts

    def cancel_many(self, tenant: str, task_ids: list[str]) -> dict[str, int]:
        canceled = sum(1 for task_id in task_ids if self.cancel(tenant, task_id)[0] == "ok")
        return {"canceled": canceled}

    def list_failed(self, tenant: str | None, *, offset: int = 0,
                    limit: int = 50) -> dict[str, Any]:
        """Dead letters, newest first: one tenant's, or every tenant's (tenant None)."""
        key = keys.tenant_failed(tenant) if tenant is not None else keys.failed_all()
        ids = [t.decode() for t in self.connection.zrevrange(key, offset, offset + limit - 1)]
        records = tasks.load_many(self.connection, ids)
        failed = [tasks.view(r) for r in records if r is not None and r.get("status") == "failed"]
        return {"tasks": failed, "offset": offset, "limit": limit,
                "total": self.connection.zcard(key)}

    def delete_document(self, tenant: str, document_id: str) -> bool:
        return lifecycle.delete_document(self.connection, self.settings, tenant, document_id)

    def dead_letter_count(self) -> int:
        return self.connection.zcard(keys.failed_all())

    def search(self, tenant: str, query: str, k: int = 10) -> list[dict[str, Any]]:
        """Top-k chunks of the tenant's succeeded documents."""
        if self._embedder is None:
            self._embedder = make_embedder(self.settings)
        embedded = self._embedder.embed([query])
        # The index takes one sparse row as is, or one dense vector.
        vector = embedded if isinstance(embedded, SparseRows) else embedded[0]
        return self.search_index.search(tenant, vector, max(1, min(k, MAX_SEARCH_K)))

    def health(self) -> dict[str, Any]:
        """Redis, workers, queue depths and whether a scheduler holds its lock."""
        self.connection.ping()
        workers = Worker.all(connection=self.connection)
        pipe = self.connection.pipeline(transaction=False)
        for name in QUEUE_NAMES:
            pipe.llen(f"rq:queue:{name}")
            pipe.exists(f"rq:scheduler-lock:{name}")
        replies = pipe.execute()
        return {
            "redis": "ok",
            "workers": {"count": len(workers), "names": sorted(w.name for w in workers)},
            "queues": {name: replies[2 * i] for i, name in enumerate(QUEUE_NAMES)},
            "scheduler": any(replies[1::2]),
        }
