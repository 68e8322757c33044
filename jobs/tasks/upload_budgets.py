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

from jobs.core import keys
from jobs.tasks import states

# KEYS: tenant sizes, tenant bytes, all bytes. ARGV: task id. Counted once however often it
# runs (a re-sent command, a delete after a success), because the size entry goes with it.
_RELEASE = """
local size = redis.call('HGET', KEYS[1], ARGV[1])
if not size then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DECRBY', KEYS[2], size)
redis.call('DECRBY', KEYS[3], size)
return tonumber(size)
"""

# KEYS: tenant sizes, tenant bytes, all bytes. ARGV: task key prefix, how many live statuses,
# those statuses. Reservations of tasks no longer live (or gone) are given back; the shared
# counter moves by the same amount, in the same script.
_RECOUNT = """
local live = {}
for i = 3, 2 + tonumber(ARGV[2]) do live[ARGV[i]] = true end
local entries = redis.call('HGETALL', KEYS[1])
local total = 0
for i = 1, #entries, 2 do
  local status = redis.call('HGET', ARGV[1] .. entries[i], 'status')  -- record.STATUS
  if status and live[status] then
    total = total + tonumber(entries[i + 1])
  else
    redis.call('HDEL', KEYS[1], entries[i])
  end
end
local old = tonumber(redis.call('GET', KEYS[2]) or '0')
redis.call('SET', KEYS[2], total)
redis.call('INCRBY', KEYS[3], total - old)
return total
"""


def release(pipe: Pipeline | Redis, tenant: str, task_id: str) -> None:
    """Give a task's reservation back to both budgets (once)."""
    pipe.eval(
        _RELEASE,
        3,
        keys.tenant_blob_sizes(tenant),
        keys.tenant_blob_bytes(tenant),
        keys.blob_bytes(),
        task_id,
    )


def recount(connection: Redis) -> int:
    """Recount what every tenant has waiting from the tasks still live; returns the total. Run now
    and then by the housekeeping. Sizes recorded before per-tenant budgets are moved to their tenant
    first."""
    _migrate_legacy_sizes(connection)
    total = 0
    head, tail = keys.tenant_blob_sizes("\0").split("\0")
    for key in connection.scan_iter(match=keys.tenant_blob_sizes("*"), count=500):
        tenant = key.decode()[len(head) : -len(tail)]
        total += int(
            connection.eval(
                _RECOUNT,
                3,
                key,
                keys.tenant_blob_bytes(tenant),
                keys.blob_bytes(),
                keys.TASK_PREFIX,
                len(states.LIVE),
                *states.LIVE,
            )
        )
    return total


def _migrate_legacy_sizes(connection: Redis) -> None:
    legacy = connection.hgetall(keys.legacy_blob_sizes())
    if not legacy:
        return
    pipe = connection.pipeline(transaction=False)
    for task_id in legacy:
        pipe.hget(keys.task(task_id.decode()), "tenant")
    tenants = pipe.execute()
    pipe = connection.pipeline()
    for (task_id, size), tenant in zip(legacy.items(), tenants):
        owner = (tenant or b"default").decode()
        pipe.hset(keys.tenant_blob_sizes(owner), task_id, size)
        pipe.incrby(keys.tenant_blob_bytes(owner), int(size))
    pipe.delete(keys.legacy_blob_sizes())
    pipe.execute()
