"""fair_share_ratio: a tenant's 50 documents uploaded behind another tenant's 500, on 2
production workers (docs/architecture.md §15: "done in about the time of 100, not 550").

Both uploads go through Intake's own submit (jobs.Intake: the same claim, records and per-tenant
RQ queues as POST /api/documents; tenants need no API keys there) from this process, tenant A's
500 tiny documents first, then tenant B's 50 at once. The clock of each document is its task's
own `ended_at`, read once everything is done (the wait polls two ZCARDs, so it steals no CPU
from the workers). The fleet's pace is the whole run's: (last end − A's upload) / 550 seconds a
document. fair_share_ratio = (B's last end − B's upload) / (100 × that pace): about 1 when the
workers alternate between the tenants, about 5.5 when they take the work first come, first
served. Also reported: how many of A's documents were done when B's last one was.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import redis

from bench import measure
from bench.servers import ORIGINALS, Services, workers
from jobs import Intake, Settings, Upload
from jobs.core import keys

BEHIND = 500  # tenant A's backlog
AHEAD = 50  # tenant B's upload behind it
WORKERS = 2


def _uploads(tenant: str, count: int, nonce: str) -> list[Upload]:
    files = (measure.text_file(n, f"{tenant}-{nonce}") for n in range(count))
    return [Upload.from_bytes(name, name, data, "txt") for name, data, _ in files]


def _ends(connection: redis.Redis, task_ids: list[str]) -> list[float]:
    pipe = connection.pipeline(transaction=False)
    for task_id in task_ids:
        pipe.hmget(keys.task(task_id), "status", "ended_at")
    ends = []
    for status, ended_at in pipe.execute():
        if status != b"succeeded":
            raise RuntimeError(f"a fair-share document ended {status!r}")
        ends.append(datetime.fromisoformat(ended_at.decode().replace("Z", "+00:00")).timestamp())
    return ends


def _wait_idle(connection: redis.Redis, tenants: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(connection.zcard(keys.tenant_active(t)) for t in tenants):
        if time.monotonic() > deadline:
            raise RuntimeError("the fair-share documents did not finish in time")
        time.sleep(0.05)


def run(svc: Services, nonce: str, log: Callable[[str], None]) -> dict[str, Any]:
    connection = redis.Redis.from_url(svc.redis_url)
    service = Intake(
        connection,
        Settings.from_mapping(
            {"REDIS_URL": svc.redis_url, "INTAKE_STORAGE_URL": ORIGINALS.as_uri()}
        ),
    )
    a, b = f"bench-a-{nonce}", f"bench-b-{nonce}"
    with workers(svc.redis_url, WORKERS, svc.workdir, prefix="fair"):
        for tenant in (a, b):  # each tenant's queues learned, each worker warm
            service.submit(tenant, _uploads(tenant, 2, f"warm-{nonce}"))
        _wait_idle(connection, [a, b], 60)
        log(
            f"fair share: tenant A's {BEHIND} documents, then tenant B's {AHEAD}, {WORKERS} workers"
        )
        a_start = time.time()
        a_ids = [t["id"] for t in service.submit(a, _uploads(a, BEHIND, nonce))["tasks"]]
        b_start = time.time()
        b_ids = [t["id"] for t in service.submit(b, _uploads(b, AHEAD, nonce))["tasks"]]
        _wait_idle(connection, [a, b], 600)
    a_ends, b_ends = _ends(connection, a_ids), _ends(connection, b_ids)
    connection.close()
    pace = (max(a_ends + b_ends) - a_start) / (BEHIND + AHEAD)
    b_seconds = max(b_ends) - b_start
    return {
        "ratio": b_seconds / (2 * AHEAD * pace),
        "b_seconds": b_seconds,
        "pace_ms": 1000 * pace,
        "all_seconds": max(a_ends + b_ends) - a_start,
        "a_done_when_b_done": sum(end <= max(b_ends) for end in a_ends),
    }


def describe(result: dict[str, Any]) -> list[str]:
    return [
        f"fair share: tenant B's {AHEAD} documents behind tenant A's {BEHIND} done "
        f"{result['b_seconds']:.1f} s after B's upload, when {result['a_done_when_b_done']} "
        f"of A's were; the fleet took {result['pace_ms']:.0f} ms a document "
        f"({result['all_seconds']:.1f} s for all {BEHIND + AHEAD}): {2 * AHEAD} documents' "
        f"time is {2 * AHEAD * result['pace_ms'] / 1000:.1f} s, first come first served "
        f"would be {(BEHIND + AHEAD) * result['pace_ms'] / 1000:.1f} s"
    ]


if __name__ == "__main__":  # this figure alone: python -m bench.fair_share
    import uuid

    from bench.servers import services

    with services() as svc:
        print(describe(run(svc, uuid.uuid4().hex[:8], print))[0])
