"""Intake's RQ queues per tenant, in one place: their names, the registry of tenants that have
queues, and the order a worker takes them in (docs/architecture.md §15).

Every tenant has three RQ queues, one per priority. Tenant `default` (the only one without
INTAKE_API_KEYS) keeps the plain names `intake-high`, `intake`, `intake-bulk`, so a
single-tenant deployment has just the three queues the Procfile names; another tenant T gets
`intake-high.T`, `intake.T`, `intake-bulk.T` (tenant names never hold a dot). They are ordinary RQ
queues, so `rq info` and rq-dashboard show each tenant's backlog as it is.

Workers may not know INTAKE_API_KEYS, and keys are added while they run, so a tenant's queues
are registered in Redis (`keys.queue_tenants()`) by the pipeline that enqueues its first job, and
workers read that set between dequeues (jobs.worker.workers). The fair order alternates tenants:
after a job of tenant T a worker looks at the next tenant's queues first, each tenant's in priority
order, so one tenant's backlog never starves another and priorities hold within a tenant.
"""

from __future__ import annotations

from collections.abc import Iterable

from redis import Redis
from redis.client import Pipeline
from rq import Queue

from jobs.core import keys
from jobs.core.settings import PRIORITIES, PRIORITY_QUEUES, QUEUE_NAMES

DEFAULT_TENANT = "default"
SEPARATOR = "."
_PRIORITY_OF = {name: priority for priority, name in PRIORITY_QUEUES.items()}


def queue_name(tenant: str, priority: str) -> str:
    """The RQ queue of `tenant`'s work at `priority` (one of PRIORITIES; KeyError otherwise)."""
    base = PRIORITY_QUEUES[priority]
    return base if tenant == DEFAULT_TENANT else f"{base}{SEPARATOR}{tenant}"


def parse(name: str) -> tuple[str, str] | None:
    """(tenant, priority) of one of Intake's queue names; None for any other queue."""
    base, sep, tenant = name.partition(SEPARATOR)
    priority = _PRIORITY_OF.get(base)
    if priority is None or (sep and (not tenant or SEPARATOR in tenant)):
        return None
    return (tenant if sep else DEFAULT_TENANT), priority


def priority_of(name: str) -> str:
    """The priority of one of Intake's queue names; ValueError for any other queue."""
    parsed = parse(name)
    if parsed is None:
        raise ValueError(f"{name!r} is not one of Intake's queues")
    return parsed[1]


def tenant_queue_names(tenant: str) -> list[str]:
    """A tenant's three queues, highest priority first."""
    return [queue_name(tenant, priority) for priority in PRIORITIES]


def register(pipe: Pipeline | Redis, tenant: str) -> None:
    """Queue the registration of `tenant`'s queues on the pipeline that enqueues its job (an
    SADD, a no-op after the first time); `default`'s queues are always listened to."""
    if tenant != DEFAULT_TENANT:
        pipe.sadd(keys.queue_tenants(), tenant)


def registered_tenants(connection: Redis) -> list[str]:
    """Every tenant with queues of its own, sorted (so every worker rotates in one order)."""
    return sorted(
        t.decode() if isinstance(t, bytes) else t for t in connection.smembers(keys.queue_tenants())
    )


def all_names(connection: Redis) -> list[str]:
    """Every queue Intake uses: the static three, then every registered tenant's."""
    return list(QUEUE_NAMES) + [
        name
        for tenant in registered_tenants(connection)
        if tenant != DEFAULT_TENANT
        for name in tenant_queue_names(tenant)
    ]


def fair_order(names: Iterable[str], after: str | None = None) -> list[str]:
    """`names` (Intake's queues; others keep their place at the end) grouped by tenant, each
    tenant's in priority order, tenants in sorted order starting with the one after `after`
    (the tenant of the job just taken; None or unknown: from the first)."""
    by_tenant: dict[str, list[tuple[int, str]]] = {}
    others: list[str] = []
    for name in names:
        parsed = parse(name)
        if parsed is None:
            others.append(name)
        else:
            by_tenant.setdefault(parsed[0], []).append((PRIORITIES.index(parsed[1]), name))
    tenants = sorted(by_tenant)
    start = tenants.index(after) + 1 if after in by_tenant else 0
    rotated = tenants[start:] + tenants[:start]
    return [name for tenant in rotated for _, name in sorted(by_tenant[tenant])] + others


def tenant_of(name: str) -> str | None:
    """The tenant of one of Intake's queues; None for any other queue."""
    parsed = parse(name)
    return parsed[0] if parsed else None


class PushedByClaim(Queue):
    """RQ's enqueue without its last command: the job's hash is written as RQ writes it, and
    the script that claims the job's task pushes the job id onto the queue, only when it
    created the task (jobs.tasks.submit). A job is never queued for a claim that did not
    run, whatever the server's script cache held."""

    def push_job_id(
        self, job_id: str, pipeline: Pipeline | None = None, at_front: bool = False
    ) -> None:
        """Nothing here: the claim pushes."""


class Queues:
    """RQ Queue objects of one connection, made on first use and kept (a web process's)."""

    def __init__(self, connection: Redis) -> None:
        self.connection = connection
        self._made: dict[tuple[str, type[Queue]], Queue] = {}

    def get(self, name: str) -> Queue:
        return self._made_of(name, Queue)

    def pushed_by_claim(self, name: str) -> Queue:
        """The queue `name` for an enqueue whose push the claim makes (PushedByClaim)."""
        return self._made_of(name, PushedByClaim)

    def _made_of(self, name: str, kind: type[Queue]) -> Queue:
        queue = self._made.get((name, kind))
        if queue is None:
            queue = self._made[name, kind] = kind(name, connection=self.connection)
        return queue


def depths(connection: Redis, names: Iterable[str]) -> dict[str, int]:
    """How many jobs wait in each queue: one round trip of RQ's Queue.count (LLEN) for all."""
    names = list(names)
    pipe = connection.pipeline(transaction=False)
    for name in names:
        pipe.llen(Queue(name, connection=connection).key)
    return dict(zip(names, (int(n) for n in pipe.execute())))
