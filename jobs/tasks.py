"""Task records: the plain Redis hash each document's state lives in, and the one place that
turns a record into the task JSON of DESIGN §4.

The web never unpickles RQ job meta: the worker writes the same progress into this hash in the
same round trip, so a poll is one HGETALL. The record outlives RQ's job (retention days).
"""
from __future__ import annotations

import json
import re
import secrets
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from redis import Redis

try:  # redis-py's own accelerator (requirements.txt); optional, see load_view_fields
    import hiredis as _hiredis
except ImportError:  # pragma: no cover - depends on the install
    _hiredis = None

from jobs import keys

STATUSES: tuple[str, ...] = ("pending", "running", "retrying", "succeeded", "failed", "canceled")
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "canceled"})
ACTIVE: frozenset[str] = frozenset({"pending", "running", "retrying"})
# An attempt may start from these; from `running` when RQ retries a job whose last attempt was
# lost before anyone recorded it (the attempt fence keeps the lost one from writing again).
STARTABLE: tuple[str, ...] = ("pending", "retrying", "running")
STEPS: tuple[str, ...] = ("parsing", "chunking", "embedding", "indexing")

_HEX = re.compile(r"[0-9a-f]{32}")
_INT_FIELDS = ("progress", "attempts", "max_attempts")
_WAITING = {"pending": "Waiting for a worker"}
_JSON_FIELDS = ("error", "result")
_OPTIONAL_FIELDS = ("next_attempt_at", "started_at", "ended_at")


def new_id() -> str:
    """128 random bits, hex: unguessable, so an id alone reveals nothing of other tasks."""
    return secrets.token_hex(16)


