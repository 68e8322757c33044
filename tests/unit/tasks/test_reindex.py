"""Re-index on fakeredis and a real directory of originals: after a pipeline change every
document runs again from its stored original as a batch on the bulk queue, stays findable
from its previous version until its new one is indexed, and is a duplicate when already
indexed under today's pipeline unless forced (jobs.tasks.reindex)."""

from __future__ import annotations

from rq import Queue

from jobs.core import keys
from jobs.core.settings import Settings
from jobs.tasks import originals, records, reindex
from tests.samples import make_pdf_no_text
from tests.unit.conftest import upload

TEXT = ("The turbine hall inspection found the valve seals worn. " * 40).encode()
KEYS = "acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"


def _reindex(client, **body):
    return client.post("/api/documents/reindex", json=body)


def _hits(client, word):
    return client.get(f"/api/search?q={word}").get_json()["results"]


def test_after_a_pipeline_change_every_document_runs_again_from_its_original(
    make_app, run_jobs, redis, monkeypatch
):
    client = make_app().test_client()
    first = [
        upload(client, (f"{name}.txt", TEXT + name.encode())).get_json()["tasks"][0]
        for name in ("alpha", "beta")
    ]
    run_jobs()
    old_chunks = {
        t["id"]: client.get(f"/api/tasks/{t['id']}").get_json()["result"]["chunks"] for t in first
    }

    monkeypatch.setenv("INTAKE_CHUNK_SIZE", "400")  # the deploy that changed the pipeline
    monkeypatch.setenv("INTAKE_CHUNK_OVERLAP", "50")
    client = make_app(INTAKE_CHUNK_SIZE="400", INTAKE_CHUNK_OVERLAP="50").test_client()
    response = _reindex(client, all=True)
    assert response.status_code == 202, response.get_json()
    body = response.get_json()
    assert response.headers["Location"] == f"/api/batches/{body['batch_id']}"
    assert sorted(t["document_id"] for t in body["tasks"]) == ["alpha.txt", "beta.txt"]
    assert not any(t["duplicate"] for t in body["tasks"]) and body["rejected"] == []
    assert len(Queue("intake-bulk", connection=redis)) == 2, "bulk: fresh uploads go first"
    assert client.get("/api/originals/alpha.txt").data == TEXT + b"alpha", (
        "downloadable while its re-index waits"
    )
    hits = _hits(client, "turbine")
    assert {h["task_id"] for h in hits} == {t["id"] for t in first}, (
        "findable from the previous version while the new one waits"
    )

    run_jobs()
    for task in body["tasks"]:
        done = client.get(f"/api/tasks/{task['id']}").get_json()
        assert done["status"] == "succeeded", done
        assert done["result"]["chunks"] > max(old_chunks.values()), "chunked anew"
        assert originals.stored(redis, Settings(), "default", task["document_id"], task["id"])
    hits = _hits(client, "turbine")
    assert {h["task_id"] for h in hits} == {t["id"] for t in body["tasks"]}
    assert len({h["document_id"] for h in hits}) == 2
    assert client.get("/api/originals/alpha.txt").data == TEXT + b"alpha"


def test_a_document_indexed_under_todays_pipeline_is_a_duplicate_unless_forced(client, run_jobs):
    task = upload(client, ("notes.txt", TEXT)).get_json()["tasks"][0]
    run_jobs()
    again = _reindex(client, document_ids=["notes.txt"]).get_json()
    assert again["tasks"][0]["duplicate"] and again["tasks"][0]["id"] == task["id"]
    forced = _reindex(client, document_ids=["notes.txt"], force=True).get_json()
    assert not forced["tasks"][0]["duplicate"] and forced["tasks"][0]["id"] != task["id"]
    run_jobs()
    done = client.get(f"/api/tasks/{forced['tasks'][0]['id']}").get_json()
    assert done["status"] == "succeeded", done
    assert {h["task_id"] for h in _hits(client, "turbine")} == {done["id"]}


def test_unknown_and_other_tenants_documents_are_refused_by_id(make_app, run_jobs):
    client = make_app(INTAKE_API_KEYS=KEYS).test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer acme-key-123-0123456789ab"
    upload(client, ("plan.txt", TEXT))
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer globex-key-456-0123456789ab"
    refused = _reindex(client, document_ids=["plan.txt"])
    assert refused.status_code == 404
    assert refused.get_json()["rejected"] == [
        {"document_id": "plan.txt", "code": "not_found", "message": "No such document."}
    ]
    assert _reindex(client, all=True).status_code == 404, "globex has no documents"
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer acme-key-123-0123456789ab"
    mixed = _reindex(client, document_ids=["plan.txt", "missing.txt"], force=True)
    assert mixed.status_code == 202
    assert [r["document_id"] for r in mixed.get_json()["rejected"]] == ["missing.txt"]


