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

from jobs.core import keys, scripts
from jobs.tasks import record as task_record

# Returns how many tasks the batch keeps.
_UNCLAIM = scripts.load(__file__, "unclaim", task_record.SCRIPT_NAMES)


def unclaim(connection: Redis, tenant: str, batch_id: str, tasks: list[tuple[str, str]]) -> int:
    """Take back the claim of each (task id, document id); returns how many tasks the batch
    keeps (0: the batch is gone too)."""
    if not tasks:
        return -1
    named = {
        "active": keys.active(),
        "tenant_active": keys.tenant_active(tenant),
        "blob_sizes": keys.tenant_blob_sizes(tenant),
        "tenant_blob_bytes": keys.tenant_blob_bytes(tenant),
        "blob_bytes": keys.blob_bytes(),
        "stored_sizes": keys.tenant_stored_sizes(tenant),
        "stored_bytes": keys.tenant_stored_bytes(tenant),
        "batch_tasks": keys.batch_tasks(batch_id),
        "batch": keys.batch(batch_id),
        "tenant_batches": keys.tenant_batches(tenant),
    }
    per_task: list[str] = []
    for task_id, document_id in tasks:
        per_task += [
            keys.task(task_id),
            keys.document_tasks(tenant, document_id),
            keys.document_latest(tenant, document_id),
        ]
    return int(
        _UNCLAIM(
            connection,
            keys=named,
            more_keys=per_task,
            args={
                "task_prefix": keys.TASK_PREFIX,
                "idempotency_prefix": keys.idempotency(""),
                "batch_id": batch_id,
            },
            rest=[task_id for task_id, _ in tasks],
        )
    )
