"""The JSON API on fakeredis: shapes, errors, idempotency, ETags (docs/architecture.md §4, §5,
§9)."""

from __future__ import annotations

from tests.unit.conftest import upload

TEXT = b"The quick brown fox. It jumps over the lazy dog.\n\nA second paragraph."


def test_upload_answers_202_with_location_and_tasks(client):
    response = upload(client, ("a.txt", TEXT), ("b.md", b"# Title\n\nSome words."))
    assert response.status_code == 202
    body = response.get_json()
    assert response.headers["Location"] == f"/api/batches/{body['batch_id']}"
    assert body["url"] == f"/api/batches/{body['batch_id']}"
    assert body["page_url"] == f"/batches/{body['batch_id']}"
    assert body["rejected"] == []
    assert [t["document_id"] for t in body["tasks"]] == ["a.txt", "b.md"]
    for task in body["tasks"]:
        assert task["status"] == "pending" and task["duplicate"] is False
        assert len(task["id"]) == 32 and int(task["id"], 16) >= 0
        assert task["url"] == f"/api/tasks/{task['id']}"


def test_bad_files_are_listed_as_rejected_beside_good_ones(client):
    response = upload(
        client, ("good.txt", TEXT), ("evil.pdf", b"MZ\x90\x00binary"), ("empty.txt", b"")
    )
    assert response.status_code == 202
    rejected = {r["filename"]: r["code"] for r in response.get_json()["rejected"]}
    assert rejected == {"evil.pdf": "unsupported_type", "empty.txt": "empty_file"}


def test_nothing_acceptable_is_an_error_and_enqueues_nothing(client, redis):
    response = upload(client, ("evil.pdf", b"\x7fELF\x02\x01"))
    assert response.status_code == 415
    assert response.get_json()["error"]["code"] == "unsupported_type"
    assert upload(client, ("empty.txt", b"")).status_code == 400
    assert redis.llen("rq:queue:intake-high") == 0


def test_limits_answer_413(make_app):
    client = make_app(INTAKE_MAX_FILE_BYTES=10, INTAKE_MAX_FILES_PER_REQUEST=2).test_client()
    too_big = upload(client, ("big.txt", b"x" * 11))
    assert too_big.status_code == 413
    assert too_big.get_json()["error"]["code"] == "file_too_large"
    too_many = upload(client, ("1.txt", b"a"), ("2.txt", b"b"), ("3.txt", b"c"))
    assert too_many.status_code == 413


def test_no_files_and_bad_priority_are_400(client):
    assert client.post("/api/documents", data={}).status_code == 400
    assert upload(client, ("a.txt", TEXT), priority="urgent").status_code == 400


def test_document_id_comes_from_the_form_or_the_relative_path(client):
    body = upload(
        client,
        ("../../etc/x.txt", TEXT),
        ("y.txt", b"other text"),
        document_id=["reports/2024/x.txt"],
    ).get_json()
    assert [t["document_id"] for t in body["tasks"]] == ["reports/2024/x.txt", "y.txt"]
    assert body["tasks"][0]["filename"] == "x.txt"


def test_duplicates_are_reused_unless_forced(client):
    first = upload(client, ("a.txt", TEXT), ("a.txt", TEXT)).get_json()
    assert len(first["tasks"]) == 1
    again = upload(client, ("a.txt", TEXT)).get_json()
    assert again["tasks"][0]["id"] == first["tasks"][0]["id"]
    assert again["tasks"][0]["duplicate"] is True
    batch = client.get(again["url"]).get_json()
    assert batch["counts"]["pending"] == 1 and len(batch["tasks"]) == 1
    forced = upload(client, ("a.txt", TEXT), force="1").get_json()
    assert forced["tasks"][0]["id"] != first["tasks"][0]["id"]


def test_only_new_files_get_a_job_and_every_new_task_is_queued(client, redis):
    first = upload(client, ("a.txt", TEXT)).get_json()["tasks"][0]
    mixed = upload(client, ("a.txt", TEXT), ("b.txt", b"Another document.")).get_json()
    reused, new = mixed["tasks"]
    assert reused["id"] == first["id"] and reused["duplicate"] is True
    assert new["duplicate"] is False
    queued = [i.decode() for i in redis.lrange("rq:queue:intake-high", 0, -1)]
    assert queued == [first["id"], new["id"]]
    assert redis.hget(f"rq:job:{new['id']}", "status") == b"queued"
    assert redis.lrange(f"intake:batch:{mixed['batch_id']}:tasks", 0, -1) == [
        first["id"].encode(),
        new["id"].encode(),
    ]