def test_a_bad_request_says_what_to_send(client):
    for body in (
        {},
        {"all": True, "document_ids": ["a"]},
        {"document_ids": []},
        {"document_ids": "a.txt"},
        {"document_ids": [3]},
        {"all": "yes"},
    ):
        response = client.post("/api/documents/reindex", json=body)
        assert response.status_code == 400, body
        assert response.get_json()["error"]["code"] == "bad_request"
    assert client.post("/api/documents/reindex", data="x").status_code == 400
    response = _reindex(client, all=True, priority="urgent")
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "bad_priority"


def test_a_reindex_whose_original_is_gone_fails_readably(client, run_jobs, redis):
    task = upload(client, ("gone.txt", TEXT)).get_json()["tasks"][0]
    run_jobs()
    rerun = _reindex(client, document_ids=["gone.txt"], force=True).get_json()["tasks"][0]
    originals.store(Settings()).delete(originals.name("default", "gone.txt", task["id"]))
    run_jobs()
    failed = client.get(f"/api/tasks/{rerun['id']}").get_json()
    assert failed["status"] == "failed" and failed["error"]["type"] == "upload_expired", failed
    assert {h["task_id"] for h in _hits(client, "turbine")} == {task["id"]}, (
        "the indexed version stays"
    )
    assert redis.hget(keys.task(rerun["id"]), "original_of") == task["id"].encode()


def test_a_second_forced_reindex_while_the_first_waits_is_the_same_run(client, run_jobs, redis):
    task = upload(client, ("clicked.txt", TEXT)).get_json()["tasks"][0]
    run_jobs()
    first = _reindex(client, document_ids=["clicked.txt"], force=True).get_json()["tasks"][0]
    second = _reindex(client, document_ids=["clicked.txt"], force=True).get_json()["tasks"][0]
    assert not first["duplicate"] and first["id"] != task["id"]
    assert second["duplicate"] and second["id"] == first["id"], "one re-index waiting at most"
    assert len(Queue("intake-bulk", connection=redis)) == 1, "one job"
    run_jobs()
    third = _reindex(client, document_ids=["clicked.txt"], force=True).get_json()["tasks"][0]
    assert not third["duplicate"] and third["id"] != first["id"], "done: forced runs again"
    tasks = client.get("/api/documents/clicked.txt").get_json()["tasks"]
    assert len(tasks) == 3, tasks


def test_all_leaves_out_a_document_whose_last_run_failed_unless_forced_or_named(client, run_jobs):
    upload(client, ("fine.txt", TEXT), ("scan.pdf", make_pdf_no_text()))
    run_jobs()
    assert client.get("/api/documents/scan.pdf").get_json()["status"] == "failed"
    body = _reindex(client, all=True).get_json()
    assert [t["document_id"] for t in body["tasks"]] == ["fine.txt"]
    assert body["tasks"][0]["duplicate"], "up to date"
    assert [(r["document_id"], r["code"]) for r in body["rejected"]] == [
        ("scan.pdf", "last_run_failed")
    ]
    forced = _reindex(client, all=True, force=True).get_json()
    assert sorted(t["document_id"] for t in forced["tasks"]) == ["fine.txt", "scan.pdf"]
    assert not any(t["duplicate"] for t in forced["tasks"]) and forced["rejected"] == []
    run_jobs()
    named = _reindex(client, document_ids=["scan.pdf"]).get_json()
    assert not named["tasks"][0]["duplicate"], "asked by its id: run again"


def test_all_of_a_failed_library_is_a_conflict_that_says_why(client, run_jobs):
    upload(client, ("scan.pdf", make_pdf_no_text()))
    run_jobs()
    response = _reindex(client, all=True)
    assert response.status_code == 409, response.get_json()
    assert response.get_json()["error"]["code"] == "nothing_to_reindex"


def test_all_past_the_queue_limit_is_refused_before_the_whole_library_is_read(
    make_app, run_jobs, monkeypatch
):
    monkeypatch.setenv("INTAKE_TENANT_QUEUE_LIMIT", "3")
    client = make_app().test_client()
    for number in range(10):
        upload(client, (f"doc-{number}.txt", TEXT + str(number).encode()))
        run_jobs()  # one at a time: never more than 3 waiting
    monkeypatch.setattr(reindex, "PAGE", 2)
    read: list[str] = []
    load_many = records.load_many
    monkeypatch.setattr(
        records, "load_many", lambda connection, ids: read.extend(ids) or load_many(connection, ids)
    )
    response = _reindex(client, all=True)
    assert response.status_code == 429, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == "tenant_queue_full" and "slices" in error["message"], error
    assert len(read) <= 4, f"read {len(read)} of 10 documents only to refuse them"
    assert (
        _reindex(client, document_ids=["doc-0.txt", "doc-1.txt"], force=True).status_code == 202
    ), "a slice by id fits"
