"""Documents uploaded before each tenant's library existed (jobs.tasks.library), put into it.

Why once, with a grace: the first pass adds every document with a latest task and those only
the knowledge base still holds; for BACKFILL_GRACE_SECONDS after it, later passes look at the
latest tasks again, for what web processes of the release before the library (still serving
during a rolling deploy) uploaded without adding it. Then each call is one GET.
"""

from __future__ import annotations

import time

from redis import Redis

from jobs.core import keys
from jobs.core.clock import timestamp
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import library
from jobs.tasks.record import TaskRecord

#: How long after its first pass `backfill` goes on adding what web processes of the release
#: before the set (still serving during a rolling deploy) uploaded without adding it.
BACKFILL_GRACE_SECONDS = 3600


def backfill(connection: Redis, kb: KnowledgeBase | None = None) -> int:
    """Put into each tenant's set the documents it lacks: those with a latest task (scored by
    that task's last change) and, the first time, those only the knowledge base still holds
    (scored by their version's time); returns how many were added.

    Once, where other upgrades run (housekeeping): for BACKFILL_GRACE_SECONDS after the first
    pass, later passes look at the latest tasks again, for uploads through web processes of
    the previous release; then each call is one GET. `kb`: the process's knowledge base (one
    on `connection` when None)."""
    kb = KnowledgeBase.on_queue(connection) if kb is None else kb
    marked = connection.get(keys.tenant_documents_filled())
    if marked is not None and float(marked) < time.time() - BACKFILL_GRACE_SECONDS:
        return 0
    added = _add_latest(connection)
    if marked is None:
        added += _add_indexed(connection, kb)
        connection.set(keys.tenant_documents_filled(), time.time(), nx=True)
    return added


def _add_latest(connection: Redis) -> int:
    added, batch = 0, []
    for key in connection.scan_iter(match=keys.all_document_latest(), count=500):
        batch.append(key.decode())
        if len(batch) == 500:
            added += _add_latest_batch(connection, batch)
            batch = []
    return added + (_add_latest_batch(connection, batch) if batch else 0)


def _add_latest_batch(connection: Redis, latest_keys: list[str]) -> int:
    pipe = connection.pipeline(transaction=False)
    for key, row in zip(latest_keys, library._latest_rows(connection, latest_keys)):
        if not row:
            continue  # no latest task
        record = TaskRecord.from_row(library.LIST_FIELDS, row[1:])
        tenant, document_id = record.tenant, record.document_id
        if not tenant or not document_id:
            continue  # its task's record expired
        if keys.document_latest(tenant, document_id) != key:
            continue  # a record that does not belong to this key: leave it alone
        score = timestamp(record.updated_at) or timestamp(record.created_at) or (time.time())
        library._ADD(
            pipe,
            keys={"documents": keys.tenant_documents(tenant)},
            args={"score": score, "document_id": document_id},
            more_keys=[key],
        )
    return sum(int(done) for done in pipe.execute())


def _add_indexed(connection: Redis, kb: KnowledgeBase) -> int:
    """Documents only the knowledge base holds (their task records expired): checked by the
    script where it can read the knowledge base's entry (KnowledgeBase.keys_on_queue), else
    left for a read to forget if deleted meanwhile."""
    head, tail = keys.kb_documents("\0").split("\0")
    added = 0
    for set_key in kb.redis.scan_iter(match=keys.kb_documents("*"), count=500):
        name = set_key.decode()
        tenant = name[len(head) : len(name) - len(tail)]
        doc_keys = [k.decode() for k in kb.redis.smembers(set_key)]
        read = kb.redis.pipeline(transaction=False)
        for doc_key in doc_keys:
            read.hmget(doc_key, "document_id", "version")
        pipe = connection.pipeline(transaction=False)
        for doc_key, (document_id, version) in zip(doc_keys, read.execute()):
            if document_id is None:
                continue
            score = (library._int(version) or 0) / 1e6 or time.time()
            library._ADD(
                pipe,
                keys={"documents": keys.tenant_documents(tenant)},
                args={"score": score, "document_id": document_id.decode()},
                more_keys=kb.keys_on_queue(doc_key),
            )
        added += sum(int(done) for done in pipe.execute())
    return added
