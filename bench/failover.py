"""failover_s: how long uploads go unanswered (503) when the Redis primary's machine dies.

A primary, its replica and three Sentinels (tests.integration.sentinels: quorum 2,
`down-after-milliseconds` 1000), the Procfile's web given REDIS_SENTINELS only. A client
uploads one small document every 50 ms; the primary is SIGKILLed; the figure is the time from
the kill to the first upload answered 202 again, by the promoted replica. Three failovers, each
on a cluster and a web of its own (a failover soon after another of the same master is delayed
by Sentinel's failover-timeout, and a returning old primary's reconfiguration is Sentinel's
business, not what is measured). Reported: the median, and failover_ratio = that / the
down-after time, the floor (Sentinel acts only once the primary has been silent that long): the
part of the outage that is Intake's and Sentinel's own, whatever down-after a deployment picks.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from bench.servers import procfile_web
from tests.integration.processes import ProcessGroup
from tests.integration.sentinels import DOWN_AFTER_MS, SentinelCluster

FAILOVERS = 3
UPLOAD_EVERY = 0.05
BOUND = 60.0


def _first_accepted_after(
    base: str, since: float, stop: threading.Event, seen: dict[str, Any]
) -> None:
    """Upload until one is accepted after `since` (monotonic); keeps the first such time."""
    session = requests.Session()
    n = 0
    while not stop.is_set():
        n += 1
        try:
            response = session.post(
                f"{base}/api/documents",
                timeout=10,
                files=[
                    (
                        "files",
                        (
                            f"failover-{time.time_ns()}-{n}.txt",
                            f"failover probe {n} {time.time_ns()}".encode(),
                            "text/plain",
                        ),
                    )
                ],
            )
            status = response.status_code
        except requests.RequestException:
            status = None
        now = time.monotonic()
        seen["answers"] = seen.get("answers", 0) + 1
        if status not in (202, 503, None):
            seen.setdefault("unexpected", []).append(status)
        if status == 202 and now > since and "at" not in seen:
            seen["at"] = now
            return
        stop.wait(UPLOAD_EVERY)


def run(log: Callable[[str], None]) -> dict[str, Any]:
    outages, unexpected = [], []
    for round_number in range(FAILOVERS):
        with tempfile.TemporaryDirectory(prefix="intake-bench-failover-") as tmp:
            workdir = Path(tmp)
            group = ProcessGroup(workdir / "logs")
            cluster = SentinelCluster(group, workdir / "data").start()
            try:
                with procfile_web(cluster.url, workdir, extra=cluster.env()) as (base, _, _):
                    outage, answers, odd = _one_failover(cluster, base)
            finally:
                cluster.close()
                group.stop_all()
        outages.append(outage)
        unexpected += odd
        log(
            f"failover {round_number + 1}: uploads accepted again {outage:.2f} s after the "
            f"kill ({answers} answers)"
        )
    if unexpected:
        raise RuntimeError(f"answers other than 202/503 during a failover: {unexpected}")
    median = statistics.median(outages)
    return {
        "failover_s": round(median, 2),
        "failover_ratio": round(median / (DOWN_AFTER_MS / 1000), 2),
        "failover_s_max": round(max(outages), 2),
    }


def _one_failover(cluster: SentinelCluster, base: str) -> tuple[float, int, list[Any]]:
    """Kill the primary under uploads; (seconds to the first 202 after, answers, odd ones)."""
    stop, seen = threading.Event(), {}
    killed_at = time.monotonic() + 0.5  # the client uploads for a moment first
    probe = threading.Thread(
        target=_first_accepted_after, args=(base, killed_at, stop, seen), daemon=True
    )
    probe.start()
    time.sleep(max(0.0, killed_at - time.monotonic()))
    killed_at = time.monotonic()
    cluster.kill(cluster.primary_port)
    probe.join(BOUND)
    stop.set()
    if "at" not in seen:
        raise RuntimeError(f"no upload was accepted within {BOUND:.0f} s of the kill")
    cluster.wait_promoted(cluster.replica_port)
    return seen["at"] - killed_at, seen["answers"], seen.get("unexpected", [])
