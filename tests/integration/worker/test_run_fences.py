"""Every run and attempt is fenced (docs/architecture.md §7, §8, §9): nothing an older attempt
does can change a newer run's state or bring a deleted document back into the index.

Two worker kinds, both real `rq worker` processes on the real redis-server:
- RQ's SimpleWorker (its own stack, database 4), which ignores RQ's stop command, so a canceled
  attempt goes on until its own checks stop it: what an attempt does after it lost its task
  shows there whole;
- the Procfile's forking IntakeWorker (the fault stack), where RQ's stop command kills the old
  work-horse and RQ then records that stop on the old run's job, while a Retry has already
  started a new run of the same task.
Every embedding request takes 3 s (`slow:3`), so a task is reliably `running` when it is
canceled, retried or deleted; each test counts only the requests that carry its own word.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from rq.job import Job

from tests.integration.faults import (
    chunk_count,
    document,
    failed_ids,
    in_failed_registry,
    running_worker,
    submit_one,
    task,
    wait_running_in_embedding,
)
from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import TERMINAL, get_json, unique_word

pytestmark = pytest.mark.integration

SLOW = "slow:3"
RUN_TIMEOUT = 90.0  # a 3-batch document at 3 s a batch, twice, on a loaded machine


@pytest.fixture(scope="module")
def simple_stack(redis_server, _embedding_server, tmp_path_factory) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "simple",
        4,
        {
            "INTAKE_EMBEDDING_URL": _embedding_server.url,
            "INTAKE_EMBEDDING_TIMEOUT": "5",
            # Every embedding takes 3 s here, a search's query too: past the 2 s default.
            "INTAKE_SEARCH_EMBEDDING_TIMEOUT": "5",
            "INTAKE_MAX_ATTEMPTS": "2",
            "INTAKE_RETRY_BASE_SECONDS": "1",
        },
        embedding=_embedding_server,
        workers=1,
        worker_class="rq.SimpleWorker",
    ) as stack:
        yield stack


@pytest.fixture
def simple(simple_stack: Stack, embedding_server) -> Stack:
    simple_stack.workers.ensure(1)
    return simple_stack


def follow(client: ApiClient, task_id: str, timeout: float = RUN_TIMEOUT) -> list[dict[str, Any]]:
    """Every state of the task seen by polling until it is terminal again."""
    seen: list[dict[str, Any]] = []

    def fetch() -> str:
        seen.append(task(client, task_id))
        return seen[-1]["status"]

    poll(
        fetch,
        lambda status: status in TERMINAL,
        timeout=timeout,
        interval=0.1,
        message="the new run terminal",
    )
    return seen


def assert_one_clean_run(states: list[dict[str, Any]]) -> None:
    """After a Retry: queued, then running attempt 1, then succeeded — never anything else."""
    order = {"pending": 0, "running": 1, "succeeded": 2}
    statuses = [s["status"] for s in states]
    assert set(statuses) <= set(order), statuses
    assert statuses == sorted(statuses, key=order.__getitem__), statuses
    assert all(s["attempts"] <= 1 for s in states), [(s["status"], s["attempts"]) for s in states]
    assert "running" in statuses, "the new run was seen running before it succeeded"
    final = states[-1]
    assert final["attempts"] == 1 and final["error"] is None, final


def a_long_document(word: str) -> str:
    text = document(word, paragraphs=220)
    assert chunk_count(text) > 2 * 64, "three embedding requests or more"
    return text


def test_a_canceled_attempt_on_a_worker_that_ignores_stop_never_writes_into_the_retry(simple):
    word = unique_word()
    simple.embedding.mode = SLOW
    with ApiClient(simple.url) as client:
        task_id = submit_one(client, f"fence-{word}.txt", a_long_document(word))
        wait_running_in_embedding(client, simple, task_id, word)
        assert client.post(f"/api/tasks/{task_id}/cancel").status_code == 202
        retried = client.post(f"/api/tasks/{task_id}/retry")
        assert retried.status_code == 202, retried.text
        asked_by_old = len(simple.embedding.received(word))
        states = follow(client, task_id)
        assert_one_clean_run(states)
        # The old attempt stopped at its next check: at most the request it had in flight,
        # then the new run resumed from the old one's checkpointed batches.
        batches = -(-states[-1]["result"]["chunks"] // 64)
        assert len(simple.embedding.received(word)) <= batches + 1, (
            asked_by_old,
            len(simple.embedding.received(word)),
            batches,
        )
        found = get_json(client, f"/api/search?q={word}&k=50")["results"]
        numbers = [r["chunk"] for r in found if r["task_id"] == task_id]
        assert numbers and len(numbers) == len(set(numbers)), numbers  # indexed once


def test_a_document_deleted_while_running_never_comes_back(simple):
    word = unique_word()
    simple.embedding.mode = SLOW
    name = f"deleted-{word}.txt"
    with ApiClient(simple.url) as client:
        task_id = submit_one(client, name, a_long_document(word))
        wait_running_in_embedding(client, simple, task_id, word)
        assert client.delete(f"/api/documents/{name}").status_code == 204
        simple.embedding.mode = "ok"  # let an attempt that went on finish quickly

        def old_attempt_over() -> bool:
            try:
                job = Job.fetch(task_id, connection=simple.redis())
            except Exception:  # noqa: BLE001 - gone altogether is over too
                return True
            return job.get_status() not in ("started", "queued")

        poll(
            old_attempt_over,
            bool,
            timeout=RUN_TIMEOUT,
            interval=0.2,
            message="the deleted document's attempt ended",
        )
        assert client.get(f"/api/tasks/{task_id}").status_code == 404
        found = get_json(client, f"/api/search?q={word}&k=50")["results"]
        assert [r for r in found if r["document_id"] == name or r["task_id"] == task_id] == []


def test_cancel_then_a_retry_on_forking_workers_is_one_clean_run(fault):
    """The worker parent is paused (SIGSTOP) while the cancel and the Retry are made, so RQ's
    handling of the stop — killing the old horse, recording the old job as stopped — comes
    after the new run exists, as it can on a busy machine. The new run has a job of its own,
    so neither the reconciler nor a worker takes that record for the new run's."""
    word = unique_word()
    fault.embedding.mode = SLOW
    text = document(word, paragraphs=400)  # 7 requests of 64 at 3 s: longer than the grace
    with ApiClient(fault.url) as client:
        task_id = submit_one(client, f"quick-{word}.txt", text)
        wait_running_in_embedding(client, fault, task_id, word)
        _, parent, _ = running_worker(fault, task_id)
        os.kill(parent, signal.SIGSTOP)
        try:
            assert client.post(f"/api/tasks/{task_id}/cancel").status_code == 202
            assert client.post(f"/api/tasks/{task_id}/retry").status_code == 202
        finally:
            os.kill(parent, signal.SIGCONT)
        states = follow(client, task_id, timeout=180)
        assert_one_clean_run(states)
        # The old run's stopped job leaves RQ's failed registry; no dead letter anywhere.
        poll(
            lambda: in_failed_registry(fault, task_id),
            lambda listed: not listed,
            timeout=20,
            interval=0.2,
            message="the canceled run's job left RQ's failed registry",
        )
        assert task_id not in failed_ids(client)
        assert task(client, task_id)["status"] == "succeeded"
