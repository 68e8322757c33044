"""Fair share between tenants on the real system (docs/architecture.md §15): one
tenant's backlog never starves another's few documents, priorities hold within a tenant, RQ's
own tools show every tenant's queues, and the retries of a tenant's queue come back.

A stack of its own (logical database 11, eight tenants from INTAKE_API_KEYS): the Procfile's web
and two `rq worker` processes with the HTTP embedder (the test's embedding server, so a fault can
be injected). Each test uses tenants no other test uses, so a tenant's queues are new to the
running workers when its first upload arrives: they learn them from Redis, never from the keys.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from rq import Queue

from jobs.core import queues
from tests.integration.faults import (
    HORSE_BOUND,
    SLOW,
    TASK_TIMEOUT,
    document,
    running_worker,
    submit_one,
    task,
    wait_running_in_embedding,
)
from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, iso, txt, unique_word, upload, wait_terminal

pytestmark = pytest.mark.integration

DATABASE = 11  # nothing else uses this one (the webhooks stack has 7)
TENANTS = {
    name: f"{name}-key-{n}2345678-0123456789ab"
    for n, name in enumerate(("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"))
}
ADMIN_PASSWORD = "fair-share-operator"
OPERATOR = {
    "Authorization": "Basic " + base64.b64encode(f"admin:{ADMIN_PASSWORD}".encode()).decode()
}  # per-tenant health is for operators
BACKLOG = 120  # tenant A's bulk upload
FEW = 12  # tenant B's upload behind it
# An idle worker blocks in RQ's dequeue for 5 s (--worker-ttl 20) before it reads its queue
# list again; a worker that learns a new tenant (within its 1 s tick) wakes one at once.
NEW_TENANT_BOUND = 3.0
# B's documents are done in about the time of 2 × FEW documents: A may finish FEW of its own
# meanwhile, plus one in flight per worker when B arrived and a few while B's last ones run.
MARGIN = 6
BACKLOG_TIMEOUT = 240.0
LIBRARY = 60  # tenant eta's documents, re-indexed while a few fresh uploads arrive


@pytest.fixture(scope="module")
def fair(redis_server, _embedding_server, tmp_path_factory) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "fair",
        DATABASE,
        {
            "INTAKE_API_KEYS": ",".join(f"{t}:{k}" for t, k in TENANTS.items()),
            "INTAKE_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "INTAKE_EMBEDDING_URL": _embedding_server.url,
            "INTAKE_EMBEDDING_TIMEOUT": "4",
            "INTAKE_MAX_ATTEMPTS": "3",
            "INTAKE_RETRY_BASE_SECONDS": "1",
        },
        embedding=_embedding_server,
    ) as stack:
        yield stack


@pytest.fixture
def stack(fair: Stack, embedding_server) -> Stack:
    fair.workers.ensure(2)
    return fair


def client_of(stack: Stack, tenant: str) -> ApiClient:
    return ApiClient(stack.url, api_key=TENANTS[tenant])


def tiny(count: int, word: str, tag: str) -> list[tuple[str, bytes, str]]:
    return [
        txt(f"{tag}{n}-{word}.txt", f"Tiny {tag} document {n} about {word}.") for n in range(count)
    ]


def submit(client: ApiClient, files: list[tuple[str, bytes, str]], **form: str) -> dict[str, Any]:
    response, _ = upload(client, files, **form)
    assert response.status_code == 202, response.text[:500]
    return response.json()


def batch_tasks(client: ApiClient, batch: dict[str, Any]) -> list[dict[str, Any]]:
    return get_json(client, f"/api/batches/{batch['batch_id']}")["tasks"]


def wait_batch_done(client: ApiClient, batch: dict[str, Any], timeout: float) -> list[dict]:
    """Poll the batch (one request for all its tasks) until every task is terminal."""
    return poll(
        lambda: batch_tasks(client, batch),
        lambda found: all(t["status"] in ("succeeded", "failed", "canceled") for t in found),
        timeout=timeout,
        interval=0.2,
        message="every task of the batch terminal",
    )


def ended(tasks: list[dict[str, Any]]) -> list[float]:
    return sorted(iso(t["ended_at"], "ended_at").timestamp() for t in tasks)


@dataclass
class Contest:
    a_bulk: list[dict[str, Any]]
    a_high: dict[str, Any]
    b_tasks: list[dict[str, Any]]
    b_submitted: float
    a_done_at_b: int


@pytest.fixture(scope="module")
def contest(fair: Stack, _embedding_server) -> Contest:
    """Tenant alpha's 120-document backlog is being worked when beta (new to the workers)
    uploads 12 and then alpha one document of its own (intake-high.alpha)."""
    fair.workers.ensure(2)
    _embedding_server.reset()
    word = unique_word()
    with client_of(fair, "alpha") as alpha, client_of(fair, "beta") as beta:
        a_batch = submit(alpha, tiny(BACKLOG, word, "a"))
        poll(
            lambda: get_json(alpha, f"/api/batches/{a_batch['batch_id']}")["counts"],
            lambda counts: counts["succeeded"] >= 4,
            timeout=60,
            interval=0.1,
            message="alpha's backlog under way",
        )
        b_batch = submit(beta, tiny(FEW, word, "b"))
        b_submitted = time.time()  # its jobs are queued when the answer comes (same clock)
        a_done = get_json(alpha, f"/api/batches/{a_batch['batch_id']}")["counts"]["succeeded"]
        a_high = submit(alpha, tiny(1, word, "urgent"))
        b_tasks = wait_batch_done(beta, b_batch, timeout=120)
        a_bulk = wait_batch_done(alpha, a_batch, timeout=BACKLOG_TIMEOUT)
        [a_high_task] = wait_batch_done(alpha, a_high, timeout=60)
    return Contest(a_bulk, a_high_task, b_tasks, b_submitted, a_done)


def test_a_tenants_few_documents_are_not_starved_by_anothers_backlog(contest):
    assert {t["status"] for t in contest.b_tasks + contest.a_bulk} == {"succeeded"}
    b_last = ended(contest.b_tasks)[-1]
    a_ends = ended(contest.a_bulk)
    a_meanwhile = sum(contest.b_submitted < end <= b_last for end in a_ends)
    a_left = sum(end > b_last for end in a_ends)
    b_first_start = min(iso(t["started_at"], "started_at").timestamp() for t in contest.b_tasks)
    print(
        f"beta's {FEW}: first started {b_first_start - contest.b_submitted:.2f} s after its "
        f"upload, all done {b_last - contest.b_submitted:.2f} s after it; alpha finished "
        f"{a_meanwhile} meanwhile ({contest.a_done_at_b} before), {a_left} after"
    )
    assert a_meanwhile <= FEW + MARGIN, (
        f"alpha finished {a_meanwhile} documents while beta's {FEW} waited"
    )
    assert a_left >= BACKLOG - contest.a_done_at_b - FEW - MARGIN - 10, (
        "beta's documents did not wait for alpha's backlog"
    )


def test_priorities_still_hold_within_a_tenant(contest):
    assert contest.a_high["status"] == "succeeded", contest.a_high
    high_end = iso(contest.a_high["ended_at"], "ended_at").timestamp()
    a_after = sum(end > high_end for end in ended(contest.a_bulk))
    assert a_after >= BACKLOG // 2, (
        f"alpha's own urgent document waited for its bulk: only {a_after} of it came after"
    )


def _rq_cli(stack: Stack, *args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "rq.cli", *args, "--url", stack.redis_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout


def test_rq_info_and_the_dashboard_list_each_tenants_queues_with_their_counts(stack):
    """With the workers stopped, gamma's work waits in its own queues, where RQ's tools see it;
    workers started afterwards learn gamma's queues from Redis and do the work."""
    for name in list(stack.workers.names):
        stack.workers.stop(name)
    word = unique_word()
    with client_of(stack, "gamma") as gamma:
        normal = submit(gamma, tiny(5, word, "n"), priority="normal")
        bulk = submit(gamma, tiny(7, word, "k"), priority="bulk")
        info = _rq_cli(stack, "info")
        listed_by_rq = dict(re.findall(r"^(\S+)\s*\|\W*(\d+),", info, re.M))
        assert listed_by_rq["intake.gamma"] == "5", info
        assert listed_by_rq["intake-bulk.gamma"] == "7", info
        counts = {q.name: q.count for q in Queue.all(connection=stack.redis())}
        assert counts["intake.gamma"] == 5 and counts["intake-bulk.gamma"] == 7, counts
        listed = {
            q["name"]: q["count"]
            for q in get_json_as(stack, "/rq/0/data/queues.json", OPERATOR)["queues"]
        }
        assert listed["intake.gamma"] == 5 and listed["intake-bulk.gamma"] == 7, listed
        health = get_json_as(stack, "/api/health", OPERATOR)
        assert health["queues"]["intake.gamma"] == 5 and health["priorities"]["bulk"] >= 7
        stack.workers.ensure(2)
        wait_batch_done(gamma, normal, timeout=60)
        wait_batch_done(gamma, bulk, timeout=60)
        info = _rq_cli(stack, "info")
        worker_lines = [
            line
            for line in info.splitlines()
            if "intake-bulk.gamma" in line and any(name in line for name in stack.workers.names)
        ]
        assert worker_lines, f"no worker listed on gamma's queues:\n{info}"


