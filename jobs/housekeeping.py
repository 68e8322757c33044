"""Housekeeping, about once a minute in one worker: what no single event takes care of.

Uploads of waiting tasks are kept alive with them; the bytes of uploads that expired go back
to their budgets (jobs.blobs.recount); lists of batches and dead letters lose the entries
older than the retention (their records have expired by then); knowledge bases written before
their chunks were counted get counted.
"""
from __future__ import annotations

import time

from redis import Redis

from jobs import blobs, index, keys


def run(connection: Redis, ttl_seconds: int) -> None:
    pipe = connection.pipeline(transaction=False)
    for task_id in connection.zrange(keys.active(), 0, -1):
        pipe.expire(keys.blob(task_id.decode()), ttl_seconds)
    horizon = time.time() - ttl_seconds
    pipe.zremrangebyscore(keys.failed_all(), "-inf", horizon)
    for pattern in (keys.tenant_batches("*"), keys.tenant_failed("*")):
        for key in connection.scan_iter(match=pattern, count=500):
            pipe.zremrangebyscore(key, "-inf", horizon)
    pipe.execute()
    blobs.recount(connection)
    index.ensure_chunk_counts(connection)
