"""Losing the Redis primary's machine (docs/architecture.md §17), and a Redis that stops answering.

Real processes throughout: a primary, its replica and three Sentinels (tests/integration/
sentinels.py), the Procfile's web and two workers, all given only REDIS_SENTINELS and
REDIS_SENTINEL_MASTER. The primary is SIGKILLed while a batch runs and uploads keep coming:
every process must find the promoted replica by itself, every request in between answers 503
with Retry-After (never a 500), every upload acknowledged before the kill survives, and every
task ends succeeded, none lost, none indexed twice.

A stalled Redis (SIGSTOP: the kernel still accepts connections, nothing answers) must cost a
request at most 3 s (docs/architecture.md §17: bounded socket timeouts, no stacked retries), with
its own plain redis-server so that nothing else of the session stalls.
"""

from __future__ import annotations

import base64
import os
import signal
import threading
import time
from typing import Any

import pytest
import requests
from rq.scheduler import RQScheduler

from jobs.core.redis_client import connect
from tests.integration.faults import CRASH_BOUND, chunk_count, document
from tests.integration.fixtures import SECRET_KEY, _group
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import txt, unique_word, upload, wait_terminal
from tests.integration.processes import base_env
from tests.integration.sentinels import SentinelCluster
from tests.integration.servers import REDIS_SERVER, RedisServer, WebServer, WorkerPool

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(REDIS_SERVER is None, reason="needs a real redis-server (and Sentinel)"),
]

STALL_BOUND = 3.0  # docs/architecture.md §17: health and every API request answer within 3 s
STALL_MARGIN = 0.5  # a loaded CI machine's scheduling, on top of the bound
BATCH = 30  # documents in flight when the primary dies
FAILOVER_BOUND = 30.0  # 1 s down-after + the Sentinels' election; seconds, generous
ADMIN_PASSWORD = "failover-operator"
ADMIN = {"Authorization": "Basic " + base64.b64encode(f"admin:{ADMIN_PASSWORD}".encode()).decode()}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Any:
    group = _group(tmp_path_factory, "sentinels")
    sentinels = SentinelCluster(group, tmp_path_factory.mktemp("sentinel-data")).start()
    env = base_env(
        {
            **sentinels.env(),
            "SECRET_KEY": SECRET_KEY,
            "INTAKE_RETRY_BASE_SECONDS": "1",
            "INTAKE_MAX_ATTEMPTS": "4",
            "INTAKE_ADMIN_PASSWORD": ADMIN_PASSWORD,
        }
    )
    web = WebServer(_group(tmp_path_factory, "sentinel-web"), env)
    workers = WorkerPool(
        _group(tmp_path_factory, "sentinel-workers"),
        sentinels.url,
        env,
        prefix="itest-failover",
        url_from_env=True,
    )
    try:
        web.start()
        workers.start(2)
        yield sentinels, web, workers
    finally:
        workers.stop_all()
        web.stop()
        sentinels.close()
        group.stop_all()


class _Traffic(threading.Thread):
    """What clients do through a failover: one upload and one health check every 0.2 s; every
    answer kept (its time, status, Retry-After and, for a 202, its task ids)."""

    def __init__(self, base_url: str, word: str) -> None:
        super().__init__(name="failover-traffic", daemon=True)
        self.base_url, self.word = base_url, word
        self.answers: list[dict[str, Any]] = []
        self.accepted: list[tuple[float, str]] = []  # (monotonic time of the 202, task id)
        self.stopping = threading.Event()

    def run(self) -> None:
        with ApiClient(self.base_url, timeout=10) as client:
            n = 0
            while not self.stopping.is_set():
                n += 1
                text = f"Upload {n} of the {self.word} stream, sent during a failover."
                for kind, call in (
                    # Called in this iteration, before n and text change.
                    ("upload", lambda: upload(client, [txt(f"stream-{n}.txt", text)])[0]),  # noqa: B023
                    ("health", lambda: client.get("/api/health")),
                ):
                    try:
                        response = call()
                    except requests.RequestException as exc:
                        self.answers.append({"kind": kind, "status": None, "error": str(exc)})
                        continue
                    answer = {
                        "kind": kind,
                        "status": response.status_code,
                        "retry_after": response.headers.get("Retry-After"),
                        "at": time.monotonic(),
                    }
                    self.answers.append(answer)
                    if kind == "upload" and response.status_code == 202:
                        for task in response.json()["tasks"]:
                            self.accepted.append((answer["at"], task["id"]))
                self.stopping.wait(0.2)


