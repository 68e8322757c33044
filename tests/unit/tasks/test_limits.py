"""Backpressure on fakeredis: a batch is accepted whole or refused whole (docs/architecture.md §5,
§18)."""

from __future__ import annotations

from jobs.core import keys
from jobs.kb import index
from jobs.tasks import upload_budgets
from jobs.text.chunking import chunk_text
from jobs.upgrades import upload_sizes
from tests.unit.conftest import upload


def _files(count, size=10):
    return [(f"f{i}.txt", f"document {i} ".encode().ljust(size, b"x")) for i in range(count)]


def test_queue_limit_refuses_the_whole_batch_with_503(make_app, redis):
    client = make_app(INTAKE_QUEUE_LIMIT=3).test_client()
    assert upload(client, *_files(2)).status_code == 202
    refused = upload(client, *_files(2, size=20))
    assert refused.status_code == 503 and refused.headers["Retry-After"]
    assert refused.get_json()["error"]["code"] == "queue_full"
    assert redis.zcard(keys.active()) == 2, "nothing of the refused batch was registered"
    assert redis.llen("rq:queue:intake-high") == 2, "the queues hold exactly the accepted tasks"


def test_tenant_limit_is_429_for_that_tenant_only(make_app):
    keys_ = "acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"
    client = make_app(INTAKE_API_KEYS=keys_, INTAKE_TENANT_QUEUE_LIMIT=2).test_client()

    def as_tenant(key, *files):
        client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {key}"
        return upload(client, *files)

    assert as_tenant("acme-key-123-0123456789ab", *_files(2)).status_code == 202
    refused = as_tenant("acme-key-123-0123456789ab", *_files(1, size=30))
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    assert as_tenant("globex-key-456-0123456789ab", *_files(2)).status_code == 202, (
        "others still upload"
    )


def test_blob_budget_counts_waiting_bytes_and_gives_them_back(make_app, redis, run_jobs):
    client = make_app(INTAKE_BLOB_BUDGET_BYTES=100).test_client()
    assert upload(client, *_files(1, size=60)).status_code == 202
    assert int(redis.get(keys.blob_bytes())) == 60
    refused = upload(client, *_files(1, size=50))
    assert refused.status_code == 503 and refused.get_json()["error"]["code"] == "storage_full"
    run_jobs()
    assert int(redis.get(keys.blob_bytes())) == 0, "a succeeded task gives its bytes back"
    assert upload(client, *_files(1, size=50)).status_code == 202


def test_recount_forgets_tasks_that_ended_without_giving_bytes_back(client, redis):
    body = upload(client, *_files(2, size=40)).get_json()
    redis.hset(keys.task(body["tasks"][0]["id"]), "status", "failed")  # a lost process's end
    assert upload_budgets.recount(redis) == 40
    assert int(redis.get(keys.blob_bytes())) == 40


def test_a_finished_or_canceled_task_frees_its_place(make_app, redis):
    client = make_app(INTAKE_QUEUE_LIMIT=1).test_client()
    task = upload(client, *_files(1)).get_json()["tasks"][0]
    assert upload(client, *_files(1, size=20)).status_code == 503
    client.post(f"/api/tasks/{task['id']}/cancel")
    assert upload(client, *_files(1, size=20)).status_code == 202


def test_each_tenant_has_its_own_share_of_the_upload_storage(make_app, redis):
    keys_ = "acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"
    client = make_app(
        INTAKE_API_KEYS=keys_, INTAKE_TENANT_BLOB_BUDGET_BYTES=100, INTAKE_BLOB_BUDGET_BYTES=1000
    ).test_client()

    def as_tenant(key, *files):
        client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {key}"
        return upload(client, *files)

    assert as_tenant("acme-key-123-0123456789ab", *_files(1, size=80)).status_code == 202
    refused = as_tenant("acme-key-123-0123456789ab", *_files(1, size=30))
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    assert refused.get_json()["error"]["code"] == "tenant_storage_full"
    assert as_tenant("globex-key-456-0123456789ab", *_files(1, size=90)).status_code == 202
    assert int(redis.get(keys.tenant_blob_bytes("acme"))) == 80
    assert int(redis.get(keys.blob_bytes())) == 170


