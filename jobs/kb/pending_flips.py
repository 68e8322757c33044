"""A document's flip when the knowledge base lives on a Redis of its own (INTAKE_KB_URL).

No MULTI spans two Redis servers, so the task's `succeeded` and its document's flip cannot land
together. The attempt's commit (under its fence: a canceled or superseded attempt writes
nothing) writes `succeeded` and records the flip on the queue's Redis in one MULTI; the worker
applies the flip on the knowledge base's Redis right after and removes the record. A worker
that dies in between leaves the record, and housekeeping applies it once it is older than
APPLY_AFTER_SECONDS. Applying is idempotent (the flip script knows its own run), so a record
applied twice, by its worker and by housekeeping, indexes the document once. A document is
therefore searchable a round trip after its task says `succeeded`, not at the same instant.

A delete of the document (jobs.tasks.lifecycle) removes the records of its tasks in its MULTI,
then removes the document from the knowledge base leaving a tombstone (jobs.kb.index
`remove_document`): a flip already read by a worker or by housekeeping is of a run staged
before the delete, which the tombstone refuses, so nothing brings a deleted document back.
"""

from __future__ import annotations

import json
import time
from typing import Any

from redis import Redis
from redis.client import Pipeline

from jobs.core import keys, scripts
from jobs.kb import index

#: A record this old has lost its worker (applied within a round trip otherwise).
APPLY_AFTER_SECONDS = 30.0

_FORGET = scripts.load(__file__, "pending_flips_forget")


def queue_record(pipe: Pipeline, task_id: str, staged: index.StagedDocument) -> None:
    """Queue, on the commit's MULTI (queue's Redis), the record of the flip to apply."""
    pipe.hset(
        keys.pending_flips(),
        task_id,
        json.dumps(
            {"at": time.time(), "keys": list(staged.flip_keys), "args": list(staged.flip_args)}
        ),
    )


def queue_forget(pipe: Pipeline, task_ids: list[str]) -> None:
    """Queue the removal of these tasks' records (a delete of their document)."""
    if task_ids:
        pipe.hdel(keys.pending_flips(), *task_ids)


def apply(kb: Redis, queue: Redis, task_id: str, staged: index.StagedDocument) -> bool:
    """Apply the flip the commit recorded, then forget the record; True when the version is
    now the indexed one (False: a newer one is, or the document was deleted since)."""
    flipped = index.flip(kb, list(staged.flip_keys), list(staged.flip_args))
    queue.hdel(keys.pending_flips(), task_id)
    return flipped


def apply_left(kb: Redis, queue: Redis, older_than: float = APPLY_AFTER_SECONDS) -> int:
    """Apply the records their workers left (housekeeping); returns how many were applied."""
    horizon = time.time() - older_than
    applied = 0
    for task_id, raw in queue.hscan_iter(keys.pending_flips(), count=500):
        record: dict[str, Any] = json.loads(raw)
        if record["at"] > horizon:
            continue
        index.flip(kb, record["keys"], record["args"])
        # Only this record: a delete may have removed it (and left a tombstone) meanwhile.
        _FORGET(
            queue, keys={"records": keys.pending_flips()}, args={"task_id": task_id, "record": raw}
        )
        applied += 1
    return applied
