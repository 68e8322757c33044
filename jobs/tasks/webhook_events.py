"""Webhook events (docs/architecture.md §14): what is recorded when a task finishes or a batch
completes, and the delivery job queued with it.

Recorded only with INTAKE_WEBHOOK_URL set: otherwise nothing here runs and nothing is written.
Every event is recorded in the same MULTI as the status change that causes it
(jobs.tasks.states.changed): one Lua script copies the task's record as it is now into the event
(so a later Retry does not change what `task.failed` says) and indexes it for its tenant, and
the event's RQ job (jobs.webhooks.deliver, queue `intake-webhooks`) is enqueued beside it, so
an event is never lost nor sent before it is recorded, and nothing of it runs in the request
or in the pipeline's attempt.

A batch is complete once no task it lists is live. Each batch submitted with webhooks on keeps
the set of its live tasks (`keys.batch_live`), and each such task the batches waiting for it
(`keys.task_batches`: its own, and a later batch that reused it as a duplicate while it was
live). A task that finishes leaves those sets in the same script; the one that empties a set
records its batch's `batch.completed`, whose delivery job the task event's job enqueues
(jobs.webhooks.delivery). A Retry puts the task back in them. A batch whose tasks were all finished
duplicates is complete at submit.
"""

from __future__ import annotations

import time
from typing import Any

from redis import Redis
from redis.client import Pipeline
from rq import Queue, Retry
from rq.queue import EnqueueData
from rq.registry import ScheduledJobRegistry

from jobs.core import keys
from jobs.core.clock import now_iso
from jobs.core.failures import backoff_delays
from jobs.core.ids import new_id
from jobs.core.settings import Settings

QUEUE = "intake-webhooks"
DELIVER = "jobs.webhooks.deliver"
EVENT_TTL_SECONDS = 7 * 86400  # an event and its delivery record are kept a week
RECENT_PER_TENANT = 1000  # the newest a tenant's deliveries list keeps
RETRY_WINDOW_SECONDS = 86400  # a delivery is retried for at least a day
RETRY_CAP_SECONDS = 3600  # with at most an hour between two attempts
JOB_TIMEOUT_SECONDS = 60  # one attempt: the POST's timeout with room to spare
BATCH_COMPLETED = "batch.completed"
# Delivery statuses of an event (jobs.webhooks.delivery writes all but the first).
PENDING, DELIVERED, RETRYING, FAILED = "pending", "delivered", "retrying", "failed"


def _around(key_of: Any) -> tuple[str, str]:
    """A key's text before and after its id, for a script that derives keys from ids."""
    head, _, tail = key_of("\0").partition("\0")
    return head, tail


_BATCH_LIVE = _around(keys.batch_live)
_TASK_BATCHES = _around(keys.task_batches)
_EVENT = _around(keys.webhook_event)

# The part every script below shares: `record(key, recent, id, type, subject, fields, later)`
# writes an event once (a re-sent script finds it and writes nothing) and indexes it for its
# tenant (`later`: seconds added to its place in the index, so a batch's event lists after the
# task event that completed it).
# ARGV[1] tenant, ARGV[2] created_at, ARGV[3] now (score), ARGV[4] ttl, ARGV[5] keep.
_RECORD = """
local tenant, created_at, now, ttl, keep = ARGV[1], ARGV[2], tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5])
local function record(key, recent, id, kind, subject, fields, later)
  if redis.call('EXISTS', key) == 1 then return false end
  redis.call('HSET', key, 'id', id, 'type', kind, 'tenant', tenant, 'created_at', created_at,
             'subject', subject, 'status', 'pending', 'attempts', 0, unpack(fields))
  redis.call('EXPIRE', key, ttl)
  redis.call('ZADD', recent, now + (later or 0), id)
  redis.call('ZREMRANGEBYSCORE', recent, '-inf', now - ttl)
  redis.call('ZREMRANGEBYRANK', recent, 0, -keep - 1)
  redis.call('EXPIRE', recent, ttl)
  return true
end
"""

# KEYS: 1 task, 2 the task's batches, 3 the event, 4 the tenant's recent events.
# ARGV: 1–5 as _RECORD, 6 event id, 7 type, 8 task id, 9 an id for a batch it completes,
#       10/11 the batch-live key around its id, 12/13 the event key around its id.
# Returns the ids of the batch events it recorded.
_TASK_FINISHED = (
    _RECORD
    + """
local fields, snapshot = redis.call('HGETALL', KEYS[1]), {}
for i = 1, #fields, 2 do snapshot[fields[i]] = fields[i + 1] end
local completed = {}
if redis.call('EXISTS', KEYS[3]) == 0 then
  for _, batch in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    local live = ARGV[10] .. batch .. ARGV[11]
    if redis.call('SREM', live, ARGV[8]) == 1 and redis.call('SCARD', live) == 0 then
      local id = ARGV[9]
      if #completed > 0 then id = string.sub(id, 1, 28) .. string.format('%04x', #completed) end
      record(ARGV[12] .. id .. ARGV[13], KEYS[4], id, 'batch.completed', batch, {}, 0.001)
      completed[#completed + 1] = id
    end
  end
end
record(KEYS[3], KEYS[4], ARGV[6], ARGV[7], ARGV[8],
       {'snapshot', cjson.encode(snapshot), 'batch_events', table.concat(completed, ',')})
return completed
"""
)

# KEYS: 1 the task's batches. ARGV: 1 task id, 2 ttl, 3/4 the batch-live key around its id.
_TASK_REOPENED = """
for _, batch in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local live = ARGV[3] .. batch .. ARGV[4]
  redis.call('SADD', live, ARGV[1])
  redis.call('EXPIRE', live, ARGV[2])
end
return 1
"""