def is_id(value: str) -> bool:
    """The shape of every task and batch id: anything else names no task (nor another key)."""
    return len(value) == 32 and _HEX.fullmatch(value) is not None


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_in(seconds: float) -> str:
    moment = datetime.now(timezone.utc).timestamp() + seconds
    return datetime.fromtimestamp(moment, timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def decode(raw: Mapping[bytes, bytes]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in raw.items()}


def load(connection: Redis, task_id: str) -> dict[str, str] | None:
    """The raw record of one task, or None when there is none (unknown or expired)."""
    raw = connection.hgetall(keys.task(task_id))
    return decode(raw) if raw and b"tenant" in raw else None


def load_many(connection: Redis, task_ids: Iterable[str]) -> list[dict[str, str] | None]:
    """Records of many tasks in one pipelined round trip, in order."""
    pipe = connection.pipeline(transaction=False)
    for task_id in task_ids:
        pipe.hgetall(keys.task(task_id))
    return [decode(raw) if raw and b"tenant" in raw else None for raw in pipe.execute()]


# Every field `view` reads (and `tenant`, whose presence tells that a record exists): a batch
# reads only these, with HMGET, instead of the whole record.
VIEW_FIELDS: tuple[str, ...] = (
    "id", "tenant", "batch_id", "document_id", "filename", "status", "current_step",
    "step_detail", "created_at", "updated_at", "steps", "pipeline_version", "progress",
    "attempts", "max_attempts", "error", "result", "next_attempt_at", "started_at", "ended_at")
_TENANT = VIEW_FIELDS.index("tenant")
_VIEW_KEYS = tuple(name.encode() for name in VIEW_FIELDS)


def load_view_fields(connection: Redis, task_ids: list[str]) -> list[list[bytes | None]]:
    """VIEW_FIELDS of many tasks (raw values, None where missing) in one pipelined round trip,
    in order; `view_record` turns one into a record.

    A batch poll sends 200 HMGETs. redis-py's Pipeline spends ~20 µs of Python on each command
    (argument checks, packing, reply dispatch), more than Redis and hiredis together, so with
    hiredis the commands are packed by hiredis and the replies read straight off one pooled
    connection: the same round trip, in half the time. Without hiredis: a plain Pipeline.
    """
    if not task_ids:
        return []
    if _hiredis is None or not hasattr(connection, "connection_pool"):
        pipe = connection.pipeline(transaction=False)
        for task_id in task_ids:
            pipe.hmget(keys.task(task_id), VIEW_FIELDS)
        return pipe.execute()
    packed = b"".join(_hiredis.pack_command((b"HMGET", keys.task(task_id).encode(), *_VIEW_KEYS))
                      for task_id in task_ids)
    pool = connection.connection_pool
    conn = pool.get_connection()
    try:
        conn.send_packed_command([packed])
        return [conn.read_response() for _ in task_ids]
    except BaseException:
        conn.disconnect()  # replies may be left unread: never hand this connection out again
        raise
    finally:
        pool.release(conn)


def view_record(raw: list[bytes | None]) -> dict[str, str] | None:
    """The record `load` would give, restricted to VIEW_FIELDS (None for a missing task)."""
    if raw[_TENANT] is None:  # no tenant: unknown or expired
        return None
    return {name: value.decode() for name, value in zip(VIEW_FIELDS, raw) if value is not None}


def poll_after_ms(status: str) -> int:
    """A running task moves quickly; anything else can be polled more slowly."""
    return 1000 if status == "running" else 2000


def view(record: Mapping[str, str]) -> dict[str, Any]:
    """The task JSON of DESIGN §4, built from a raw record. The only builder of that shape."""
    task_id = record["id"]
    status = record.get("status", "pending")
    task: dict[str, Any] = {
        "id": task_id,
        "batch_id": record.get("batch_id", ""),
        "document_id": record.get("document_id", ""),
        "filename": record.get("filename", ""),
        "status": status,
        "current_step": record.get("current_step") or "queued",
        "step_detail": record.get("step_detail") or _WAITING.get(status, ""),
        "created_at": record.get("created_at", ""),
        "updated_at": record.get("updated_at") or record.get("created_at", ""),
        "steps": json.loads(record.get("steps") or "[]"),
        "pipeline_version": record.get("pipeline_version", ""),
        "poll_after_ms": poll_after_ms(status),
        "url": f"/api/tasks/{task_id}",
        "page_url": f"/tasks/{task_id}",
    }
    for name in _INT_FIELDS:
        task[name] = int(record.get(name) or 0)
    for name in _JSON_FIELDS:
        task[name] = json.loads(record[name]) if record.get(name) else None
    for name in _OPTIONAL_FIELDS:
        task[name] = record.get(name) or None
    task["status_text"] = status_text(task)
    return task


STEP_LABELS = {"queued": "Queued", "parsing": "Parsing", "chunking": "Chunking",
               "embedding": "Embedding", "indexing": "Indexing", "done": "Done",
               "waiting_retry": "Waiting to retry", "failed": "Failed", "canceled": "Canceled"}


def status_text(task: Mapping[str, Any]) -> str:
    """The words a page shows for a task's state (DESIGN §3), shared by pages and scripts."""
    status = task["status"]
    if status == "running":
        return f"{STEP_LABELS.get(task['current_step'], 'Running')} ({task['progress']} %)"
    if status == "retrying":
        return f"Attempt {task['attempts'] + 1} of {task['max_attempts']} soon"
    if status == "failed":
        reason = (task.get("error") or {}).get("message") or "unknown reason"
        return f"Failed: {reason}"
    return {"pending": "Queued", "succeeded": "Succeeded", "canceled": "Canceled"}[status]


def batch_status(counts: Mapping[str, int]) -> str:
    """pending (nothing started), running (something not terminal), else the terminal mix."""
    total = sum(counts.values())
    if total == 0 or counts["pending"] == total:
        return "pending"
    if any(counts[s] for s in ACTIVE):
        return "running"
    for status in ("succeeded", "failed", "canceled"):
        if counts[status] == total:
            return status
    return "partial"


def summarize(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Batch status, counts of all six statuses and mean progress (terminal tasks count 100)."""
    counts = dict.fromkeys(STATUSES, 0)
    total_progress = 0
    for task in tasks:
        counts[task["status"]] += 1
        total_progress += 100 if task["status"] in TERMINAL else task["progress"]
    progress = round(total_progress / len(tasks)) if tasks else 0
    return {"status": batch_status(counts), "progress": progress, "counts": counts}
