"""What each tenant's originals take in the store, bounded by INTAKE_TENANT_STORED_BYTES.

Why a count of its own: the upload budgets (jobs.tasks.upload_budgets) count only what waits
to be read and give it back when a task ends, while an original stays until its document is
deleted. So without this, failed uploads kept filling the shared store (six 100 MB files that
failed at once left 621 MB against a 512 MiB budget).

The submit script adds a new task's size to its tenant's table (task id → bytes) and counter,
and refuses an upload that would pass the quota (429 `storage_quota`). Each deletion of an
original gives its bytes back (`forget`, once per task whoever asks, since the table entry goes
with it): a document's delete, the sweep of orphans and of failed or canceled uploads past
their retention (jobs.tasks.originals), a claim taken back (jobs.tasks.unclaim). The hourly
sweep also `count`s the originals it lists that the table does not know yet (stored by an
older release, or a reservation lost with its process), so the count converges on the store.
"""

from __future__ import annotations

from collections.abc import Iterable

from redis import Redis
from redis.client import Pipeline

from jobs.core import keys, scripts

# Given back once however often it runs.
_FORGET = scripts.load(__file__, "stored_bytes_forget")
# Counted once: HSETNX.
_COUNT = scripts.load(__file__, "stored_bytes_count")


def _keys(tenant: str) -> dict[str, str]:
    return {"sizes": keys.tenant_stored_sizes(tenant), "counter": keys.tenant_stored_bytes(tenant)}


def forget(pipe: Pipeline | Redis, tenant: str, task_ids: Iterable[str]) -> None:
    """Give back the bytes of these tasks' originals (deleted, or never stored)."""
    ids = list(task_ids)
    if ids:
        _FORGET(pipe, keys=_keys(tenant), rest=ids)


def count(pipe: Pipeline | Redis, tenant: str, sizes: Iterable[tuple[str, int]]) -> None:
    """Count originals found in the store that the table does not know yet."""
    args = [item for task_id, size in sizes for item in (task_id, size)]
    if args:
        _COUNT(pipe, keys=_keys(tenant), rest=args)


def used(connection: Redis) -> dict[str, int]:
    """What each tenant's originals take, as counted (for /metrics)."""
    head, tail = keys.tenant_stored_bytes("\0").split("\0")
    found = sorted(connection.scan_iter(match=keys.tenant_stored_bytes("*"), count=500))
    values = connection.mget(found) if found else []
    return {
        key.decode()[len(head) : -len(tail)]: int(value or 0) for key, value in zip(found, values)
    }
