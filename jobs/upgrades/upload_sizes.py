"""Upload sizes an earlier release kept in one table for all tenants (keys.legacy_blob_sizes),
moved to each task's tenant, before per-tenant budgets (jobs.tasks.upload_budgets) recount them.

Run by housekeeping just before the recount; once the table is gone it is one HGETALL of
nothing.
"""

from __future__ import annotations

from redis import Redis

from jobs.core import keys
from jobs.tasks import record as task_record


def move_to_tenants(connection: Redis) -> None:
    """Each size of the one table to its task's tenant (a task without a record: `default`),
    counted in that tenant's bytes; then the table goes."""
    legacy = connection.hgetall(keys.legacy_blob_sizes())
    if not legacy:
        return
    pipe = connection.pipeline(transaction=False)
    for task_id in legacy:
        pipe.hget(keys.task(task_id.decode()), task_record.TENANT)
    tenants = pipe.execute()
    pipe = connection.pipeline()
    for (task_id, size), tenant in zip(legacy.items(), tenants):
        owner = (tenant or b"default").decode()
        pipe.hset(keys.tenant_blob_sizes(owner), task_id, size)
        pipe.incrby(keys.tenant_blob_bytes(owner), int(size))
    pipe.delete(keys.legacy_blob_sizes())
    pipe.execute()