def get_json_as(stack: Stack, path: str, headers: dict[str, str]) -> dict[str, Any]:
    with ApiClient(stack.url) as client:
        response = client.get(path, headers=headers)
        assert response.status_code == 200, response.text[:300]
        return response.json()


def test_a_retry_with_backoff_of_a_new_tenants_queue_comes_back(stack):
    """delta's queues are new to the running workers: the scheduler lock of intake-high.delta
    is taken by a worker (jobs.worker.fairshare), which brings the retry back after its backoff."""
    word = unique_word()
    stack.embedding.fail_next(1, "status:503", match=word)
    with client_of(stack, "delta") as delta:
        task_id = submit_one(delta, f"flaky-{word}.txt", document(word))
        final, history = wait_terminal(delta, [task_id], timeout=TASK_TIMEOUT)
        health = get_json_as(stack, "/api/health", OPERATOR)
    final = final[task_id]
    assert final["status"] == "succeeded" and final["attempts"] == 2, final
    assert "retrying" in [snap["status"] for snap in history[task_id]]
    assert [r.mode for r in stack.embedding.received(word)] == ["status:503", "ok"]
    assert queues.tenant_queue_names("delta")[0] not in health["unscheduled"], health


def test_a_killed_work_horse_of_a_tenant_queue_job_is_retried(stack):
    word = unique_word()
    stack.embedding.mode = SLOW
    with client_of(stack, "epsilon") as epsilon:
        task_id = submit_one(epsilon, f"crash-{word}.txt", document(word))
        running = wait_running_in_embedding(epsilon, stack, task_id, word)
        _, _, horse = running_worker(stack, task_id)
        os.kill(horse, signal.SIGKILL)
        killed = time.monotonic()
        stack.embedding.mode = "ok"
        poll(
            lambda: task(epsilon, task_id),
            lambda t: t["status"] != "running" or t["attempts"] > running["attempts"],
            timeout=HORSE_BOUND,
            interval=0.25,
            message="the task left `running`",
        )
        took = time.monotonic() - killed
        final = wait_terminal(epsilon, [task_id], timeout=TASK_TIMEOUT)[0][task_id]
    print(f"killed horse of intake-high.epsilon: left running after {took:.1f} s")
    assert final["status"] == "succeeded" and final["attempts"] >= 2, final