def test_a_server_that_lost_its_scripts_still_takes_uploads(client, redis):
    """After a Redis restart the script cache is empty: the submit loads its script again."""
    assert upload(client, ("a.txt", TEXT)).status_code == 202
    redis.script_flush()
    response = upload(client, ("b.txt", b"Another document."))
    assert response.status_code == 202
    assert redis.llen("rq:queue:intake-high") == 2


def test_unknown_ids_are_404_json(client):
    for path in ("/api/tasks/" + "0" * 32, "/api/batches/nope"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.is_json and set(response.get_json()["error"]) == {"code", "message"}


def test_unchanged_state_answers_304(client):
    body = upload(client, ("a.txt", TEXT)).get_json()
    for url in (body["tasks"][0]["url"], body["url"]):
        first = client.get(url)
        assert first.headers["ETag"]
        again = client.get(url, headers={"If-None-Match": first.headers["ETag"]})
        assert again.status_code == 304 and again.data == b""


def test_batches_list_newest_first(client):
    older = upload(client, ("a.txt", TEXT)).get_json()["batch_id"]
    newer = upload(client, ("b.txt", b"different words here")).get_json()["batch_id"]
    listed = client.get("/api/batches").get_json()
    assert [b["id"] for b in listed["batches"]] == [newer, older]
    assert listed["batches"][0]["counts"]["pending"] == 1


def test_search_finds_only_succeeded_documents(client, run_jobs):
    upload(client, ("a.txt", b"Zanzibarquux is a word found only here."))
    assert client.get("/api/search?q=zanzibarquux").get_json()["results"] == []
    run_jobs()
    results = client.get("/api/search?q=zanzibarquux&k=3").get_json()["results"]
    assert results and results[0]["document_id"] == "a.txt"
    assert set(results[0]) >= {
        "text",
        "score",
        "scores",
        "task_id",
        "document_id",
        "filename",
        "chunk",
    }
    assert client.get("/api/search?q=x&k=200").status_code == 200
    too_many = client.get("/api/search?q=x&k=201")
    assert too_many.status_code == 400 and "200" in too_many.get_json()["error"]["message"]
    assert client.get("/api/search").status_code == 400


def test_search_takes_a_mode_and_answers_by_words_without_dense_vectors(client, run_jobs):
    upload(client, ("a.txt", b"Zanzibarquux is a word found only here."))
    run_jobs()
    for asked in ("", "&mode=", "&mode=lexical"):
        answer = client.get(f"/api/search?q=zanzibarquux{asked}").get_json()
        assert answer["mode"] == "lexical" and "notice" not in answer, asked
        (hit,) = answer["results"]
        assert hit["scores"] == {"lexical": hit["score"]}
    for asked in ("dense", "hybrid"):
        answer = client.get(f"/api/search?q=zanzibarquux&mode={asked}").get_json()
        assert answer["mode"] == "lexical" and answer["exact"] is True, asked
        assert "Search by meaning needs an embedding service" in answer["notice"]
        assert len(answer["results"]) == 1
    refused = client.get("/api/search?q=zanzibarquux&mode=semantic")
    assert refused.status_code == 400
    assert refused.get_json()["error"]["code"] == "bad_parameter"
    assert "lexical, dense, hybrid" in refused.get_json()["error"]["message"]


def test_foreign_origin_is_refused(client):
    response = client.post("/api/documents", headers={"Origin": "https://evil.example"}, data={})
    assert response.status_code == 403
    assert response.get_json()["error"]["code"] == "foreign_origin"


def test_redis_down_is_503_with_retry_after(make_app):
    client = make_app(REDIS_CONNECTION=None, REDIS_URL="redis://127.0.0.1:1/0").test_client()
    response = client.get("/api/tasks/" + "a" * 32)
    assert response.status_code == 503
    assert response.headers["Retry-After"]
    assert response.get_json()["error"]["code"] == "redis_unavailable"
    assert client.get("/api/health").status_code == 503


def test_delete_document_removes_its_chunks_and_records(client, run_jobs):
    body = upload(client, ("reports/x.txt", b"Quokkaword lives here.")).get_json()
    task_id = body["tasks"][0]["id"]
    run_jobs()
    assert client.get("/api/search?q=quokkaword").get_json()["results"]
    assert client.delete("/api/documents/reports/x.txt").status_code == 204
    assert client.get("/api/search?q=quokkaword").get_json()["results"] == []
    assert client.get(f"/api/tasks/{task_id}").status_code == 404
    assert client.delete("/api/documents/reports/x.txt").status_code == 404
    again = upload(client, ("reports/x.txt", b"Quokkaword lives here.")).get_json()
    assert again["tasks"][0]["duplicate"] is False, "deleted means a new upload is ingested"
