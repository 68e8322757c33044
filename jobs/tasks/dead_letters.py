"""Dead letters (docs/architecture.md §8): tasks that failed for good, newest first, per tenant or
for all.

Intake keeps its own indexes of them (jobs.tasks.transitions.changed), in step with RQ's failed
registry, so this list and Retry keep working after RQ's records expire.
"""

from __future__ import annotations

from typing import Any

from redis import Redis

from jobs.core import keys
from jobs.tasks import records as tasks
from jobs.tasks import states


def page(
    connection: Redis, tenant: str | None, *, offset: int = 0, limit: int = 50
) -> dict[str, Any]:
    """One tenant's dead letters, or every tenant's (tenant None), newest first."""
    key = keys.tenant_failed(tenant) if tenant is not None else keys.failed_all()
    ids = [t.decode() for t in connection.zrevrange(key, offset, offset + limit - 1)]
    failed = [
        tasks.view(r)
        for r in tasks.load_many(connection, ids)
        if r is not None and r.status == states.FAILED
    ]
    return {"tasks": failed, "offset": offset, "limit": limit, "total": connection.zcard(key)}


def count(connection: Redis) -> int:
    """Every tenant's dead letters (what /metrics reports)."""
    return connection.zcard(keys.failed_all())
