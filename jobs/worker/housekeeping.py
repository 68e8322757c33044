"""Housekeeping, about once a minute in one worker: what no single event takes care of.

Reservations of tasks that ended without giving their bytes back return to the upload budgets
(jobs.tasks.upload_budgets.recount, after jobs.upgrades.upload_sizes); lists of batches and
dead letters lose the entries older than the retention (their records have expired by then);
knowledge bases written before their chunks were counted get counted, those written before
chunk ids or BM25 are migrated (jobs.upgrades.kb_layout), and the garbage of replaced and
deleted documents is collected (what a worker that died in the middle of it left). Documents
uploaded before each tenant's list of documents existed are put into it
(jobs.upgrades.library_backfill, once). With the knowledge base
on a Redis of its own, the flips that workers recorded but did not live to apply are applied
(jobs.kb.pending_flips).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from redis import Redis

from jobs.core import keys
from jobs.core.settings import Settings
from jobs.kb import index, pending_flips
from jobs.kb.connection import apart
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import upload_budgets
from jobs.upgrades import kb_layout, library_backfill, upload_sizes


def run(
    connection: Redis,
    ttl_seconds: int,
    vectors: index.VectorWriter | None = None,
    kb: Redis | None = None,
) -> None:
    """`kb`: the knowledge base's Redis when it is not `connection` (INTAKE_KB_URL)."""
    kb = connection if kb is None else kb
    pipe = connection.pipeline(transaction=False)
    horizon = time.time() - ttl_seconds
    pipe.zremrangebyscore(keys.failed_all(), "-inf", horizon)
    for pattern in (keys.tenant_batches("*"), keys.tenant_failed("*")):
        for key in connection.scan_iter(match=pattern, count=500):
            pipe.zremrangebyscore(key, "-inf", horizon)
    pipe.execute()
    upload_sizes.move_to_tenants(connection)
    upload_budgets.recount(connection)
    library_backfill.backfill(connection, KnowledgeBase(connection, Settings(), kb))
    if apart(kb, connection):
        pending_flips.apply_left(kb, connection)
    index.ensure_chunk_counts(kb)
    kb_layout.migrate(kb, vectors)
    kb_layout.to_bm25(kb)
    for tenant in _tenants_with(kb, keys.kb_garbage, keys.kb_staged):
        index.collect_garbage(kb, tenant, vectors)


def _tenants_with(connection: Redis, *key_of: Callable[[str], str]) -> set[str]:
    """The tenants that have one of these per-tenant keys (each a function of the tenant)."""
    found = set()
    for make in key_of:
        head, tail = make("\0").split("\0")
        for key in connection.scan_iter(match=make("*"), count=500):
            name = key.decode()
            found.add(name[len(head) : len(name) - len(tail)])
    return found
