"""The task state machine (docs/architecture.md §3) as a person meets it: which statuses can be
canceled or retried, and the `can_cancel`/`can_retry` the task and batch JSON carry, which the
pages' buttons follow (jobs.tasks.states is the one place that decides)."""

from __future__ import annotations

import pytest

from jobs.core.failures import PermanentError
from jobs.embedding.embedders import LocalEmbedder
from jobs.tasks import states
from tests.samples import make_pdf_no_text
from tests.unit.conftest import upload

TEXT = b"Words to embed, many words. " * 50
RETRYABLE = {"type": "embedding_rejected", "retryable": True}
BAD_FILE = {"type": "no_text", "retryable": False}


@pytest.mark.parametrize(
    "status, error, cancel, retry",
    [
        ("pending", None, True, False),
        ("running", None, True, False),
        ("retrying", RETRYABLE, True, False),
        ("succeeded", None, False, False),
        ("failed", RETRYABLE, False, True),
        ("failed", BAD_FILE, False, False),
        ("failed", None, False, False),
        ("canceled", None, False, True),
        (None, None, False, False),
    ],
)
def test_who_can_be_canceled_and_retried(status, error, cancel, retry):
    assert (states.can_cancel(status), states.can_retry(status, error)) == (cancel, retry)


def test_every_status_reached_by_a_transition_and_every_source_a_status():
    targets = {transition.target for transition in states.TRANSITIONS}
    assert targets | {states.PENDING} == set(states.STATUSES)
    for transition in states.TRANSITIONS:
        assert set(transition.sources) <= set(states.STATUSES), transition.name
        assert transition.allows(transition.sources[0])
    assert not states.SUCCEED.allows(states.PENDING)
    assert set(states.TERMINAL).isdisjoint(states.CANCEL.sources)


class _Refusing:
    model, dimension, batch_size = LocalEmbedder.model, LocalEmbedder().dimension, 4

    def embed(self, texts):
        raise PermanentError(
            "The embedding service refused the API key (HTTP 401).",
            code="embedding_rejected",
            retryable=True,
        )


def _flags(client, task_id):
    task = client.get(f"/api/tasks/{task_id}").get_json()
    return task["status"], task["can_cancel"], task["can_retry"]


def _batch_flags(client, batch_id):
    batch = client.get(f"/api/batches/{batch_id}").get_json()
    return batch["can_cancel"], batch["can_retry"]


def test_the_task_and_batch_json_say_what_a_person_can_do(client, run_jobs):
    answer = upload(client, ("a.txt", TEXT), ("scan.pdf", make_pdf_no_text())).get_json()
    text, scan = (task["id"] for task in answer["tasks"])
    batch = answer["batch_id"]
    assert _flags(client, text) == ("pending", True, False)
    assert _batch_flags(client, batch) == (True, False)

    run_jobs(_Refusing())
    assert _flags(client, text) == ("failed", False, True)  # a Retry can help
    assert _flags(client, scan) == ("failed", False, False)  # a bad file: it cannot
    assert _batch_flags(client, batch) == (False, True)

    assert client.post(f"/api/tasks/{text}/retry").status_code == 202
    assert _flags(client, text) == ("pending", True, False)
    assert client.post(f"/api/tasks/{text}/cancel").status_code == 202
    assert _flags(client, text) == ("canceled", False, True)
    assert client.post(f"/api/tasks/{text}/retry").status_code == 202
    run_jobs()
    assert _flags(client, text) == ("succeeded", False, False)
    assert _batch_flags(client, batch) == (False, False)
