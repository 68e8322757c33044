"""Registering uploaded documents as tasks: idempotency claims, records, bytes and RQ jobs.

A submit never parses: it stores the bytes, writes a record per new task and enqueues one job
per document, in two round trips whatever the number of files (one script that checks the
limits and claims every file, then the batch records and the jobs), so 200 files are accepted
in milliseconds.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from redis import Redis
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

# Registers a whole batch at once, or nothing: first the limits (tasks waiting, all tenants and
# this tenant; upload bytes waiting), then each file's idempotency claim. A file whose key has
# an active or succeeded task reuses it; otherwise (failed, canceled, force) its new task is
# written completely before the claim is visible, so a concurrent submit reuses it.
# KEYS: active set, tenant's active set, blob byte counter, blob sizes, then for each file its
#       idempotency key, task key, blob key and the document's set of tasks.
# ARGV: force, ttl, task key prefix, score, queue limit, tenant limit, blob budget, then for
#       each file its new task id, upload bytes and record (a JSON object of strings).
# Returns {'ok', id1, status1, id2, status2, …} (status '' for a new task) or {limit name}.
_SUBMIT = """
local files = (#ARGV - 7) / 3
local bytes = 0
for i = 0, files - 1 do bytes = bytes + string.len(ARGV[9 + 3 * i]) end
if redis.call('ZCARD', KEYS[1]) + files > tonumber(ARGV[5]) then return {'queue_full'} end
if redis.call('ZCARD', KEYS[2]) + files > tonumber(ARGV[6]) then return {'tenant_full'} end
if tonumber(redis.call('GET', KEYS[3]) or '0') + bytes > tonumber(ARGV[7]) then
  return {'blob_budget'}
end
local out = {'ok'}
for i = 0, files - 1 do
  local idem, task, blob, document = KEYS[5 + 4 * i], KEYS[6 + 4 * i], KEYS[7 + 4 * i],
                                     KEYS[8 + 4 * i]
  local id, data, record = ARGV[8 + 3 * i], ARGV[9 + 3 * i], ARGV[10 + 3 * i]
  local current = redis.call('GET', idem)
  local status = false
  if current and ARGV[1] ~= '1' then status = redis.call('HGET', ARGV[3] .. current, 'status') end
  if status == 'pending' or status == 'running' or status == 'retrying' or status == 'succeeded' then
    out[#out + 1] = current
    out[#out + 1] = status
  else
    local fields = {}
    for name, value in pairs(cjson.decode(record)) do
      fields[#fields + 1] = name
      fields[#fields + 1] = value
    end
    redis.call('SET', idem, id, 'EX', ARGV[2])
    redis.call('HSET', task, unpack(fields))
    redis.call('EXPIRE', task, ARGV[2])
    redis.call('SET', blob, data, 'EX', ARGV[2])
    redis.call('ZADD', KEYS[1], ARGV[4], id)
    redis.call('ZADD', KEYS[2], ARGV[4], id)
    redis.call('INCRBY', KEYS[3], string.len(data))
    redis.call('HSET', KEYS[4], id, string.len(data))
    redis.call('SADD', document, id)
    redis.call('EXPIRE', document, ARGV[2])
    out[#out + 1] = id
    out[#out + 1] = ''
  end
end
return out
"""


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
    """Create a batch of tasks (reusing duplicates) and enqueue one job per new task.

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
    keys_, args = [keys.active(), keys.tenant_active(tenant), keys.blob_bytes(),
                   keys.blob_sizes()], []
    for digest, upload in firsts.items():
        task_id = new_id()
        keys_ += [keys.idempotency(digest), keys.task(task_id), keys.blob(task_id),
                  keys.document_tasks(tenant, upload.document_id)]
        args += [task_id, upload.data, _task_fields(task_id, upload, digest, **record)]
    reply = connection.eval(_SUBMIT, len(keys_), *keys_, "1" if force else "0", ttl,
                            keys.TASK_PREFIX, time.time(), settings.queue_limit,
                            settings.tenant_queue_limit, settings.blob_budget_bytes, *args)
    if reply[0] != b"ok":
        raise LimitReached(reply[0].decode())
    entries, job_datas = [], []
    for upload, task_id, existing in zip(firsts.values(), reply[1::2], reply[2::2]):
        task_id, existing = task_id.decode(), existing.decode()
        entries.append({"id": task_id, "document_id": upload.document_id,
                        "filename": upload.filename, "status": existing or "pending",
                        "duplicate": bool(existing)})
        if not existing:
            job_datas.append(job_data(task_id, settings))

    # No MULTI: nothing here needs to be atomic (every task is complete already, and a job
    # without its batch is still a job), and MULTI costs a reply per queued command.
    pipe = connection.pipeline(transaction=False)
    pipe.hset(keys.batch(batch_id), mapping={"id": batch_id, "tenant": tenant,
                                            "created_at": created_at, "size": len(entries)})
    pipe.expire(keys.batch(batch_id), ttl)
    pipe.rpush(keys.batch_tasks(batch_id), *[e["id"] for e in entries])
    pipe.expire(keys.batch_tasks(batch_id), ttl)
    pipe.zadd(keys.tenant_batches(tenant), {batch_id: time.time()})
    if job_datas:
        metrics.count(pipe, "tasks_submitted_total", len(job_datas), queue=queue.name)
        queue.enqueue_many(job_datas, pipeline=pipe)
    pipe.execute()
    for entry in entries:
        logs.event("task_submitted" if not entry["duplicate"] else "duplicate_submitted",
                   {"id": entry["id"], "batch_id": batch_id, "tenant": tenant,
                    "trace_id": record["trace_id"]}, document_id=entry["document_id"])
    return {"batch_id": batch_id, "created_at": created_at, "tasks": entries}


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
                 **record: str) -> str:
    """The new task's record for the claim script; what tasks.view defaults is left out."""
    fields = {
        "id": task_id, **record, "document_id": upload.document_id,
        "filename": upload.filename, "kind": upload.kind, "size": len(upload.data),
        "status": "pending", "max_attempts": settings.max_attempts, "idempotency": digest,
        "version": time.time_ns() // 1000,
    }
    return json.dumps({name: str(value) for name, value in fields.items()})
