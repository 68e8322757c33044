"""Originals on fakeredis and a real directory: stored once as uploaded, read by the worker,
downloaded as an attachment by their tenant only, deleted with their document, swept when
their task is gone (jobs.tasks.originals)."""

from __future__ import annotations

import io
import os
import time

import pytest

from jobs.core import keys
from jobs.core.failures import TransientError
from jobs.core.settings import Settings
from jobs.tasks import originals
from tests.unit.conftest import upload

KEYS = "acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"


def _as(client, key):
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return client


def test_an_upload_is_stored_as_sent_and_downloaded_as_an_attachment(client, run_jobs):
    content = "Zürich minutes: the valve was replaced.\n".encode() * 50
    task_id = upload(client, ("Protokoll Zürich.txt", content)).get_json()["tasks"][0]["id"]
    with originals.open_original(Settings(), "default", "Protokoll Zürich.txt", task_id) as stream:
        assert stream.read() == content, "stored before the answer, byte for byte"
    run_jobs()
    response = client.get("/api/originals/Protokoll Zürich.txt")
    assert response.status_code == 200 and response.data == content
    assert response.headers["Content-Type"].startswith("text/plain")
    disposition = response.headers["Content-Disposition"]
    assert disposition.startswith("attachment") and "Protokoll%20Z%C3%BCrich.txt" in disposition
    assert response.headers["Content-Length"] == str(len(content))
    assert "sandbox" in response.headers["Content-Security-Policy"]
    assert "no-store" in response.headers["Cache-Control"]


def test_an_id_with_slashes_downloads_its_own_original(client):
    first = upload(client, ("a.md", b"# one\n"), document_id="folder/a.md")
    upload(client, ("a.md", b"# two\n"), document_id="other/a.md")
    assert first.status_code == 202
    assert client.get("/api/originals/folder/a.md").data == b"# one\n"
    assert client.get("/api/originals/other/a.md").data == b"# two\n"
    assert client.get("/api/originals/folder/b.md").status_code == 404


def test_another_tenants_original_is_not_found(make_app):
    client = make_app(INTAKE_API_KEYS=KEYS).test_client()
    assert (
        upload(_as(client, "acme-key-123-0123456789ab"), ("plan.txt", b"acme's plan")).status_code
        == 202
    )
    response = _as(client, "globex-key-456-0123456789ab").get("/api/originals/plan.txt")
    assert response.status_code == 404 and response.get_json()["error"]["code"] == "not_found"
    assert (
        _as(client, "acme-key-123-0123456789ab").get("/api/originals/plan.txt").data
        == b"acme's plan"
    )


def test_a_new_version_is_what_downloads_and_a_delete_deletes_every_original(
    client, run_jobs, redis
):
    old = upload(client, ("notes.txt", b"first version")).get_json()["tasks"][0]["id"]
    run_jobs()
    new = upload(client, ("notes.txt", b"second version")).get_json()["tasks"][0]["id"]
    assert client.get("/api/originals/notes.txt").data == b"second version"
    assert client.delete("/api/documents/notes.txt").status_code == 204
    assert client.get("/api/originals/notes.txt").status_code == 404
    for task_id in (old, new):
        assert not originals.stored(redis, Settings(), "default", "notes.txt", task_id)


def test_the_sweep_removes_old_originals_neither_a_task_nor_the_index_holds(
    client, redis, run_jobs
):
    def stored(task_id, document_id="indexed.txt"):
        return originals.stored(redis, Settings(), "default", document_id, task_id)

    def age(task_id, document_id="indexed.txt"):
        path = originals.store(Settings())._path(originals.name("default", document_id, task_id))
        os.utime(path, (time.time() - 2 * originals.SWEEP_MIN_AGE_SECONDS,) * 2)

    indexed = upload(client, ("indexed.txt", b"kept while indexed")).get_json()["tasks"][0]["id"]
    run_jobs()
    replaced = indexed
    indexed = upload(client, ("indexed.txt", b"a newer version")).get_json()["tasks"][0]["id"]
    run_jobs()
    orphan, young = "f" * 32, "d" * 32
    for task_id in (orphan, young):
        originals.put(Settings(), "default", "gone.txt", task_id, io.BytesIO(b"left behind"))
    for task_id, document_id in (
        (indexed, "indexed.txt"),
        (replaced, "indexed.txt"),
        (orphan, "gone.txt"),
    ):
        age(task_id, document_id)
    foreign = "tasks/default/ab/not-an-original-name"  # put there by hand: never ours to sweep
    originals.store(Settings()).put(foreign, io.BytesIO(b"an operator's file"))
    os.utime(
        originals.store(Settings())._path(foreign),
        (time.time() - 2 * originals.SWEEP_MIN_AGE_SECONDS,) * 2,
    )
    redis.delete(keys.task(indexed), keys.task(replaced))  # records expired, after 30 days
    redis.delete(keys.originals_sweep())
    assert originals.sweep(redis, Settings()) == 2
    assert originals.store(Settings()).exists(foreign)
    assert stored(indexed), "the indexed version stays, however old its task"
    assert not stored(replaced) and not stored(orphan, "gone.txt")
    assert stored(young, "gone.txt"), "an hour's grace: never races an upload"
    assert originals.sweep(redis, Settings()) == 0, "at most once an hour"


