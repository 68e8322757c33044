"""Originals on S3, end to end: a web and two `rq worker` processes whose only change from the
file store is INTAKE_STORAGE_URL (`s3://bucket/prefix`) and the standard AWS variables, against
a real S3-compatible server (SeaweedFS, tests/integration/seaweedfs.py). An upload is stored in
the bucket before its answer, read from there by a worker, downloaded as sent, and deleted from
the bucket with its document; Redis receives none of its bytes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient
from tests.integration.intake_api import get_json, unique_word, wait_terminal
from tests.samples import make_pdf_of_size

pytestmark = pytest.mark.integration

DATABASE = 14  # nothing else uses this one
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def bucket(s3_server) -> str:
    name = f"intake-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def s3_stack(
    redis_server, _embedding_server, tmp_path_factory, s3_server, bucket
) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "s3",
        DATABASE,
        {
            "INTAKE_STORAGE_URL": f"s3://{bucket}/intake/originals",
            **s3_server.env,
        },
        embedding=_embedding_server,
    ) as stack:
        yield stack


def _keys(s3_server, bucket: str) -> list[str]:
    listed = s3_server.client().list_objects_v2(Bucket=bucket, Prefix="intake/originals/")
    return [item["Key"] for item in listed.get("Contents", [])]


def test_an_upload_lives_in_the_bucket_until_its_document_is_deleted(s3_stack, s3_server, bucket):
    server = redis.Redis.from_url(s3_stack.redis_url)
    word = unique_word()
    content = make_pdf_of_size(3 * MIB, f"The {word} inspection report of the turbine hall.", word)
    with ApiClient(s3_stack.url) as client:
        before = server.info("stats")["total_net_input_bytes"]
        response = client.post("/api/documents", files=[("files", (f"{word}.pdf", content))])
        received = server.info("stats")["total_net_input_bytes"] - before
        assert response.status_code == 202, response.text
        task_id = response.json()["tasks"][0]["id"]
        assert received < 64 * 1024, f"Redis received {received} bytes of a 3 MiB upload"
        stored = [key for key in _keys(s3_server, bucket) if key.endswith(task_id)]
        assert len(stored) == 1, "in the bucket before the answer"

        done = wait_terminal(client, [task_id], timeout=60)[0][task_id]
        assert done["status"] == "succeeded", done
        hits = get_json(client, f"/api/search?q={word}")["results"]
        assert hits and hits[0]["task_id"] == task_id, hits

        download = client.get(f"/api/originals/{word}.pdf")
        assert download.status_code == 200 and download.content == content
        assert download.headers["Content-Type"] == "application/pdf"
        assert "attachment" in download.headers["Content-Disposition"]

        assert client.delete(f"/api/documents/{word}.pdf").status_code == 204
        assert not [key for key in _keys(s3_server, bucket) if key.endswith(task_id)]
        assert client.get(f"/api/originals/{word}.pdf").status_code == 404


def test_health_names_the_bucket_reachable_without_naming_it(s3_stack, bucket):
    """Health's probe (one HeadBucket, tried once) against a real S3-compatible server."""
    with ApiClient(s3_stack.url) as client:
        answer = client.get("/api/health")
    assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    store = answer.json()["dependencies"]["store"]
    assert store["kind"] == "s3" and store["up"] is True and store["latency_ms"] < 1000, store
    assert bucket not in answer.text and "intake-tests-secret" not in answer.text
