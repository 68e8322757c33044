"""Uploaded bytes, kept in Redis so that any worker on any machine can process any task.

Why two budgets: every upload a tenant holds in Redis counts against that tenant's own share
(INTAKE_TENANT_BLOB_BUDGET_BYTES), so one tenant's backlog or dead letters never refuse another
tenant's uploads; all of them count against the shared budget (INTAKE_BLOB_BUDGET_BYTES), which
only protects Redis as a whole. The submit script reserves a file's bytes in both counters, and
in the tenant's table of sizes, before any byte travels; large files then travel in pieces
(`PieceWriter`), never as one huge command that Redis would have to buffer whole.

What becomes of them: released (deleted, and given back to both budgets exactly once) when the
task succeeds or fails for good, since a bad file is never retried; kept for
INTAKE_UPLOAD_RETENTION_HOURS while a Retry may still want them (a retryable failure, a cancel);
an upload that expired gives its bytes back at the next `recount`.
"""
from __future__ import annotations

from typing import Iterable

from redis import Redis
from redis.client import Pipeline

from jobs.core import keys
from jobs.core.failures import PermanentError
from jobs.core.settings import MIB

PIECE_BYTES = MIB
FLUSH_BYTES = 4 * PIECE_BYTES   # what one request holds in flight to Redis, at most
HEAD_BYTES = 64 * 1024          # what a worker reads of an upload with its start (queue_head)

# KEYS: blob, tenant sizes, tenant bytes, all bytes. ARGV: task id. Counted once however often
# it runs (a re-sent command, a delete after a success), because the size entry goes with it.
_RELEASE = """
local size = redis.call('HGET', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1])
if not size then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('DECRBY', KEYS[3], size)
redis.call('DECRBY', KEYS[4], size)
return tonumber(size)
"""

# KEYS: tenant sizes, tenant bytes, all bytes. ARGV: blob key prefix. Uploads that expired give
# their bytes back; the shared counter moves by the same amount, in the same script.
_RECOUNT = """
local entries = redis.call('HGETALL', KEYS[1])
local total = 0
for i = 1, #entries, 2 do
  if redis.call('EXISTS', ARGV[1] .. entries[i]) == 1 then
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


def queue_head(pipe: Pipeline, task_id: str) -> None:
    """Queue the read of an upload's first HEAD_BYTES (all of a small one) on `pipe`: a worker
    reads it with its other first reads, and `load` then needs no round trip of its own."""
    pipe.getrange(keys.blob(task_id), 0, HEAD_BYTES - 1)


def load(connection: Redis, task_id: str, size: int, *, head: bytes | None = None) -> bytes:
    """The uploaded bytes of a task (`head`, as `queue_head` read it, when that is all of
    them); their loss is permanent (the file must be uploaded again)."""
    if head is not None and size and len(head) == size:
        return head
    data = connection.get(keys.blob(task_id))
    if data is None:
        raise PermanentError("The uploaded file is no longer stored (uploads of failed and "
                             "canceled documents are kept for a limited time); upload it again.",
                             code="upload_expired")
    if size and len(data) != size:
        raise PermanentError("The upload of this file did not finish (the connection or the "
                             "server was interrupted); upload it again.", code="upload_incomplete")
    return data


class PieceWriter:
    """Uploads' bytes queued as SETRANGEs on one pipeline, sent whenever FLUSH_BYTES wait.

    Each piece is written at its own offset into a key the submit created (with its TTL), so a
    pipeline re-sent by a client retry writes the same bytes again. Commands the caller queues
    on `pipe` after a task's pieces (its job's enqueue) run after them, in order.
    """

    def __init__(self, pipe: Pipeline) -> None:
        self.pipe = pipe
        self.waiting = 0

    def write(self, task_id: str, pieces: Iterable[bytes]) -> None:
        key, offset = keys.blob(task_id), 0
        for piece in pieces:
            self.pipe.setrange(key, offset, piece)
            offset += len(piece)
            self.waiting += len(piece)
            if self.waiting >= FLUSH_BYTES:
                self.flush()

    def flush(self) -> None:
        self.pipe.execute()
        self.waiting = 0


def release(pipe: Pipeline | Redis, tenant: str, task_id: str) -> None:
    """Delete a task's upload and give its bytes back to both budgets (once)."""
    pipe.eval(_RELEASE, 4, keys.blob(task_id), keys.tenant_blob_sizes(tenant),
              keys.tenant_blob_bytes(tenant), keys.blob_bytes(), task_id)


def keep_for_retry(pipe: Pipeline | Redis, task_id: str, seconds: int) -> None:
    """A task failed (retryably) or was canceled: keep its upload, and the checkpoint made of
    it, for `seconds` (INTAKE_UPLOAD_RETENTION_HOURS, far less than its record), for a Retry."""
    pipe.expire(keys.blob(task_id), seconds)
    pipe.expire(keys.checkpoint(task_id), seconds)


def recount(connection: Redis) -> int:
    """Recount what every tenant holds from the uploads that still exist; returns the total.

    Run now and then by the housekeeping. Sizes recorded by releases before per-tenant budgets
    are moved to their tenant first.
    """
    _migrate_legacy_sizes(connection)
    total = 0
    head, tail = keys.tenant_blob_sizes("\0").split("\0")
    for key in connection.scan_iter(match=keys.tenant_blob_sizes("*"), count=500):
        tenant = key.decode()[len(head):-len(tail)]
        total += int(connection.eval(_RECOUNT, 3, key, keys.tenant_blob_bytes(tenant),
                                     keys.blob_bytes(), keys.blob("")))
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
