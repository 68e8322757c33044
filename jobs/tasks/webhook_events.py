"""Webhook events (docs/architecture.md §14): what is recorded when a task finishes or a batch
completes, and the delivery job queued with it.

Recorded only with INTAKE_WEBHOOK_URL set: otherwise nothing here runs and nothing is written.
Every event is recorded in the same MULTI as the status change that causes it
(jobs.tasks.transitions.changed): one Lua script copies the task's record as it is now into the
event (so a later Retry does not change what `task.failed` says) and indexes it for its tenant, and
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

from jobs.core import keys, scripts
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

# Each script records an event once (a re-sent script finds it and writes nothing) and indexes
# it for its tenant (webhook_events_record.lua, the part they share).
# A finished task's event and the batch events it completes; returns the batch events' ids.
_TASK_FINISHED = scripts.load(__file__, "webhook_events_task_finished")
# A task back to pending: the batches that list it wait for it again.
_TASK_REOPENED = scripts.load(__file__, "webhook_events_task_reopened")
# A submitted batch waits for its live tasks; returns 1 when it was complete at once (its event
# recorded), else 0.
# (It reads a task's 'status' as it is spelled: jobs.tasks.record imports jobs.tasks.states,
# which imports this module.)
_BATCH_SUBMITTED = scripts.load(__file__, "webhook_events_batch_submitted")


def enabled(settings: Settings) -> bool:
    return bool(settings.webhook_url)


def _common(tenant: str) -> dict[str, Any]:
    """The arguments of webhook_events_record.lua, which every event script includes."""
    return {
        "tenant": tenant,
        "created_at": now_iso(),
        "now_score": time.time(),
        "ttl_seconds": EVENT_TTL_SECONDS,
        "keep_count": RECENT_PER_TENANT,
    }


def task_reopened(pipe: Pipeline, settings: Settings, task_id: str) -> None:
    """Queue on `pipe`: a task moved back to pending (a Retry), so the batches that list it
    wait for it again."""
    live_head, live_tail = _BATCH_LIVE
    _TASK_REOPENED(
        pipe,
        keys={"task_batches": keys.task_batches(task_id)},
        args={
            "task_id": task_id,
            "ttl": settings.retention_seconds,
            "live_head": live_head,
            "live_tail": live_tail,
        },
    )


def task_finished(pipe: Pipeline, settings: Settings, tenant: str, task_id: str, kind: str) -> None:
    """Queue on `pipe` (after the task's own write) a finished task's event of type `kind`
    (jobs.tasks.states.EVENT_TYPES), the batch events it completes, and its delivery job."""
    event_id = new_id()
    _TASK_FINISHED(
        pipe,
        keys={
            "task": keys.task(task_id),
            "task_batches": keys.task_batches(task_id),
            "event": keys.webhook_event(event_id),
            "recent": keys.tenant_webhooks(tenant),
        },
        args={
            **_common(tenant),
            "event_id": event_id,
            "kind": kind,
            "task_id": task_id,
            "batch_event_id": new_id(),
            "live_head": _BATCH_LIVE[0],
            "live_tail": _BATCH_LIVE[1],
            "event_head": _EVENT[0],
            "event_tail": _EVENT[1],
        },
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
    _BATCH_SUBMITTED(
        pipe,
        keys={
            "batch_live": keys.batch_live(batch_id),
            "event": keys.webhook_event(event_id),
            "recent": keys.tenant_webhooks(tenant),
        },
        args={
            **_common(tenant),
            "event_id": event_id,
            "batch_id": batch_id,
            "task_prefix": keys.TASK_PREFIX,
            "waiting_head": _TASK_BATCHES[0],
            "waiting_tail": _TASK_BATCHES[1],
            "live_count": len(live),
        },
        rest=[*live, *task_ids],
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