def test_the_sweep_removes_part_files_of_writes_cut_off_a_day_ago(redis):
    """A process killed mid-write leaves its temporary `.part-` file, which no listing shows."""
    target = originals.store(Settings())
    target.put("tasks/default/ab/kept", io.BytesIO(b"kept"))
    folder = target._path("tasks/default/ab/kept").parent
    old, fresh = folder / ".part-4242-abandoned", folder / ".part-4343-on-its-way"
    for part in (old, fresh):
        part.write_bytes(b"half an upload")
    a_day_ago = time.time() - 25 * 3600
    os.utime(old, (a_day_ago, a_day_ago))
    redis.delete(keys.originals_sweep())
    originals.sweep(redis, Settings())
    assert not old.exists(), "a write cut off a day ago"
    assert fresh.exists(), "a write that may still be on its way"
    assert target.exists("tasks/default/ab/kept")


def test_an_upload_an_older_release_kept_in_redis_is_moved_to_the_store(redis):
    task_id = "e" * 32
    redis.set(keys.blob(task_id), b"bytes from before originals were kept")
    data = originals.load(redis, Settings(), "default", "old.txt", task_id, 37)
    assert data == b"bytes from before originals were kept"
    assert not redis.exists(keys.blob(task_id))
    with originals.open_original(Settings(), "default", "old.txt", task_id) as stream:
        assert stream.read() == data


def test_a_store_that_does_not_answer_is_a_transient_failure_that_names_it(redis, monkeypatch):
    class Unreachable:
        def open(self, name):
            raise ConnectionRefusedError(111, "Connection refused")

        def exists(self, name):
            return False

    monkeypatch.setattr(originals, "store", lambda settings: Unreachable())
    with pytest.raises(TransientError) as failed:
        originals.load(redis, Settings(), "default", "report.pdf", "a" * 32, 10)
    assert failed.value.code == "storage_unavailable"
    assert "store of uploaded files did not answer" in str(failed.value)


@pytest.fixture
def own_store(tmp_path, monkeypatch):
    """A store of this test's own: the sweep's counts see no other test's originals."""
    import jobs.core.settings

    monkeypatch.setattr(jobs.core.settings, "DEFAULT_STORAGE_DIR", tmp_path)


def test_failed_and_canceled_uploads_keep_their_originals_only_for_the_upload_retention(
    make_app, redis, run_jobs, own_store
):
    """Failed uploads no longer fill the store: past INTAKE_UPLOAD_RETENTION_HOURS the sweep
    drops their originals (unless their version is indexed) and gives their bytes back to the
    tenant's quota; a Retry then answers upload_expired."""
    from tests.samples import make_pdf_no_text

    client = make_app(INTAKE_OCR="off").test_client()
    failed = upload(client, ("scan.pdf", make_pdf_no_text())).get_json()["tasks"][0]["id"]
    canceled = upload(client, ("later.txt", b"Canceled before it ran.")).get_json()["tasks"][0]
    assert client.post(f"/api/tasks/{canceled['id']}/cancel").status_code == 202
    kept = upload(client, ("kept.txt", b"Succeeded: kept until deleted.")).get_json()["tasks"][0]
    run_jobs()
    assert client.get(f"/api/tasks/{failed}").get_json()["status"] == "failed"
    names = {failed: "scan.pdf", canceled["id"]: "later.txt", kept["id"]: "kept.txt"}
    used = int(redis.get(keys.tenant_stored_bytes("default")))
    assert used == sum(int(redis.hget(keys.task(t), "size")) for t in names), used
    target = originals.store(Settings())
    hour_ago = time.time() - 2 * originals.SWEEP_MIN_AGE_SECONDS
    for task_id, document_id in names.items():
        os.utime(target._path(originals.name("default", document_id, task_id)), (hour_ago,) * 2)

    assert originals.sweep(redis, Settings()) == 0, "within the upload retention: all kept"
    day_ago = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 25 * 3600))
    for task_id in (failed, canceled["id"]):
        redis.hset(keys.task(task_id), "ended_at", day_ago)
    redis.delete(keys.originals_sweep())
    assert originals.sweep(redis, Settings()) == 2
    assert not originals.stored(redis, Settings(), "default", "scan.pdf", failed)
    assert not originals.stored(redis, Settings(), "default", "later.txt", canceled["id"])
    assert originals.stored(redis, Settings(), "default", "kept.txt", kept["id"])
    assert int(redis.get(keys.tenant_stored_bytes("default"))) == int(
        redis.hget(keys.task(kept["id"]), "size")
    ), "their bytes given back"
    retried = client.post(f"/api/tasks/{canceled['id']}/retry")
    assert retried.status_code == 409 and retried.get_json()["error"]["code"] == "upload_expired"


def test_the_sweep_counts_originals_the_quota_did_not_know(client, redis, own_store):
    """Originals an older release stored count against the quota once the sweep lists them."""
    originals.put(Settings(), "default", "old.txt", "a" * 32, io.BytesIO(b"x" * 300))
    redis.hset(keys.task("a" * 32), mapping={"tenant": "default", "status": "succeeded"})
    os.utime(
        originals.store(Settings())._path(originals.name("default", "old.txt", "a" * 32)),
        (time.time() - 2 * originals.SWEEP_MIN_AGE_SECONDS,) * 2,
    )
    assert originals.sweep(redis, Settings()) == 0
    assert int(redis.get(keys.tenant_stored_bytes("default"))) == 300
    redis.delete(keys.originals_sweep())
    originals.sweep(redis, Settings())
    assert int(redis.get(keys.tenant_stored_bytes("default"))) == 300, "counted once"