def test_idle_workers_take_a_new_tenants_first_document_at_once(stack):
    """Both workers idle in RQ's dequeue on the queues they knew: zeta's first upload is
    started within a tick and a wake-up, not after a whole dequeue timeout."""
    poll(
        lambda: get_json(client_of(stack, "zeta"), "/api/health")["priorities"],
        lambda depth: not any(depth.values()),
        timeout=60,
        message="nothing queued",
    )
    word = unique_word()
    with client_of(stack, "zeta") as zeta:
        batch = submit(zeta, tiny(1, word, "z"))
        submitted = time.time()
        [done] = wait_batch_done(zeta, batch, timeout=30)
    waited = iso(done["started_at"], "started_at").timestamp() - submitted
    print(f"a new tenant's first document started {waited:.2f} s after its upload")
    assert done["status"] == "succeeded" and waited <= NEW_TENANT_BOUND, (waited, done)


def test_a_reindex_lets_fresh_uploads_and_other_tenants_go_first(stack):
    """A re-index runs on the bulk queue: while eta's library is re-indexed, theta's upload and
    eta's own fresh document are done after a few of its documents, not after all of them; the
    re-index then ends with every document run again."""
    word = unique_word()
    with client_of(stack, "eta") as eta, client_of(stack, "theta") as theta:
        known = submit(theta, tiny(1, word, "known"))  # theta's queues known to the workers
        library = submit(eta, tiny(LIBRARY, word, "lib"))
        wait_batch_done(theta, known, timeout=60)
        wait_batch_done(eta, library, timeout=BACKLOG_TIMEOUT)
        response = eta.post("/api/documents/reindex", json={"all": True, "force": True})
        assert response.status_code == 202, response.text[:300]
        reindex = response.json()
        assert len(reindex["tasks"]) == LIBRARY

        def reindexed() -> int:
            return get_json(eta, f"/api/batches/{reindex['batch_id']}")["counts"]["succeeded"]

        poll(
            reindexed,
            lambda done: done >= 4,
            timeout=60,
            interval=0.1,
            message="the re-index under way",
        )
        fresh = [
            (theta, submit(theta, tiny(3, word, "t"))),
            (eta, submit(eta, tiny(1, word, "fresh"))),
        ]
        before = reindexed()
        for client, batch in fresh:
            done = wait_batch_done(client, batch, timeout=60)
            assert {t["status"] for t in done} == {"succeeded"}, done
        meanwhile = reindexed() - before
        print(
            f"re-index: {before} of {LIBRARY} done when 4 fresh documents arrived, "
            f"{meanwhile} more while they ran"
        )
        assert meanwhile <= 4 + MARGIN, (
            f"the fresh documents waited for {meanwhile} documents of the re-index"
        )
        final = wait_batch_done(eta, reindex, timeout=BACKLOG_TIMEOUT)
    assert len(final) == LIBRARY and {t["status"] for t in final} == {"succeeded"}
