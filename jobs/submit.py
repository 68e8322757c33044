"""Registering uploaded documents as tasks: idempotency claims, records, bytes and RQ jobs.

A submit never parses: it stores the bytes, writes a record per new task and enqueues one job
per document, in one round trip whatever the number of files (one script that checks the
limits, claims every file and registers what is new, jobs included), so 200 files are accepted
in milliseconds and a task never exists without its job.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from itertools import chain
from typing import Any

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import NoScriptError
from rq import Queue, Retry
from rq.queue import EnqueueData

from jobs import keys, logs, metrics
from jobs.failures import backoff_delays
from jobs.settings import PRIORITY_QUEUES, Settings
from jobs.tasks import new_id, now_iso

JOB_FUNCTION = "jobs.pipeline.ingest_document"
SMALL_UPLOAD_FILES = 3    # this many files or fewer: intake-high, so one person's file is quick
BULK_UPLOAD_FILES = 50    # this many or more: intake-bulk, so a backlog never starves the rest
RESULT_TTL_SECONDS = 3600

# Registers a whole batch at once, or nothing, in one round trip: first the limits (tasks
# waiting, all tenants and this tenant; upload bytes waiting), then each file's idempotency
# claim. A file whose key has an active or succeeded task reuses it; otherwise (failed,
# canceled, force) the script writes the new task (record, bytes, accounting) and replays its
# RQ job's enqueue, recorded from RQ itself (see `_recorded`). Last, the batch: its task list
# (reused ids included) and its recorded records.
# Replayed commands name their keys in ARGV, which standalone Redis allows (RQ has no Cluster
# support either).
# KEYS: active set, tenant's active set, blob byte counter, blob sizes, the batch's task list,
#       then for each file its idempotency key, task key, blob key and the document's task set.
# ARGV: force, ttl, task key prefix, score, queue limit, tenant limit, blob budget, file count,
#       then for each file its new task id, upload bytes, record (its number of fields, then
#       the fields and values) and recorded commands, then the batch's recorded commands.
#       Recorded commands: their count, then for each command its number of arguments and the
#       arguments.
# Returns {'ok', id1, status1, id2, status2, …} (status '' for a new task) or {limit name}.
_SUBMIT = """
local function skip(at)
  local commands = tonumber(ARGV[at])
  at = at + 1
  for _ = 1, commands do at = at + 1 + tonumber(ARGV[at]) end
  return at
end
local function replay(at)
  local commands = tonumber(ARGV[at])
  at = at + 1
  for _ = 1, commands do
    local argc = tonumber(ARGV[at])
    redis.call(unpack(ARGV, at + 1, at + argc))
    at = at + 1 + argc
  end
end
local files, at, starts, bytes = tonumber(ARGV[8]), 9, {}, 0
for i = 1, files do
  starts[i] = at
  bytes = bytes + string.len(ARGV[at + 1])
  at = skip(at + 3 + 2 * tonumber(ARGV[at + 2]))
end
if redis.call('ZCARD', KEYS[1]) + files > tonumber(ARGV[5]) then return {'queue_full'} end
if redis.call('ZCARD', KEYS[2]) + files > tonumber(ARGV[6]) then return {'tenant_full'} end
if tonumber(redis.call('GET', KEYS[3]) or '0') + bytes > tonumber(ARGV[7]) then
  return {'blob_budget'}