def test_a_release_gives_bytes_back_once_however_often_it_runs(client, redis):
    task_id = upload(client, *_files(1, size=50)).get_json()["tasks"][0]["id"]
    for _ in range(3):  # a success, then a delete, then a re-sent command
        upload_budgets.release(redis, "default", task_id)
    assert int(redis.get(keys.blob_bytes())) == 0
    assert int(redis.get(keys.tenant_blob_bytes("default"))) == 0


def test_recount_moves_sizes_of_earlier_releases_to_their_tenant(client, redis):
    task_id = upload(client, *_files(1, size=30)).get_json()["tasks"][0]["id"]
    redis.hdel(keys.tenant_blob_sizes("default"), task_id)  # as an earlier release wrote it:
    redis.set(keys.tenant_blob_bytes("default"), 0)  # one all-tenant table
    redis.hset(keys.legacy_blob_sizes(), task_id, 30)
    upload_sizes.move_to_tenants(redis)
    assert upload_budgets.recount(redis) == 30
    assert int(redis.get(keys.tenant_blob_bytes("default"))) == 30
    assert not redis.exists(keys.legacy_blob_sizes())


def test_a_full_knowledge_base_refuses_uploads(make_app, redis, run_jobs):
    client = make_app(INTAKE_TENANT_CHUNK_LIMIT=1).test_client()
    assert upload(client, ("a.txt", b"One short chunk.")).status_code == 202
    run_jobs()
    refused = upload(client, ("b.txt", b"Another short chunk."))
    assert refused.status_code == 429
    assert refused.get_json()["error"]["code"] == "knowledge_base_full"


def _chunks_of(word, count):
    """A text of exactly `count` chunks (paragraphs of ~750 characters) with `word` in each."""
    paragraphs = [
        f"Part {n}. " + " ".join([f"The {word} ledger of the office."] * 22) for n in range(count)
    ]
    text = "\n\n".join(paragraphs)
    assert len(chunk_text(text, 1000, 150)) == count
    return text.encode()


TWO_TENANTS = "acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"


def _as(client, key):
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return client


def test_a_full_knowledge_base_of_all_tenants_refuses_every_upload_and_nothing_else(
    make_app, redis, run_jobs, monkeypatch
):
    monkeypatch.setenv("INTAKE_KB_CHUNK_LIMIT", "2")  # the web's and the workers'
    client = make_app(INTAKE_API_KEYS=TWO_TENANTS).test_client()
    index.ensure_chunk_counts(redis)  # what a worker's housekeeping does as it starts
    acme = upload(
        _as(client, "acme-key-123-0123456789ab"),
        ("a.txt", _chunks_of("zebrafox", 1)),
        ("b.txt", _chunks_of("quorblax", 1)),
    ).get_json()
    run_jobs()
    refused = upload(_as(client, "globex-key-456-0123456789ab"), ("g.txt", _chunks_of("wombat", 1)))
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    error = refused.get_json()["error"]
    assert error["code"] == "knowledge_base_full"
    assert "service's knowledge base is full" in error["message"], error
    assert "Your" not in error["message"], "not this tenant's own limit"
    assert upload(_as(client, "acme-key-123-0123456789ab"), ("c.txt", b"More.")).status_code == 429

    globex = _as(client, "globex-key-456-0123456789ab")
    assert globex.get("/api/search?q=wombat").status_code == 200
    assert globex.get("/api/batches").status_code == 200
    assert globex.get("/api/health").status_code == 200
    acme_client = _as(client, "acme-key-123-0123456789ab")
    task = acme["tasks"][0]
    assert acme_client.get(f"/api/tasks/{task['id']}").get_json()["status"] == "succeeded"
    assert acme_client.get(f"/api/batches/{acme['batch_id']}").status_code == 200
    assert acme_client.get("/api/search?q=zebrafox").get_json()["results"]
    assert acme_client.delete("/api/documents/a.txt").status_code == 204

    accepted = upload(
        _as(client, "globex-key-456-0123456789ab"), ("g.txt", _chunks_of("wombat", 1))
    )
    assert accepted.status_code == 202, accepted.get_json()
    run_jobs()
    task_id = accepted.get_json()["tasks"][0]["id"]
    assert client.get(f"/api/tasks/{task_id}").get_json()["status"] == "succeeded"
    assert client.get("/api/search?q=wombat").get_json()["results"]


