"""Cancel, retry, dead letters and the reconciler on fakeredis (docs/architecture.md §3, §8)."""

from __future__ import annotations

import json

from rq.job import Job
from rq.registry import FailedJobRegistry

from jobs import Settings
from jobs.core import keys
from jobs.core.failures import PermanentError, TransientError
from jobs.embedding.embedders import LocalEmbedder
from jobs.worker.reconcile import reconcile
from tests.samples import make_pdf_no_text
from tests.unit.conftest import upload

TEXT = b"Words to embed, many words. " * 50


class _FailingEmbedder:
    """The local embedder's model and dimension (the same pipeline version: a configuration
    fixed between two runs leaves the model as it was), failing every call."""

    model, dimension, batch_size = LocalEmbedder.model, LocalEmbedder().dimension, 4

    def __init__(self, error):
        self.error = error

    def embed(self, texts):
        raise self.error


def _one(client, *files):
    return upload(client, *files).get_json()["tasks"][0]["id"]


def _task(client, task_id):
    return client.get(f"/api/tasks/{task_id}").get_json()


def test_cancel_a_pending_task_removes_its_job(client, redis, run_jobs):
    task_id = _one(client, ("a.txt", TEXT))
    response = client.post(f"/api/tasks/{task_id}/cancel")
    assert response.status_code == 202 and response.get_json()["status"] == "canceled"
    assert redis.llen("rq:queue:intake-high") == 0
    run_jobs()
    assert _task(client, task_id)["status"] == "canceled"
    assert client.post(f"/api/tasks/{task_id}/cancel").status_code == 409
    assert client.get("/api/failed").get_json()["tasks"] == []


def test_retry_of_a_canceled_task_is_a_new_run_of_the_same_id(client, redis, run_jobs):
    task_id = _one(client, ("a.txt", TEXT))
    client.post(f"/api/tasks/{task_id}/cancel")
    retried = client.post(f"/api/tasks/{task_id}/retry")
    assert retried.status_code == 202 and retried.get_json()["status"] == "pending"
    run_jobs()
    task = _task(client, task_id)
    assert task["status"] == "succeeded" and task["attempts"] == 1
    assert client.post(f"/api/tasks/{task_id}/retry").status_code == 409
    assert client.post(f"/api/tasks/{task_id}/cancel").status_code == 409


def test_a_bad_file_is_a_dead_letter_that_cannot_be_retried(client, run_jobs):
    task_id = _one(client, ("scan.pdf", make_pdf_no_text()))
    run_jobs()
    failed = client.get("/api/failed").get_json()["tasks"]
    assert [t["id"] for t in failed] == [task_id]
    response = client.post(f"/api/tasks/{task_id}/retry")
    assert response.status_code == 409
    assert response.get_json()["error"]["code"] == "not_retryable"


def test_retry_after_a_configuration_error_resumes_from_the_checkpoint(client, run_jobs, redis):
    rejected = PermanentError(
        "The embedding service refused the API key (HTTP 401).",
        code="embedding_rejected",
        retryable=True,
    )
    task_id = _one(client, ("a.txt", TEXT))
    run_jobs(_FailingEmbedder(rejected))
    task = _task(client, task_id)
    assert task["status"] == "failed" and task["attempts"] == 1 and task["error"]["retryable"]
    parsed_at = {s["name"]: s["started_at"] for s in task["steps"]}

    batch = task["batch_id"]
    assert client.post(f"/api/batches/{batch}/retry-failed").get_json() == {
        "retried": 1,
        "skipped": 0,
    }
    run_jobs()
    task = _task(client, task_id)
    assert task["status"] == "succeeded" and task["attempts"] == 1
    steps = {s["name"]: s for s in task["steps"]}
    assert steps["parsing"]["started_at"] == parsed_at["parsing"], "parsing was not redone"
    assert steps["embedding"]["started_at"] != parsed_at["embedding"]
    assert redis.exists(keys.checkpoint(task_id)) == 0
    assert client.get("/api/failed").get_json()["tasks"] == []


def test_a_transient_failure_after_a_quick_parse_keeps_the_parse_for_the_retry(
    client, run_jobs, redis
):
    # A quick parse's checkpoint is not sent on its own: it must travel with the failure.
    task_id = _one(client, ("a.txt", TEXT))
    run_jobs(_FailingEmbedder(TransientError("down", code="embedding_unavailable")))
    task = _task(client, task_id)
    assert task["status"] == "retrying" and task["error"]["type"] == "embedding_unavailable"
    assert redis.hexists(keys.checkpoint(task_id), "chunks")


