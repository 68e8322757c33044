"""The budgets of uploads waiting to be read: what the backlog may take of the store.

Why two budgets: every upload a tenant has waiting counts against that tenant's own share
(INTAKE_TENANT_BLOB_BUDGET_BYTES), so one tenant's backlog never refuses another tenant's
uploads; all of them count against the shared budget (INTAKE_BLOB_BUDGET_BYTES), which protects
the store and the fleet's backlog as a whole. The submit script reserves a file's bytes in both
counters, and in the tenant's table of sizes, before any byte travels to the store.

A task gives its bytes back (once, whoever asks) when it ends: succeeded, failed or canceled.
The original itself stays in the store (jobs.tasks.originals); only the reservation ends. A
reservation whose task ended without giving it back (a process lost between) is given back by
the next `recount`.
"""

from __future__ import annotations

from redis import Redis
from redis.client import Pipeline

from jobs.core import keys, scripts
from jobs.tasks import record as task_record
from jobs.tasks import states

# Counted once however often it runs (a re-sent command, a delete after a success), because
# the size entry goes with it.
_RELEASE = scripts.load(__file__, "upload_budgets_release")
# Reservations of tasks no longer live (or gone) are given back; the shared counter moves by
# the same amount, in the same script.
_RECOUNT = scripts.load(__file__, "upload_budgets_recount", task_record.SCRIPT_NAMES)


def release(pipe: Pipeline | Redis, tenant: str, task_id: str) -> None:
    """Give a task's reservation back to both budgets (once)."""
    _RELEASE(
        pipe,
        keys={
            "sizes": keys.tenant_blob_sizes(tenant),
            "tenant_bytes": keys.tenant_blob_bytes(tenant),
            "all_bytes": keys.blob_bytes(),
        },
        args={"task_id": task_id},
    )


def recount(connection: Redis) -> int:
    """Recount what every tenant has waiting from the tasks still live; returns the total.
    Run now and then by the housekeeping (after jobs.upgrades.upload_sizes, which moves sizes
    recorded before per-tenant budgets to their tenant)."""
    total = 0
    head, tail = keys.tenant_blob_sizes("\0").split("\0")
    for key in connection.scan_iter(match=keys.tenant_blob_sizes("*"), count=500):
        tenant = key.decode()[len(head) : -len(tail)]
        total += int(
            _RECOUNT(
                connection,
                keys={
                    "sizes": key,
                    "tenant_bytes": keys.tenant_blob_bytes(tenant),
                    "all_bytes": keys.blob_bytes(),
                },
                args={"task_prefix": keys.TASK_PREFIX, "live_count": len(states.LIVE)},
                rest=states.LIVE,
            )
        )
    return total
