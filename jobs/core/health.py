"""What GET /api/health reports: Redis answers, which workers live, how deep each queue is,
whether a scheduler holds its lock. Only RQ's public API reads RQ's state.

`queues` names every queue of every tenant (jobs.core.queues: `default`'s are the plain three,
always listed); `priorities` sums them per priority over the tenants; `unscheduled` lists the queues
no scheduler holds the lock of (their retries with a backoff would not come back); `replication`
says whether an upload now would be confirmed by a replica (jobs.core.replicas).

`dependencies` names each thing Intake leans on, whether it answers and how fast: `redis` (the
queue's: down, health answers 503 instead), `kb` (the knowledge base's Redis: `apart` or the
queue's own, and its read replicas in the order INTAKE_KB_REPLICA_URLS gives them) and `store`
(the originals': its `kind`, never its address). `status` is `ok` when all of them answer,
`degraded` when one other than the queue's Redis does not: the queue still takes and runs
work, while uploads (the store, the knowledge base's bound) or searches may fail
(jobs.core.dependencies probes them, bounded in time).

Health is polled without credentials, and a queue's name names its tenant: `without_tenants`
is the report anyone may read, each tenant's queues folded into the shared name of their
priority (`intake.acme` counts under `intake`), so who uses this Intake is not given away."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from redis import Redis
from rq import Worker
from rq.scheduler import RQScheduler
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from jobs.core import queues, replicas
from jobs.core.dependencies import Check
from jobs.core.settings import QUEUE_NAMES


def report(connection: Redis) -> dict[str, Any]:
    """Raises redis' ConnectionError when Redis is down (the web answers 503)."""
    started = time.perf_counter()
    connection.ping()
    pinged = Check(True, time.perf_counter() - started)
    workers = Worker.all(connection=connection)
    names = queues.all_names(connection)
    pipe = connection.pipeline(transaction=False)
    for name in names:
        pipe.exists(RQScheduler.get_locking_key(name))
    locks = pipe.execute()
    depths = queues.depths(connection, names)
    priorities = dict.fromkeys(queues.PRIORITIES, 0)
    for name, depth in depths.items():
        priorities[queues.priority_of(name)] += depth
    return {
        "redis": "ok",
        "workers": {"count": len(workers), "names": sorted(w.name for w in workers)},
        "queues": depths,
        "priorities": priorities,
        "scheduler": any(locks),
        "unscheduled": [name for name, locked in zip(names, locks) if not locked],
        "replication": replicas.status(connection),
        "dependencies": {"redis": pinged.view()},
    }


#: The name of each read replica's probe, numbered from 1 in INTAKE_KB_REPLICA_URLS's order.
REPLICA_PROBE = "kb_replica_{}"


def with_dependencies(
    full: dict[str, Any],
    checks: Mapping[str, Check],
    *,
    apart: bool,
    replicas: int,
    store_kind: str,
) -> dict[str, Any]:
    """`full` (a `report`) with the knowledge base and the store as `checks` found them
    (`kb`, REPLICA_PROBE's, `store`), and the `status` they make. `apart`: the knowledge base
    lives on a Redis of its own (jobs.kb.knowledge_base says); on the queue's, it is not
    probed by itself: it answered as `redis` did."""
    dependencies = dict(full["dependencies"])
    kb = checks["kb"].view() if apart else dict(dependencies["redis"])
    kb = {
        "apart": apart,
        **kb,
        "replicas": [
            checks[REPLICA_PROBE.format(number)].view() for number in range(1, replicas + 1)
        ],
    }
    dependencies.update(kb=kb, store={"kind": store_kind, **checks["store"].view()})
    status = "ok" if all(check.up for check in checks.values()) else "degraded"
    return {"status": status, **full, "dependencies": dependencies}


def without_tenants(full: dict[str, Any]) -> dict[str, Any]:
    """`full` (a `report`) with every per-tenant queue folded into its priority's shared name."""
    depths = dict.fromkeys(QUEUE_NAMES, 0)
    for name, depth in full["queues"].items():
        shared = shared_queue_name(name)
        depths[shared] = depths.get(shared, 0) + depth
    unscheduled = sorted(
        {shared_queue_name(name) for name in full["unscheduled"]}, key=_static_order
    )
    return {**full, "queues": depths, "unscheduled": unscheduled}


def shared_queue_name(name: str) -> str:
    """The name every tenant's queue of that priority shares (`intake-bulk.acme` →
    `intake-bulk`); any other queue keeps its name."""
    parsed = queues.parse(name)
    return name if parsed is None else queues.queue_name(queues.DEFAULT_TENANT, parsed[1])


def _static_order(name: str) -> tuple[int, str]:
    return (QUEUE_NAMES.index(name) if name in QUEUE_NAMES else len(QUEUE_NAMES), name)


def ingestion_workers(connection: Redis) -> int:
    """Registered workers that take documents: those listening to any ingestion queue (RQ's
    per-queue worker sets), so a webhook worker (its queue alone) is not counted."""
    return len(connection.sunion([WORKERS_BY_QUEUE_KEY % name for name in QUEUE_NAMES]))
