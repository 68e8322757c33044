"""What fails for good becomes a dead letter, readably (docs/architecture.md §3, §4, §8): an
embedder that stays down (a Retry recovers it), an embedder that rejects the request (no automatic
retry, a Retry may help), and bad files (no Retry; the page says what to fix).

On the fault stack, with its bounds and margins: tests/integration/faults.py.
"""

from __future__ import annotations

import pytest

from tests.integration.faults import (
    NOT_RETRIED_FOR,
    TASK_TIMEOUT,
    document,
    encrypted_pdf,
    failed_ids,
    in_failed_registry,
    submit_one,
    task,
    task_page,
)
from tests.integration.helpers import ApiClient, assert_stays, poll
from tests.integration.intake_api import readable_problems, unique_word, upload, wait_terminal
from tests.samples import make_docx, make_pdf_no_text

pytestmark = pytest.mark.integration


def test_an_embedder_that_stays_down_makes_a_dead_letter_that_a_retry_recovers(fault):
    word = unique_word()
    fault.embedding.mode = "status:503"
    with ApiClient(fault.url) as client:
        task_id = submit_one(client, f"down-{word}.txt", document(word))
        final, history = wait_terminal(client, [task_id], timeout=TASK_TIMEOUT)
        failed = final[task_id]
        assert failed["status"] == "failed", failed
        assert failed["attempts"] == 3 == failed["max_attempts"], failed  # INTAKE_MAX_ATTEMPTS
        error = failed["error"]
        assert error["step"] == "embedding" and error["retryable"] is True, failed
        assert error["type"] == "embedding_unavailable", failed
        assert readable_problems(error["message"]) == [], failed
        assert failed["current_step"] == "failed" and failed["next_attempt_at"] is None, failed
        assert len(fault.embedding.received(word)) == 3, fault.embedding.received(word)
        assert "retrying" in {snap["status"] for snap in history[task_id]}, history[task_id]

        assert task_id in failed_ids(client)  # GET /api/failed: Intake's dead letters
        assert f'data-task-id="{task_id}"' in client.get("/failed").text  # the /failed page
        # RQ's FailedJobRegistry: the worker files the job there just after the task's record
        # says failed (RQ's handle_job_failure runs once the job function has returned).
        poll(
            lambda: in_failed_registry(fault, task_id),
            timeout=10,
            interval=0.1,
            message="the dead letter in RQ's FailedJobRegistry",
        )
        retry_form, _ = task_page(client, task_id)
        assert "hidden" not in retry_form, retry_form  # the page offers Retry
        steps_before = {s["name"]: s for s in failed["steps"]}

        fault.embedding.mode = "ok"
        response = client.post(f"/api/tasks/{task_id}/retry")
        assert response.status_code == 202, response.text[:500]
        body = response.json()
        assert body["id"] == task_id, body
        assert body["status"] in ("pending", "running", "succeeded"), body
        assert body["error"] is None, body

        final, _ = wait_terminal(client, [task_id], timeout=TASK_TIMEOUT)
        done = final[task_id]
        assert done["status"] == "succeeded", done
        assert done["attempts"] == 1, done  # a new run counts its attempts from the start
        assert done["error"] is None and done["result"]["chunks"] >= 2, done
        assert len(fault.embedding.received(word)) == 4
        assert task_id not in failed_ids(client)
        assert f'data-task-id="{task_id}"' not in client.get("/failed").text
        assert not in_failed_registry(fault, task_id)
        # The manual retry resumed after chunking too: parsing kept the first run's timing.
        steps_after = {s["name"]: s for s in done["steps"]}
        for name in ("parsing", "chunking"):
            assert steps_after[name] == steps_before[name], (steps_before, steps_after)


def test_an_embedder_400_fails_at_once_but_a_retry_may_help(fault):
    word = unique_word()
    fault.embedding.mode = "status:400"
    with ApiClient(fault.url) as client:
        task_id = submit_one(client, f"rejected-{word}.txt", document(word))
        failed = wait_terminal(client, [task_id], timeout=TASK_TIMEOUT)[0][task_id]
        assert failed["status"] == "failed", failed
        assert failed["attempts"] == 1, failed
        error = failed["error"]
        assert error["step"] == "embedding" and error["retryable"] is True, failed
        assert error["type"] == "embedding_rejected" and "400" in error["message"], failed
        assert readable_problems(error["message"]) == [], failed

        # No automatic retry: with a 2 s backoff one would have reached the embedder by now.
        def fetch() -> tuple[str, int, int]:
            seen = task(client, task_id)
            return seen["status"], seen["attempts"], len(fault.embedding.received(word))

        assert_stays(
            fetch,
            lambda v: v == ("failed", 1, 1),
            duration=NOT_RETRIED_FOR,
            message="a 400 from the embedder was retried automatically",
        )
        assert task_id in failed_ids(client)
        retry_form, text = task_page(client, task_id)
        assert "hidden" not in retry_form, retry_form  # retryable: fix the configuration, Retry
        assert "Retry may work" in text, text


@pytest.mark.parametrize("kind", ["encrypted-pdf", "pdf-without-text", "truncated-docx"])
def test_a_bad_file_fails_at_once_cannot_be_retried_and_the_page_says_what_to_fix(fault, kind):
    word = unique_word()
    name, content, mimetype = {
        "encrypted-pdf": (
            f"locked-{word}.pdf",
            encrypted_pdf(f"The {word} secret plan."),
            "application/pdf",
        ),
        "pdf-without-text": (f"scan-{word}.pdf", make_pdf_no_text(), "application/pdf"),
        "truncated-docx": (
            f"broken-{word}.docx",
            make_docx([f"The {word} memo."])[:100],
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ),
    }[kind]
    with ApiClient(fault.url) as client:
        response, _ = upload(client, [(name, content, mimetype)])
        assert response.status_code == 202, response.text[:500]
        assert response.json()["rejected"] == [], response.json()
        task_id = response.json()["tasks"][0]["id"]
        failed = wait_terminal(client, [task_id], timeout=TASK_TIMEOUT)[0][task_id]
        assert failed["status"] == "failed", failed
        assert failed["attempts"] == 1, failed
        error = failed["error"]
        assert error["retryable"] is False and error["step"] == "parsing", failed
        assert (
            error["type"]
            == {
                "encrypted-pdf": "encrypted",
                "pdf-without-text": "no_text",
                "truncated-docx": "corrupt",
            }[kind]
        ), failed
        assert readable_problems(error["message"]) == [], failed

        assert_stays(
            lambda: (task(client, task_id)["status"], task(client, task_id)["attempts"]),
            lambda v: v == ("failed", 1),
            duration=NOT_RETRIED_FOR,
            message="a bad file was retried automatically",
        )

        retry_form, text = task_page(client, task_id)
        assert "hidden" in retry_form, retry_form  # no visible Retry
        assert "fix it and upload it again" in text, text
        assert error["message"] in text, text

        response = client.post(f"/api/tasks/{task_id}/retry")
        assert response.status_code == 409, response.text[:500]
        assert response.json()["error"]["code"] == "not_retryable", response.json()
        assert task(client, task_id)["status"] == "failed"
