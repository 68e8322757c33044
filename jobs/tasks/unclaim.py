"""Taking back the claim of files an upload could not store, so that a 503 covers them whole.

Why: a batch is claimed before its originals travel to the store (jobs.tasks.submit), so a
store that stops answering halfway leaves claimed tasks with no original and no job. Left as
they were, they answered a resend as duplicates (`pending`, then failed as "job lost" with a
Retry that finds no original), and the newest of them became its document's current version
(a download that 404s, a re-index that fails, though an older version is indexed and stored).
Taken back, the resend the 503 advises makes new tasks of them, and each document's latest
task is again the newest one that exists.

What a claim did, undone for each task, in one script: its record, its idempotency key (when
it still names the task), its place in the active sets and its document's tasks, its share of
the upload budgets and of the stored bytes, and its batch's list; the document's latest task
falls back to the newest remaining one (or none). The document stays in the tenant's library
only while something still names it: the library forgets a member that names nothing on its
next read (jobs.tasks.library).
"""

from __future__ import annotations

from redis import Redis

from jobs.core import keys
from jobs.tasks import record as task_record

# KEYS: 1 all active, 2 tenant's active, 3 tenant's upload sizes, 4 tenant's upload bytes,
#       5 all upload bytes, 6 tenant's stored sizes, 7 tenant's stored bytes, 8 the batch's
#       task list, 9 the batch, 10 tenant's batches; then per task: its record, its document's
#       tasks, its document's latest task.
# ARGV: 1 task key prefix, 2 idempotency key prefix, 3 the batch id, 4 the record's field of
#       the idempotency digest, 5 its field of the version; then per task: its id.
_UNCLAIM = """
local function give_back(sizes, counters, id)
  local size = redis.call('HGET', sizes, id)
  if not size then return end
  redis.call('HDEL', sizes, id)
  for _, counter in ipairs(counters) do redis.call('DECRBY', counter, size) end
end
local function newest(members, prefix, version_field)
  local best, best_version = nil, -1
  for _, member in ipairs(members) do
    local version = tonumber(redis.call('HGET', prefix .. member, version_field) or '-1')
    if version and version > best_version then best, best_version = member, version end
  end
  return best
end
local prefix = ARGV[1]
for i = 6, #ARGV do
  local id, base = ARGV[i], 10 + 3 * (i - 6)
  local record, document_tasks, latest = KEYS[base + 1], KEYS[base + 2], KEYS[base + 3]
  local digest = redis.call('HGET', record, ARGV[4])
  if digest and redis.call('GET', ARGV[2] .. digest) == id then
    redis.call('DEL', ARGV[2] .. digest)
  end
  redis.call('DEL', record)
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  give_back(KEYS[3], {KEYS[4], KEYS[5]}, id)
  give_back(KEYS[6], {KEYS[7]}, id)
  redis.call('SREM', document_tasks, id)
  redis.call('LREM', KEYS[8], 0, id)
  if redis.call('GET', latest) == id then
    local fallback = newest(redis.call('SMEMBERS', document_tasks), prefix, ARGV[5])
    if fallback then redis.call('SET', latest, fallback, 'KEEPTTL')
    else redis.call('DEL', latest) end
  end
end
local left = redis.call('LLEN', KEYS[8])
if left == 0 then
  redis.call('DEL', KEYS[8], KEYS[9])
  redis.call('ZREM', KEYS[10], ARGV[3])
else
  redis.call('HSET', KEYS[9], 'size', left)
end
return left
"""


def unclaim(connection: Redis, tenant: str, batch_id: str, tasks: list[tuple[str, str]]) -> int:
    """Take back the claim of each (task id, document id); returns how many tasks the batch
    keeps (0: the batch is gone too)."""
    if not tasks:
        return -1
    names = [
        keys.active(),
        keys.tenant_active(tenant),
        keys.tenant_blob_sizes(tenant),
        keys.tenant_blob_bytes(tenant),
        keys.blob_bytes(),
        keys.tenant_stored_sizes(tenant),
        keys.tenant_stored_bytes(tenant),
        keys.batch_tasks(batch_id),
        keys.batch(batch_id),
        keys.tenant_batches(tenant),
    ]
    for task_id, document_id in tasks:
        names += [
            keys.task(task_id),
            keys.document_tasks(tenant, document_id),
            keys.document_latest(tenant, document_id),
        ]
    return int(
        connection.eval(
            _UNCLAIM,
            len(names),
            *names,
            keys.TASK_PREFIX,
            keys.idempotency(""),
            batch_id,
            task_record.IDEMPOTENCY,
            task_record.VERSION,
            *(task_id for task_id, _ in tasks),
        )
    )
