"""GET /api/health and /metrics on the real system name each dependency and whether it answers:
the knowledge base on a redis-server of its own (and its read replica), the store of originals.
When the knowledge base's server is stopped, or the store's directory is gone, or the S3
endpoint takes connections and never answers, health still answers 200 (`degraded`: the queue
works) within its bound, and names no tenant.

Stacks of their own, without workers (health needs none): the Procfile's web (gunicorn, gevent)
on logical database 6 of the session's redis-server with the knowledge base apart, and one on
database 8 whose originals are on a silent S3 endpoint.
"""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.core.test_replica_acks import Pair, running_pair
from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient, poll
from tests.integration.servers import REDIS_SERVER
from tests.silent_server import silent_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed"),
]

DATABASE, S3_DATABASE = 6, 8  # nothing else uses these
TENANT, KEY = "healthco", "healthco-key-123456-0123456789ab"
#: A probe's bound (1 s) and a loaded machine's HTTP round trip beside it.
BOUND_S = 2.5


@pytest.fixture(scope="module")
def kb_pair(tmp_path_factory) -> Iterator[Pair]:
    with running_pair(tmp_path_factory, "health-kb") as started:
        yield started


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("health-originals")


@pytest.fixture(scope="module")
def stack(redis_server, kb_pair, originals, _embedding_server, tmp_path_factory) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "health",
        DATABASE,
        {
            "INTAKE_API_KEYS": f"{TENANT}:{KEY}",
            "INTAKE_KB_URL": kb_pair.primary.url,
            "INTAKE_KB_REPLICA_URLS": kb_pair.replica.url,
            "INTAKE_STORAGE_URL": originals.as_uri(),
        },
        embedding=_embedding_server,
        workers=0,
    ) as started:
        yield started


def health(url: str) -> tuple[int, dict[str, Any], str, float]:
    """(status code, answer, its text, seconds it took), without credentials."""
    started = time.monotonic()
    answer = requests.get(f"{url}/api/health", timeout=10)
    return answer.status_code, answer.json(), answer.text, time.monotonic() - started


def dependency_metrics(url: str) -> dict[tuple[str, str], float]:
    text = requests.get(f"{url}/metrics", timeout=10).text
    return {
        (sample.name, sample.labels["dependency"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("intake_dependency_")
    }


def test_a_stopped_knowledge_base_is_named_down_while_health_answers_200(stack, kb_pair):
    with ApiClient(stack.url, api_key=KEY) as client:  # the tenant's queue now holds a job
        sent = client.post("/api/documents", files={"files": ("a.txt", io.BytesIO(b"Words."))})
        assert sent.status_code == 202, sent.text
    status, answer, text, _ = health(stack.url)
    assert status == 200 and answer["status"] == "ok", text
    kb = answer["dependencies"]["kb"]
    assert kb["apart"] is True and kb["up"] is True
    assert [replica["up"] for replica in kb["replicas"]] == [True]
    assert answer["dependencies"]["store"]["kind"] == "file"
    assert answer["dependencies"]["store"]["up"] is True

    kb_pair.primary.stop()
    try:
        status, answer, text, took = poll(
            lambda: health(stack.url),
            lambda found: not found[1]["dependencies"]["kb"]["up"],
            timeout=10,
            message="health naming the stopped knowledge base down",
        )
        assert status == 200 and answer["status"] == "degraded", text
        assert took < BOUND_S, f"{took:.2f} s"
        assert answer["dependencies"]["redis"]["up"] is True, "the queue works"
        assert answer["dependencies"]["kb"]["error"] == "unreachable", text
        assert answer["dependencies"]["kb"]["replicas"][0]["up"] is True, text
        assert TENANT not in text and "127.0.0.1" not in text, text
        # Each web process keeps its probe's result a second: this one may have probed before.
        values = poll(
            lambda: dependency_metrics(stack.url),
            lambda found: found[("intake_dependency_up", "kb")] == 0,
            timeout=5,
            message="/metrics naming the stopped knowledge base down",
        )
        assert values[("intake_dependency_up", "kb_replica_1")] == 1
        assert values[("intake_dependency_up", "redis")] == 1
        assert 0 <= values[("intake_dependency_latency_seconds", "kb")] < 1
    finally:
        kb_pair.primary.start()
        kb_pair.wait_in_sync()
    poll(
        lambda: health(stack.url)[1]["status"],
        lambda found: found == "ok",
        timeout=10,
        message="health ok again once the knowledge base is back",
    )


def test_a_store_whose_directory_is_gone_is_named_down(stack, originals):
    moved = originals.with_name(originals.name + "-unmounted")
    originals.rename(moved)
    try:
        status, answer, text, took = poll(
            lambda: health(stack.url),
            lambda found: not found[1]["dependencies"]["store"]["up"],
            timeout=10,
            message="health naming the missing store down",
        )
        assert status == 200 and answer["status"] == "degraded", text
        assert answer["dependencies"]["store"] == {
            "kind": "file",
            "up": False,
            "error": "missing",
            "latency_ms": answer["dependencies"]["store"]["latency_ms"],
        }
        assert str(originals) not in text and took < BOUND_S
    finally:
        moved.rename(originals)
    poll(
        lambda: health(stack.url)[1]["dependencies"]["store"]["up"],
        timeout=10,
        message="the store named up again",
    )


@pytest.fixture(scope="module")
def silent_endpoint() -> Iterator[tuple[str, list[socket.socket]]]:
    """An S3 endpoint that takes every connection and never answers (a hung gateway)."""
    with silent_server() as found:
        yield found


@pytest.fixture(scope="module")
def silent_stack(
    redis_server, silent_endpoint, _embedding_server, tmp_path_factory
) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "health-s3",
        S3_DATABASE,
        {
            "INTAKE_STORAGE_URL": "s3://silent-bucket/originals",
            "AWS_ENDPOINT_URL": silent_endpoint[0],
            "AWS_ACCESS_KEY_ID": "health-key-id",
            "AWS_SECRET_ACCESS_KEY": "health-secret-key",
            "AWS_DEFAULT_REGION": "us-east-1",
        },
        embedding=_embedding_server,
        workers=0,
    ) as started:
        yield started


def test_a_store_that_never_answers_is_named_down_within_the_bound(silent_stack, silent_endpoint):
    for _ in range(3):
        status, answer, text, took = health(silent_stack.url)
        assert status == 200 and answer["status"] == "degraded", text
        store = answer["dependencies"]["store"]
        assert store["kind"] == "s3" and store["up"] is False and store["error"] == "timeout"
        assert took < BOUND_S, f"{took:.2f} s: a hung store held health"
        assert "secret" not in text and "silent-bucket" not in text, text
        time.sleep(1.1)  # past the second a probe's result stands for
    assert silent_endpoint[1], "the probe reached the endpoint"