def test_a_document_that_would_pass_the_limit_of_all_tenants_fails_at_indexing(
    make_app, redis, run_jobs, monkeypatch
):
    monkeypatch.setenv("INTAKE_KB_CHUNK_LIMIT", "3")
    client = make_app(INTAKE_API_KEYS=TWO_TENANTS).test_client()
    index.ensure_chunk_counts(redis)
    assert (
        upload(
            _as(client, "acme-key-123-0123456789ab"), ("a.txt", _chunks_of("zebrafox", 2))
        ).status_code
        == 202
    )
    run_jobs()
    task_id = upload(
        _as(client, "globex-key-456-0123456789ab"), ("g.txt", _chunks_of("wombat", 2))
    ).get_json()["tasks"][0]["id"]  # 2 of 3 held: still accepted
    run_jobs()
    failed = client.get(f"/api/tasks/{task_id}").get_json()
    assert failed["status"] == "failed", failed
    error = failed["error"]
    assert (error["type"], error["step"], error["retryable"]) == (
        "knowledge_base_full",
        "indexing",
        True,
    ), error
    assert "service's knowledge base is full" in error["message"], error
    assert client.get("/api/search?q=wombat").get_json()["results"] == []

    assert client.post(f"/api/tasks/{task_id}/retry").status_code == 202
    assert client.post(f"/api/tasks/{task_id}/cancel").status_code == 202
    assert (
        _as(client, "acme-key-123-0123456789ab").delete("/api/documents/a.txt").status_code == 204
    )
    assert (
        _as(client, "globex-key-456-0123456789ab").post(f"/api/tasks/{task_id}/retry").status_code
        == 202
    )
    run_jobs()
    done = client.get(f"/api/tasks/{task_id}").get_json()
    assert done["status"] == "succeeded" and done["result"]["chunks"] == 2, done
    assert int(redis.get(keys.kb_total_chunks())) == 2


def test_two_tenants_at_their_own_limits_cannot_keep_a_third_out(make_app, redis):
    """The queue limit is two tenants' worth here, as by default (10,000 = 2 × 5,000): the
    last tenth of it is kept for tenants whose backlog fits in it."""
    keys_ = ",".join(f"{t}:{t}-key-0123456789abcdefghij" for t in ("big", "huge", "small"))
    client = make_app(
        INTAKE_API_KEYS=keys_, INTAKE_QUEUE_LIMIT=20, INTAKE_TENANT_QUEUE_LIMIT=10
    ).test_client()

    def as_tenant(tenant, count, size=10):
        client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {tenant}-key-0123456789abcdefghij"
        return upload(client, *_files(count, size))

    assert as_tenant("big", 10).status_code == 202
    refused = as_tenant("huge", 10, size=20)
    assert refused.status_code == 503 and refused.get_json()["error"]["code"] == "queue_full"
    assert as_tenant("huge", 8, size=30).status_code == 202, "up to the limit less its reserve"
    assert as_tenant("small", 2).status_code == 202, "the reserve takes a small backlog"
    assert as_tenant("small", 1, size=40).status_code == 503, "the limit itself still holds"
    assert redis.zcard(keys.active()) == 20


def test_a_tenant_s_stored_originals_are_bounded_by_its_quota(make_app, redis, run_jobs):
    client = make_app(INTAKE_TENANT_STORED_BYTES=100).test_client()
    assert upload(client, *_files(1, size=60)).status_code == 202
    run_jobs()
    assert int(redis.get(keys.tenant_stored_bytes("default"))) == 60, "kept after its task ends"
    refused = upload(client, ("more.txt", b"more words ".ljust(50, b"x")))
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    error = refused.get_json()["error"]
    assert error["code"] == "storage_quota" and "quota" in error["message"], error
    assert client.delete("/api/documents/f0.txt").status_code == 204
    assert int(redis.get(keys.tenant_stored_bytes("default"))) == 0, "a delete gives it back"
    assert upload(client, ("more.txt", b"more words ".ljust(50, b"x"))).status_code == 202