end
local ttl, out, ids = ARGV[2], {'ok'}, {}
for i = 1, files do
  local idem, task, blob, document = KEYS[2 + 4 * i], KEYS[3 + 4 * i], KEYS[4 + 4 * i],
                                     KEYS[5 + 4 * i]
  local id, data, fields = ARGV[starts[i]], ARGV[starts[i] + 1], tonumber(ARGV[starts[i] + 2])
  local current = redis.call('GET', idem)
  local status = false
  if current and ARGV[1] ~= '1' then status = redis.call('HGET', ARGV[3] .. current, 'status') end
  if status == 'pending' or status == 'running' or status == 'retrying' or status == 'succeeded' then
    id = current
  else
    redis.call('SET', idem, id, 'EX', ttl)
    redis.call('HSET', task, unpack(ARGV, starts[i] + 3, starts[i] + 2 + 2 * fields))
    redis.call('EXPIRE', task, ttl)
    redis.call('SET', blob, data, 'EX', ttl)
    redis.call('ZADD', KEYS[1], ARGV[4], id)
    redis.call('ZADD', KEYS[2], ARGV[4], id)
    redis.call('INCRBY', KEYS[3], string.len(data))
    redis.call('HSET', KEYS[4], id, string.len(data))
    redis.call('SADD', document, id)
    redis.call('EXPIRE', document, ttl)
    replay(starts[i] + 3 + 2 * fields)
    status = ''
  end
  ids[i] = id
  out[#out + 1] = id
  out[#out + 1] = status
end
for i = 1, #ids, 1000 do redis.call('RPUSH', KEYS[5], unpack(ids, i, math.min(i + 999, #ids))) end
redis.call('EXPIRE', KEYS[5], ttl)
replay(at)
return out
"""
_SUBMIT_SHA = hashlib.sha1(_SUBMIT.encode()).hexdigest()


class LimitReached(Exception):
    """A submit refused whole because a limit would be passed: nothing was registered."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


@dataclass(frozen=True)
class Upload:
    """One accepted file: checked and named by the web layer, not yet parsed."""

    filename: str
    document_id: str
    data: bytes
    kind: str


def choose_queue(file_count: int, priority: str | None) -> str:
    """An explicit priority wins; otherwise small uploads go first and large batches go last."""
    if priority in PRIORITY_QUEUES:
        return PRIORITY_QUEUES[priority]
    if file_count <= SMALL_UPLOAD_FILES:
        return PRIORITY_QUEUES["high"]
    if file_count >= BULK_UPLOAD_FILES:
        return PRIORITY_QUEUES["bulk"]
    return PRIORITY_QUEUES["normal"]


def idempotency_digest(tenant: str, document_id: str, sha256: str, pipeline_version: str) -> str:
    material = json.dumps([tenant, document_id, sha256, pipeline_version])
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def submit_documents(connection: Redis, queues: dict[str, Queue], settings: Settings,
                     tenant: str, uploads: list[Upload], *, pipeline_version: str,
                     priority: str | None = None, force: bool = False,
                     trace_id: str | None = None) -> dict[str, Any]:
    """Create a batch of tasks (reusing duplicates) and enqueue one job per new task, in one
    round trip: a task never exists without its job, nor a job without its task and batch.

    `trace_id` (the upload request's) is kept in each new task, for the logs of its worker.
    """
    ttl = settings.retention_seconds
    batch_id, created_at = new_id(), now_iso()
    firsts: dict[str, Upload] = {}
    for upload in uploads:  # the same file twice in one request is one task
        digest = idempotency_digest(tenant, upload.document_id,
                                    hashlib.sha256(upload.data).hexdigest(), pipeline_version)
        firsts.setdefault(digest, upload)
    queue = queues[choose_queue(len(firsts), priority)]
    record = {"tenant": tenant, "batch_id": batch_id, "created_at": created_at,
              "queue": queue.name, "settings": settings, "pipeline_version": pipeline_version,
              "trace_id": trace_id or batch_id}
    keys_ = [keys.active(), keys.tenant_active(tenant), keys.blob_bytes(), keys.blob_sizes(),
             keys.batch_tasks(batch_id)]
    args: list[Any] = ["1" if force else "0", ttl, keys.TASK_PREFIX, time.time(),
                       settings.queue_limit, settings.tenant_queue_limit,
                       settings.blob_budget_bytes, len(firsts)]
    recorder = connection.pipeline(transaction=False)
    for digest, upload in firsts.items():
        task_id = new_id()
        keys_ += [keys.idempotency(digest), keys.task(task_id), keys.blob(task_id),
                  keys.document_tasks(tenant, upload.document_id)]
        fields = _task_fields(task_id, upload, digest, **record)
        args += [task_id, upload.data, len(fields), *chain.from_iterable(fields.items())]
        metrics.count(recorder, "tasks_submitted_total", queue=queue.name)
        queue.enqueue_many([job_data(task_id, settings)], pipeline=recorder)
        args += _recorded(recorder)
    recorder.hset(keys.batch(batch_id), mapping={"id": batch_id, "tenant": tenant,
                                                "created_at": created_at, "size": len(firsts)})
    recorder.expire(keys.batch(batch_id), ttl)
    recorder.zadd(keys.tenant_batches(tenant), {batch_id: time.time()})
    args += _recorded(recorder)
    reply = _run_script(connection, keys_, args)
    if reply[0] != b"ok":
        raise LimitReached(reply[0].decode())
    entries = []
    for upload, task_id, existing in zip(firsts.values(), reply[1::2], reply[2::2]):
        task_id, existing = task_id.decode(), existing.decode()
        entries.append({"id": task_id, "document_id": upload.document_id,
                        "filename": upload.filename, "status": existing or "pending",
                        "duplicate": bool(existing)})
        logs.event("task_submitted" if not existing else "duplicate_submitted",
                   {"id": task_id, "batch_id": batch_id, "tenant": tenant,
                    "trace_id": record["trace_id"]}, document_id=upload.document_id)
    return {"batch_id": batch_id, "created_at": created_at, "tasks": entries}


def _recorded(recorder: Pipeline) -> list[Any]:
    """The commands queued on `recorder` since the last call (it is never sent), flattened for
    the submit script to replay: their count, then each one's number of arguments and its
    arguments.

    Recording lets RQ build its own enqueue, whatever its version writes, while the script
    decides whether it happens; nothing is sent until the script runs.
    """
    flat: list[Any] = [len(recorder.command_stack)]
    for command, _options in recorder.command_stack:
        flat.append(len(command))
        flat.extend(command)
    recorder.command_stack.clear()
    return flat


def _run_script(connection: Redis, keys_: list[str], args: list[Any]) -> list[bytes]:
    """EVALSHA: the script's text is sent only the first time a server lacks it."""
    try:
        return connection.evalsha(_SUBMIT_SHA, len(keys_), *keys_, *args)
    except NoScriptError:
        connection.script_load(_SUBMIT)
        return connection.evalsha(_SUBMIT_SHA, len(keys_), *keys_, *args)


def job_data(task_id: str, settings: Settings) -> EnqueueData:
    """The RQ job of one run of a task: its id is the task's, its retries are its own.

    Every TTL is explicit (RQ ignores Queue-level ones) and the retry delays are a per-job list
    of jittered exponential whole seconds (RQ has neither jitter nor a backoff factor).
    """
    delays = backoff_delays(settings.max_attempts, settings.retry_base_seconds)
    ttl = settings.retention_seconds
    return Queue.prepare_data(
        JOB_FUNCTION, args=(task_id,), job_id=task_id, timeout=settings.job_timeout,
        result_ttl=RESULT_TTL_SECONDS, failure_ttl=ttl, ttl=ttl,
        retry=Retry(max=len(delays), interval=delays) if delays else None)


def _task_fields(task_id: str, upload: Upload, digest: str, *, settings: Settings,
                 **record: str) -> dict[str, Any]:
    """The new task's record for the submit script; what tasks.view defaults is left out."""
    fields = {
        "id": task_id, **record, "document_id": upload.document_id,
        "filename": upload.filename, "kind": upload.kind, "size": len(upload.data),
        "status": "pending", "max_attempts": settings.max_attempts, "idempotency": digest,
        "version": time.time_ns() // 1000,
    }
    return fields