# KEYS: 1 the batch's live tasks, 2 the event, 3 the tenant's recent events.
# ARGV: 1–5 as _RECORD, 6 event id, 7 batch id, 8 task key prefix, 9/10 the task-batches key
#       around its id, 11 how many live statuses, then those, then the batch's task ids.
# Returns 1 when the batch was complete at once (its event recorded), else 0.
_BATCH_SUBMITTED = (
    _RECORD
    + """
local live, at = {}, 12
for i = 1, tonumber(ARGV[11]) do live[ARGV[at]] = true; at = at + 1 end
for i = at, #ARGV do
  local id = ARGV[i]
  if live[redis.call('HGET', ARGV[8] .. id, 'status')] then
    local waiting = ARGV[9] .. id .. ARGV[10]
    redis.call('SADD', KEYS[1], id)
    redis.call('SADD', waiting, ARGV[7])
    redis.call('EXPIRE', waiting, ttl)
  end
end
if redis.call('SCARD', KEYS[1]) > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  return 0
end
record(KEYS[2], KEYS[3], ARGV[6], 'batch.completed', ARGV[7], {})
return 1
"""
)


def enabled(settings: Settings) -> bool:
    return bool(settings.webhook_url)


def _common(tenant: str) -> list[Any]:
    return [tenant, now_iso(), time.time(), EVENT_TTL_SECONDS, RECENT_PER_TENANT]


def task_reopened(pipe: Pipeline, settings: Settings, task_id: str) -> None:
    """Queue on `pipe`: a task moved back to pending (a Retry), so the batches that list it
    wait for it again."""
    pipe.eval(
        _TASK_REOPENED,
        1,
        keys.task_batches(task_id),
        task_id,
        settings.retention_seconds,
        *_BATCH_LIVE,
    )


def task_finished(pipe: Pipeline, settings: Settings, tenant: str, task_id: str, kind: str) -> None:
    """Queue on `pipe` (after the task's own write) a finished task's event of type `kind`
    (jobs.tasks.states.EVENT_TYPES), the batch events it completes, and its delivery job."""
    event_id = new_id()
    pipe.eval(
        _TASK_FINISHED,
        4,
        keys.task(task_id),
        keys.task_batches(task_id),
        keys.webhook_event(event_id),
        keys.tenant_webhooks(tenant),
        *_common(tenant),
        event_id,
        kind,
        task_id,
        new_id(),
        *_BATCH_LIVE,
        *_EVENT,
    )
    enqueue(pipe, settings, [event_id])


def batch_submitted(
    connection: Redis,
    settings: Settings,
    tenant: str,
    batch_id: str,
    task_ids: list[str],
    *,
    live: tuple[str, ...],
    complete: bool,
) -> None:
    """After a batch's submit script, before its jobs are enqueued: the batch waits for its
    live tasks (new or reused). `complete` (every task a finished duplicate when the claim
    ran) enqueues the batch event's delivery in the same MULTI; a reused task that finished
    since then is found here, and its delivery follows at once."""
    event_id = new_id()
    pipe = connection.pipeline()
    pipe.eval(
        _BATCH_SUBMITTED,
        3,
        keys.batch_live(batch_id),
        keys.webhook_event(event_id),
        keys.tenant_webhooks(tenant),
        *_common(tenant),
        event_id,
        batch_id,
        keys.TASK_PREFIX,
        *_TASK_BATCHES,
        len(live),
        *live,
        *task_ids,
    )
    if complete:
        enqueue(pipe, settings, [event_id])
    at_once = pipe.execute()[0]
    if at_once and not complete:
        pipe = connection.pipeline()
        enqueue(pipe, settings, [event_id])
        pipe.execute()


def job_id(event_id: str) -> str:
    return f"webhook-{event_id}"


def retry_delays(base_seconds: int) -> list[int]:
    """Jittered, doubling whole-second delays (capped at an hour) whose sum reaches a day."""
    delays: list[int] = []
    while sum(delays) < RETRY_WINDOW_SECONDS:
        nominal = min(base_seconds * 2 ** len(delays), RETRY_CAP_SECONDS)
        delays += backoff_delays(2, nominal, cap_seconds=RETRY_CAP_SECONDS)  # one, jittered
    return delays


def job_data(event_id: str, settings: Settings) -> EnqueueData:
    """The delivery job of one event: its id named after the event, its own retry list, and
    TTLs that outlast the retries (RQ ignores Queue-level ones)."""
    delays = retry_delays(settings.webhook_retry_base_seconds)
    return Queue.prepare_data(
        DELIVER,
        args=(event_id,),
        job_id=job_id(event_id),
        timeout=JOB_TIMEOUT_SECONDS,
        result_ttl=3600,
        failure_ttl=EVENT_TTL_SECONDS,
        ttl=EVENT_TTL_SECONDS,
        retry=Retry(max=len(delays), interval=delays),
    )


def enqueue(pipe: Pipeline, settings: Settings, event_ids: list[str]) -> None:
    """RQ's own enqueue of these events' delivery jobs, queued on `pipe`."""
    queue = Queue(QUEUE, connection=Redis(connection_pool=pipe.connection_pool))
    queue.enqueue_many([job_data(event_id, settings) for event_id in event_ids], pipeline=pipe)


def backlog(connection: Redis) -> int:
    """Deliveries waiting: queued, or parked by RQ until their next attempt (what /metrics
    shows; a growing number is an endpoint that fails or a webhook worker that is missing)."""
    queued = Queue(QUEUE, connection=connection).count
    parked = ScheduledJobRegistry(QUEUE, connection=connection).get_job_count(cleanup=False)
    return queued + parked