def test_cancel_all_of_a_batch(client):
    body = upload(client, ("a.txt", TEXT), ("b.txt", b"other words")).get_json()
    assert client.post(f"{body['url']}/cancel").get_json() == {"canceled": 2}
    assert client.get(body["url"]).get_json()["status"] == "canceled"
    assert client.post("/api/batches/nope/cancel").status_code == 404


def test_reconciler_fails_a_task_whose_job_vanished(client, redis):
    task_id = _one(client, ("a.txt", TEXT))
    redis.delete(f"rq:job:{task_id}")
    assert reconcile(redis, Settings())["failed"] == 0, "a fresh record is given a grace period"
    assert reconcile(redis, Settings(), grace_seconds=-1)["failed"] == 1
    task = _task(client, task_id)
    assert task["status"] == "failed" and task["error"]["type"] == "job_lost"
    assert task["error"]["retryable"] is True
    assert [t["id"] for t in client.get("/api/failed").get_json()["tasks"]] == [task_id]


def test_reconciler_shows_a_retry_of_a_lost_attempt(client, redis, run_jobs):
    task_id = _one(client, ("a.txt", TEXT))
    run_jobs(_FailingEmbedder(TransientError("down", code="embedding_unavailable")))
    # As after a lost machine: the record still says running while RQ has scheduled a retry.
    redis.hset(keys.task(task_id), mapping={"status": "running", "error": ""})
    assert reconcile(redis, Settings(), grace_seconds=-1)["retrying"] == 1
    task = _task(client, task_id)
    assert task["status"] == "retrying" and task["error"]["type"] == "worker_lost"
    assert task["next_attempt_at"]


def test_reconciler_takes_a_stopped_cancel_out_of_the_failed_registry(client, redis):
    task_id = _one(client, ("a.txt", TEXT))
    job = Job.fetch(task_id, connection=redis)
    registry = FailedJobRegistry("intake-high", connection=redis)
    registry.add(job, exc_string="stopped")
    job.set_status("stopped")
    redis.sadd(keys.canceling(), task_id)
    assert reconcile(redis, Settings())["uncanceled"] == 1
    assert registry.get_job_ids(cleanup=False) == []


def test_error_json_is_readable(client, run_jobs):
    task_id = _one(client, ("scan.pdf", make_pdf_no_text()))
    run_jobs()
    error = _task(client, task_id)["error"]
    assert set(error) == {"step", "type", "message", "retryable"}
    assert "Traceback" not in json.dumps(error)


def test_a_delete_of_one_version_leaves_an_upload_that_lands_between_its_check_and_exec(
    client, run_jobs, monkeypatch
):
    from jobs.tasks import lifecycle

    first = _one(client, ("readme.md", b"The folder's readme about ospreys."))
    run_jobs()
    check, landed = lifecycle.current_version, []

    def upload_meanwhile(latest, indexed):  # the upload arrives right after the check read
        if not landed:
            landed.append(_one(client, ("readme.md", b"The API's readme about kestrels.")))
        return check(latest, indexed)

    monkeypatch.setattr(lifecycle, "current_version", upload_meanwhile)
    service = client.application.extensions["intake"]
    assert service.delete_document("default", "readme.md", version=first) is False
    assert _task(client, landed[0])["status"] == "pending", "the newer upload is not canceled"
    run_jobs()
    hits = client.get("/api/search?q=kestrels").get_json()["results"]
    assert [hit["document_id"] for hit in hits] == ["readme.md"]
    assert service.delete_document("default", "readme.md", version=landed[0]) is True
    assert client.get("/api/search?q=kestrels").get_json()["results"] == []


def test_a_job_canceled_behind_intakes_back_gives_back_its_upload_budget(client, redis):
    task_id = _one(client, ("a.txt", TEXT))
    assert int(redis.get(keys.tenant_blob_bytes("default"))) == len(TEXT)
    Job.fetch(task_id, connection=redis).cancel()  # RQ's own cancel, not Intake's
    assert reconcile(redis, Settings(), grace_seconds=-1)["canceled"] == 1
    assert _task(client, task_id)["status"] == "canceled"
    assert int(redis.get(keys.tenant_blob_bytes("default"))) == 0
    assert int(redis.get(keys.blob_bytes())) == 0
