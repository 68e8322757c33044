"""What GET /api/health reports: Redis answers, which workers live, how deep each queue is,
whether a scheduler holds its lock. Only RQ's public API reads RQ's state."""
from __future__ import annotations

from typing import Any

from redis import Redis
from rq import Queue, Worker
from rq.scheduler import RQScheduler
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from jobs.settings import QUEUE_NAMES


def report(connection: Redis) -> dict[str, Any]:
    """Raises redis' ConnectionError when Redis is down (the web answers 503)."""
    connection.ping()
    workers = Worker.all(connection=connection)
    pipe = connection.pipeline(transaction=False)
    for name in QUEUE_NAMES:
        pipe.exists(RQScheduler.get_locking_key(name))
    locks = pipe.execute()
    return {
        "redis": "ok",
        "workers": {"count": len(workers), "names": sorted(w.name for w in workers)},
        "queues": {name: Queue(name, connection=connection).count for name in QUEUE_NAMES},
        "scheduler": any(locks),
    }


def ingestion_workers(connection: Redis) -> int:
    """Registered workers that take documents: those listening to any ingestion queue (RQ's
    per-queue worker sets), so a webhook worker (its queue alone) is not counted."""
    return len(connection.sunion([WORKERS_BY_QUEUE_KEY % name for name in QUEUE_NAMES]))
