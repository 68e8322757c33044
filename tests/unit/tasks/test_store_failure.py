"""A store that fails halfway through an upload answers 503 and covers no task without its
original (jobs.tasks.unclaim): the files stored keep their tasks, the claims of the others are
taken back, the resend the 503 advises makes new tasks of them, and each document's current
version is again one whose original exists."""

from __future__ import annotations

import pytest

from jobs.core import keys
from jobs.core.settings import Settings
from jobs.tasks import originals
from tests.unit.conftest import upload


@pytest.fixture
def store_fails_after(monkeypatch):
    """originals.put works `n` times, then raises as an unreachable store does."""
    real_put = originals.put

    def arm(n: int) -> None:
        calls = {"left": n}

        def put(*args, **kwargs):
            if calls["left"] == 0:
                raise ConnectionRefusedError(111, "Connection refused")
            calls["left"] -= 1
            return real_put(*args, **kwargs)

        monkeypatch.setattr(originals, "put", put)

    yield arm
    monkeypatch.setattr(originals, "put", real_put)


FILES = [
    ("kept.txt", b"The first file was stored."),
    ("lost-a.txt", b"The store failed on this one."),
    ("lost-b.txt", b"And never saw this one."),
]


def test_a_store_failure_takes_back_the_files_it_did_not_store(
    client, redis, run_jobs, store_fails_after
):
    store_fails_after(1)
    refused = upload(client, *FILES)
    assert refused.status_code == 503, refused.get_json()
    assert refused.get_json()["error"]["code"] == "storage_unavailable"
    assert refused.headers["Retry-After"]

    store_fails_after(10)
    again = upload(client, *FILES)
    assert again.status_code == 202, again.get_json()
    tasks = {t["filename"]: t for t in again.get_json()["tasks"]}
    assert tasks["kept.txt"]["duplicate"] is True, "it was stored: the resend finds it"
    assert tasks["lost-a.txt"]["duplicate"] is False and tasks["lost-b.txt"]["duplicate"] is False
    run_jobs()
    for task in tasks.values():
        final = client.get(f"/api/tasks/{task['id']}").get_json()
        assert final["status"] == "succeeded" and final["attempts"] == 1, final
    assert redis.zcard(keys.active()) == 0, "nothing claimed is left waiting"
    assert int(redis.get(keys.blob_bytes()) or 0) == 0, "every upload budget given back"
    listed = client.get("/api/documents").get_json()
    assert sorted(d["document_id"] for d in listed["documents"]) == sorted(n for n, _ in FILES)
    assert all(d["status"] == "succeeded" for d in listed["documents"]), listed


def test_a_version_not_stored_never_becomes_the_current_one(
    client, redis, run_jobs, store_fails_after
):
    first = upload(client, ("handbook.txt", b"The first edition of the handbook."))
    run_jobs()
    store_fails_after(0)
    refused = upload(
        client,
        ("handbook.txt", b"The second edition, never stored."),
        ("other.txt", b"Another file of the same upload."),
    )
    assert refused.status_code == 503, refused.get_json()

    document = client.get("/api/documents/handbook.txt").get_json()
    assert document["task_id"] == first.get_json()["tasks"][0]["id"], document
    assert document["status"] == "succeeded", document
    assert [t["id"] for t in document["tasks"]] == [document["task_id"]], document
    download = client.get(document["original_url"])
    assert download.status_code == 200 and download.data == b"The first edition of the handbook."
    assert client.get("/api/documents/other.txt").status_code == 404
    batches = client.get("/api/batches").get_json()["batches"]
    assert len(batches) == 1, "the refused upload left no batch"


def test_a_download_falls_back_to_the_newest_version_whose_original_is_stored(
    client, redis, run_jobs
):
    first = upload(client, ("guide.txt", b"Version one of the guide.")).get_json()["tasks"][0]
    run_jobs()
    second = upload(client, ("guide.txt", b"Version two, whose original was lost."))
    second_id = second.get_json()["tasks"][0]["id"]
    originals.delete(Settings(), "default", "guide.txt", [second_id])
    document = client.get("/api/documents/guide.txt").get_json()
    assert document["task_id"] == second_id, "the latest upload is still the current version"
    download = client.get(document["original_url"])
    assert download.status_code == 200, download.get_json()
    assert download.data == b"Version one of the guide.", first


def test_a_reindex_runs_the_newest_version_whose_original_is_stored(client, redis, run_jobs):
    """A canceled (or failed) upload's original goes after the upload retention: re-indexing
    the document then runs the version before it, not a run that fails upload_expired."""
    upload(client, ("manual.txt", b"The manual, first edition."))
    run_jobs()
    second = upload(client, ("manual.txt", b"A second edition, canceled.")).get_json()
    second_id = second["tasks"][0]["id"]
    assert client.post(f"/api/tasks/{second_id}/cancel").status_code == 202
    originals.delete(Settings(), "default", "manual.txt", [second_id])  # as the sweep would
    answer = client.post(
        "/api/documents/reindex", json={"document_ids": ["manual.txt"], "force": True}
    )
    assert answer.status_code == 202, answer.get_json()
    [task] = answer.get_json()["tasks"]
    run_jobs()
    final = client.get(f"/api/tasks/{task['id']}").get_json()
    assert final["status"] == "succeeded", final
    hits = client.get("/api/search?q=edition").get_json()["results"]
    assert [h["text"] for h in hits] == ["The manual, first edition."], hits