def test_primary_killed_mid_batch_every_task_succeeds_once(cluster) -> None:
    sentinels, web, workers = cluster
    word = unique_word()
    texts = {
        f"doc-{i:02d}.txt": document(f"{word} {unique_word()}", paragraphs=4) for i in range(BATCH)
    }
    with ApiClient(web.url, timeout=10) as client:
        answer, _ = upload(client, [txt(name, text) for name, text in texts.items()])
        assert answer.status_code == 202, answer.text
        batch = answer.json()
        task_ids = {t["filename"]: t["id"] for t in batch["tasks"]}
        assert len(task_ids) == BATCH

        traffic = _Traffic(web.url, unique_word())
        traffic.start()
        # Mid-batch: some documents done, most still to do.
        poll(
            lambda: client.get(f"/api/batches/{batch['batch_id']}").json()["counts"],
            lambda counts: counts["succeeded"] >= 2,
            timeout=60,
            interval=0.05,
            message="the batch under way",
        )
        killed_at = time.monotonic()
        acknowledged_before = [task_id for at, task_id in traffic.accepted if at < killed_at]
        sentinels.kill(sentinels.primary_port)
        sentinels.wait_promoted(sentinels.replica_port, timeout=FAILOVER_BOUND)
        promoted_after = time.monotonic() - killed_at
        # The service answers again through the new primary, by itself.
        first_upload = (
            poll(
                lambda: [at for at, _ in traffic.accepted if at > killed_at],
                timeout=FAILOVER_BOUND,
                interval=0.1,
                message="an upload accepted after the failover",
            )[0]
            - killed_at
        )
        traffic.stopping.wait(2.0)  # a little traffic on the new primary too
        traffic.stopping.set()
        traffic.join(15)
        print(
            f"\nfailover: promoted {promoted_after:.1f} s after the kill; first upload "
            f"accepted again after {first_upload:.1f} s; "
            f"{sum(a['status'] == 503 for a in traffic.answers)} answers 503 in between"
        )

        # Never a 500, never a hang: 200/202, or 503 with Retry-After while no primary answers.
        for answer in traffic.answers:
            assert answer["status"] in (200, 202, 503), answer
            if answer["status"] == 503:
                assert answer["retry_after"], answer
        assert acknowledged_before, "no upload was acknowledged before the kill: nothing shown"

        # Every task ends succeeded: the batch's, and every upload acknowledged at any time
        # (before the kill: it reached the replica before its 202).
        everything = list(task_ids.values()) + [task_id for _, task_id in traffic.accepted]
        final, _ = wait_terminal(client, everything, timeout=CRASH_BOUND + 60)
        assert all(t["status"] == "succeeded" for t in final.values()), {
            task_id: (t["status"], t.get("error"))
            for task_id, t in final.items()
            if t["status"] != "succeeded"
        }
        attempts = sorted(t["attempts"] for t in final.values())
        print(f"attempts per task: {attempts.count(1)} took one, the most took {attempts[-1]}")
        batch_now = client.get(f"/api/batches/{batch['batch_id']}").json()
        assert batch_now["counts"]["succeeded"] == BATCH, batch_now["counts"]

        # None doubled: each document's chunks once, and a search over the batch's word finds
        # every chunk exactly once.
        for name, task_id in task_ids.items():
            chunks = client.get(f"/api/tasks/{task_id}/chunks", params={"limit": 100}).json()
            assert chunks["total"] == chunk_count(texts[name]), (name, chunks["total"])
        found = client.get("/api/search", params={"q": word, "k": 50}).json()["results"]
        pairs = [(r["document_id"], r["chunk"]) for r in found]
        assert len(pairs) == len(set(pairs)), "a chunk indexed twice"

        # The operators' dashboard followed the failover too: it lists the queues and both
        # workers, read from the new primary.
        queues = client.get("/rq/0/data/queues.json", headers=ADMIN)
        assert queues.status_code == 200, queues.text[:300]
        assert "intake" in {q["name"] for q in queues.json()["queues"]}
        health = client.get("/api/health").json()
        assert set(workers.names) <= set(health["workers"]["names"]), health["workers"]
        # A scheduler keeps its lock on the new primary: the lock's TTL is renewed there
        # (about every second; unrenewed it only counts down, by exactly the time elapsed), so
        # retries with a backoff still come back. Renewed: at least 0.5 s above the countdown.
        lock = RQScheduler.get_locking_key("intake")
        primary = connect(sentinels.url)
        before, read_at = primary.pttl(lock), time.monotonic()
        poll(
            lambda: (primary.pttl(lock), time.monotonic()),
            lambda seen: seen[0] > before - (seen[1] - read_at) * 1000 + 500,
            timeout=15,
            interval=0.2,
            message="a scheduler renewing its lock on the new primary",
        )


def test_a_stalled_redis_costs_a_request_at_most_3_s(tmp_path_factory) -> None:
    group = _group(tmp_path_factory, "stalled-redis")
    server = RedisServer(group, tmp_path_factory.mktemp("stalled-redis-data"), "redis-stalled")
    server.start()
    web = WebServer(
        _group(tmp_path_factory, "stalled-web"),
        base_env({"REDIS_URL": server.url, "SECRET_KEY": SECRET_KEY}),
    )
    pid = server.process.pid
    try:
        web.start()
        with ApiClient(web.url, timeout=30) as client:
            assert client.get("/api/health").status_code == 200
            os.kill(pid, signal.SIGSTOP)  # accepts connections, answers nothing
            for method, path, kwargs in (
                ("GET", "/api/health", {}),
                ("GET", "/api/tasks/0123456789abcdef0123456789abcdef", {}),
                ("GET", "/api/batches", {}),
                (
                    "POST",
                    "/api/documents",
                    {"files": [("files", ("a.txt", b"some words to ingest", "text/plain"))]},
                ),
                ("GET", "/api/health", {}),
            ):
                started = time.monotonic()
                response = client.request(method, path, **kwargs)
                took = time.monotonic() - started
                assert response.status_code == 503, (path, response.status_code, response.text)
                assert response.headers.get("Retry-After"), path
                assert response.json()["error"]["code"] == "redis_unavailable", path
                assert took <= STALL_BOUND + STALL_MARGIN, (path, took)
                print(f"\nstalled Redis: {method} {path} answered 503 in {took:.2f} s")
            os.kill(pid, signal.SIGCONT)
            poll(
                lambda: client.get("/api/health").status_code,
                lambda s: s == 200,
                timeout=15,
                message="health back to 200 once Redis answers again",
            )
    finally:
        os.kill(pid, signal.SIGCONT)
        web.stop()
        server.close()
