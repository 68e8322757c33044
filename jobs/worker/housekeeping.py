"""Housekeeping, about once a minute in one worker: what no single event takes care of.

Reservations of tasks that ended without giving their bytes back return to the upload budgets
(jobs.tasks.upload_budgets.recount, after jobs.upgrades.upload_sizes); lists of batches and
dead letters lose the entries older than the retention (their records have expired by then);
knowledge bases written before their chunks were counted get counted, those written before
chunk ids or BM25 are migrated (jobs.upgrades.kb_layout), and the garbage of replaced and
deleted documents is collected (what a worker that died in the middle of it left). Documents
uploaded before each tenant's list of documents existed are put into it
(jobs.upgrades.library_backfill, once). The flips that workers recorded but did not live to
apply are applied (KnowledgeBase.apply_left: only a knowledge base on a Redis of its own has
any, jobs.kb.pending_flips).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from redis import Redis

from jobs.core import keys
from jobs.kb import index
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import upload_budgets
from jobs.upgrades import kb_layout, library_backfill, upload_sizes


def run(connection: Redis, ttl_seconds: int, kb: KnowledgeBase | None = None) -> None:
    """`kb`: the process's knowledge base (one on `connection` when None), whose vector
    engine is opened for the run."""
    kb = KnowledgeBase.on_queue(connection) if kb is None else kb
    pipe = connection.pipeline(transaction=False)
    horizon = time.time() - ttl_seconds
    pipe.zremrangebyscore(keys.failed_all(), "-inf", horizon)
    for pattern in (keys.tenant_batches("*"), keys.tenant_failed("*")):
        for key in connection.scan_iter(match=pattern, count=500):
            pipe.zremrangebyscore(key, "-inf", horizon)
    pipe.execute()
    upload_sizes.move_to_tenants(connection)
    upload_budgets.recount(connection)
    library_backfill.backfill(connection, kb)
    kb.apply_left()
    vectors = kb.open_vectors()
    try:
        index.ensure_chunk_counts(kb.redis)
        kb_layout.migrate(kb.redis, vectors)
        kb_layout.to_bm25(kb.redis)
        for tenant in _tenants_with(kb.redis, keys.kb_garbage, keys.kb_staged):
            index.collect_garbage(kb.redis, tenant, vectors)
    finally:
        if vectors is not None:
            vectors.close()


def _tenants_with(connection: Redis, *key_of: Callable[[str], str]) -> set[str]:
    """The tenants that have one of these per-tenant keys (each a function of the tenant)."""
    found = set()
    for make in key_of:
        head, tail = make("\0").split("\0")
        for key in connection.scan_iter(match=make("*"), count=500):
            name = key.decode()
            found.add(name[len(head) : len(name) - len(tail)])
    return found
