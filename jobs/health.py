"""What GET /api/health reports: Redis answers, which workers live, how deep each queue is,
whether a scheduler holds its lock. Only RQ's public API reads RQ's state.

`queues` names every queue of every tenant (jobs.queues: `default`'s are the plain three, always
listed); `priorities` sums them per priority over the tenants; `unscheduled` lists the queues no
scheduler holds the lock of (their retries with a backoff would not come back)."""
from __future__ import annotations

from typing import Any

from redis import Redis
from rq import Worker
from rq.scheduler import RQScheduler
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from jobs import queues
from jobs.settings import QUEUE_NAMES


def report(connection: Redis) -> dict[str, Any]:
    """Raises redis' ConnectionError when Redis is down (the web answers 503)."""
    connection.ping()
    workers = Worker.all(connection=connection)
    names = queues.all_names(connection)
    pipe = connection.pipeline(transaction=False)
    for name in names:
        pipe.exists(RQScheduler.get_locking_key(name))
    locks = pipe.execute()
    depths = queues.depths(connection, names)
    priorities = dict.fromkeys(queues.PRIORITIES, 0)
    for name, depth in depths.items():
        priorities[queues.parse(name)[1]] += depth
    return {
        "redis": "ok",
        "workers": {"count": len(workers), "names": sorted(w.name for w in workers)},
        "queues": depths,
        "priorities": priorities,
        "scheduler": any(locks),
        "unscheduled": [name for name, locked in zip(names, locks) if not locked],
    }


def ingestion_workers(connection: Redis) -> int:
    """Registered workers that take documents: those listening to any ingestion queue (RQ's
    per-queue worker sets), so a webhook worker (its queue alone) is not counted."""
    return len(connection.sunion([WORKERS_BY_QUEUE_KEY % name for name in QUEUE_NAMES]))
