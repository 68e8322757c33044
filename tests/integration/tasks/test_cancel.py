"""Cancel (docs/architecture.md §3, §8): a running task stops within 2 s and leaves nothing indexed,
a pending one never runs, and finished tasks answer 409.

On the fault stack, with its bounds and margins: tests/integration/faults.py.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.faults import (
    CANCEL_BOUND,
    NOT_RETRIED_FOR,
    POLL_INTERVAL,
    SLOW,
    TASK_TIMEOUT,
    chunk_count,
    document,
    failed_ids,
    in_failed_registry,
    rq_job_status,
    submit_one,
    task,
    wait_running_in_embedding,
)
from tests.integration.helpers import ApiClient, assert_stays, poll
from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal
from tests.samples import make_pdf_no_text

pytestmark = pytest.mark.integration


def test_cancel_of_a_running_task_stops_it_within_2_s_and_leaves_nothing(fault):
    word = unique_word()
    text = document(word, paragraphs=220)
    assert chunk_count(text) > 2 * 64, chunk_count(text)  # ≥ 3 embedding requests of 64 chunks
    fault.embedding.mode = SLOW
    with ApiClient(fault.url) as client:
        task_id = submit_one(client, f"cancel-{word}.txt", text)
        wait_running_in_embedding(client, fault, task_id, word)

        response = client.post(f"/api/tasks/{task_id}/cancel")
        answered = time.monotonic()
        assert response.status_code == 202, response.text[:500]
        assert response.json()["status"] == "canceled", response.json()
        asked = len(fault.embedding.received(word))

        # Canceled, and the attempt has stopped (its RQ job no longer started), within 2 s.
        def fetch() -> tuple[str, str | None]:
            return task(client, task_id)["status"], rq_job_status(fault, task_id)

        poll(
            fetch,
            lambda v: v[0] == "canceled" and v[1] != "started",
            timeout=CANCEL_BOUND + 5,
            interval=POLL_INTERVAL,
            message="canceled and stopped",
        )
        took = time.monotonic() - answered
        print(f"cancel: stopped {took:.3f} s after the answer")
        assert took <= CANCEL_BOUND + POLL_INTERVAL, f"stopped {took:.2f} s after the cancel"

        # The embedder hears nothing more of it: two more slow requests would have come by now.
        def later() -> tuple[str, int, int]:
            seen = task(client, task_id)
            return seen["status"], seen["attempts"], len(fault.embedding.received(word))

        assert_stays(
            later,
            lambda v: v == ("canceled", 1, asked),
            duration=7.0,
            message="a canceled task went on (or was retried)",
        )

        final = task(client, task_id)
        assert final["current_step"] == "canceled" and final["error"] is None, final
        assert final["next_attempt_at"] is None and final["result"] is None, final
        fault.embedding.mode = "ok"
        found = get_json(client, f"/api/search?q={word}&k=50")["results"]
        assert [r for r in found if r["task_id"] == task_id or word in r["text"]] == [], found
        assert task_id not in failed_ids(client)
        # The stop lands RQ's job in its failed registry; the reconciler takes it out.
        poll(
            lambda: in_failed_registry(fault, task_id),
            lambda found: not found,
            timeout=15,
            interval=0.2,
            message="the canceled job left RQ's FailedJobRegistry",
        )
        assert task_id not in failed_ids(client)


def test_cancel_of_a_pending_task_means_it_never_runs(fault):
    word = unique_word()
    fault.workers.stop_all()  # nothing takes it from the queue until it is canceled
    with ApiClient(fault.url) as client:
        task_id = submit_one(client, f"pending-{word}.txt", document(word))
        assert task(client, task_id)["status"] == "pending"
        response = client.post(f"/api/tasks/{task_id}/cancel")
        assert response.status_code == 202, response.text[:500]
        assert response.json()["status"] == "canceled", response.json()
        assert rq_job_status(fault, task_id) is None  # the queued job is gone

        fault.workers.ensure(2)

        def fetch() -> tuple[str, int, int]:
            seen = task(client, task_id)
            return seen["status"], seen["attempts"], len(fault.embedding.received(word))

        assert_stays(
            fetch,
            lambda v: v == ("canceled", 0, 0),
            duration=NOT_RETRIED_FOR,
            message="a task canceled while pending ran",
        )
        final = task(client, task_id)
        assert final["started_at"] is None and final["steps"] == [], final
        assert task_id not in failed_ids(client)


def test_retry_of_a_succeeded_task_and_cancel_of_a_finished_one_answer_409(fault):
    word = unique_word()
    with ApiClient(fault.url) as client:
        response, _ = upload(
            client,
            [
                txt(f"done-{word}.txt", document(word)),
                (f"scan-{word}.pdf", make_pdf_no_text(), "application/pdf"),
            ],
        )
        assert response.status_code == 202, response.text[:500]
        ids = {t["filename"].rsplit(".", 1)[1]: t["id"] for t in response.json()["tasks"]}
        final, _ = wait_terminal(client, list(ids.values()), timeout=TASK_TIMEOUT)
        assert final[ids["txt"]]["status"] == "succeeded", final
        assert final[ids["pdf"]]["status"] == "failed", final

        for action, task_id in (
            ("retry", ids["txt"]),
            ("cancel", ids["txt"]),
            ("cancel", ids["pdf"]),
        ):
            response = client.post(f"/api/tasks/{task_id}/{action}")
            assert response.status_code == 409, (action, final[task_id]["status"], response.text)
            assert response.json()["error"]["code"] == "conflict", response.json()
            assert task(client, task_id)["status"] == final[task_id]["status"]
