"""Backpressure on fakeredis: a batch is accepted whole or refused whole (DESIGN §5, §11)."""
from __future__ import annotations

from jobs import blobs, keys
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
    keys_ = "acme:acme-key-123,globex:globex-key-456"
    client = make_app(INTAKE_API_KEYS=keys_, INTAKE_TENANT_QUEUE_LIMIT=2).test_client()

    def as_tenant(key, *files):
        client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {key}"
        return upload(client, *files)
    assert as_tenant("acme-key-123", *_files(2)).status_code == 202
    refused = as_tenant("acme-key-123", *_files(1, size=30))
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    assert as_tenant("globex-key-456", *_files(2)).status_code == 202, "others still upload"


def test_blob_budget_counts_waiting_bytes_and_gives_them_back(make_app, redis, run_jobs):
    client = make_app(INTAKE_BLOB_BUDGET_BYTES=100).test_client()
    assert upload(client, *_files(1, size=60)).status_code == 202
    assert int(redis.get(keys.blob_bytes())) == 60
    refused = upload(client, *_files(1, size=50))
    assert refused.status_code == 503 and refused.get_json()["error"]["code"] == "storage_full"
    run_jobs()
    assert int(redis.get(keys.blob_bytes())) == 0, "a succeeded task's upload is deleted"
    assert upload(client, *_files(1, size=50)).status_code == 202


def test_recount_forgets_expired_uploads(client, redis):
    body = upload(client, *_files(2, size=40)).get_json()
    redis.delete(keys.blob(body["tasks"][0]["id"]))
    assert blobs.recount(redis) == 40
    assert int(redis.get(keys.blob_bytes())) == 40


def test_a_finished_or_canceled_task_frees_its_place(make_app, redis):
    client = make_app(INTAKE_QUEUE_LIMIT=1).test_client()
    task = upload(client, *_files(1)).get_json()["tasks"][0]
    assert upload(client, *_files(1, size=20)).status_code == 503
    client.post(f"/api/tasks/{task['id']}/cancel")
    assert upload(client, *_files(1, size=20)).status_code == 202
