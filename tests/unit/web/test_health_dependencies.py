"""GET /api/health names each dependency with whether it answers and how fast: the queue's
Redis, the knowledge base (apart or not, with its read replicas) and the store of originals.
One that is not the queue's Redis may be down: health still answers 200, `degraded`, within its
bound, naming no tenant and no address. /metrics has the same as gauges."""

from __future__ import annotations

import base64
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.silent_server import silent_server

KEYS = "acme:acme-key-123-0123456789ab"
ACME = {"Authorization": "Bearer acme-key-123-0123456789ab"}
OPERATOR = {"Authorization": "Basic " + base64.b64encode(b"admin:operator-secret").decode()}
#: Nothing listens there: refused at once.
NOWHERE = "redis://:kb-secret@127.0.0.1:1/0"
NOWHERE_REPLICA = "redis://:replica-secret@127.0.0.1:1/1"


def _health(client, headers=None):
    answer = client.get("/api/health", headers=headers or {})
    return answer.status_code, answer.get_json(), answer.get_data(as_text=True)


def _metrics(client) -> dict[tuple[str, str], float]:
    text = client.get("/metrics").get_data(as_text=True)
    return {
        (sample.name, sample.labels.get("dependency", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("intake_dependency_")
    }


def test_every_dependency_is_named_reachable_with_its_latency(client):
    status, health, _ = _health(client)
    assert status == 200 and health["status"] == "ok" and health["redis"] == "ok"
    found = health["dependencies"]
    assert set(found) == {"redis", "kb", "store"}
    assert found["redis"]["up"] is True and found["redis"]["latency_ms"] >= 0
    assert found["kb"] == {**found["redis"], "apart": False, "replicas": []}, (
        "a knowledge base on the queue's Redis answers as that Redis does"
    )
    assert found["store"]["kind"] == "file" and found["store"]["up"] is True
    assert found["store"]["latency_ms"] >= 0 and "error" not in found["store"]


def test_a_knowledge_base_apart_that_does_not_answer_degrades_health_yet_answers_200(make_app):
    client = make_app(
        INTAKE_API_KEYS=KEYS,
        INTAKE_ADMIN_PASSWORD="operator-secret",
        INTAKE_KB_URL=NOWHERE,
        INTAKE_KB_REPLICA_URLS=NOWHERE_REPLICA,
    ).test_client()
    for headers in ({}, ACME, OPERATOR):
        status, health, text = _health(client, headers)
        assert status == 200, text
        assert health["status"] == "degraded"
        kb = health["dependencies"]["kb"]
        assert kb["apart"] is True and kb["up"] is False and kb["error"] == "unreachable"
        assert kb["latency_ms"] < 1000
        assert [replica["up"] for replica in kb["replicas"]] == [False]
        assert health["dependencies"]["redis"]["up"] is True, "the queue works"
        assert "acme" not in text and "secret" not in text and "127.0.0.1" not in text, text


def test_a_store_whose_directory_is_missing_is_down(make_app, tmp_path):
    missing = tmp_path / "not-mounted"
    client = make_app(INTAKE_STORAGE_URL=missing.as_uri()).test_client()
    status, health, text = _health(client)
    assert status == 200 and health["status"] == "degraded"
    assert health["dependencies"]["store"] == {
        "kind": "file",
        "up": False,
        "error": "missing",
        "latency_ms": health["dependencies"]["store"]["latency_ms"],
    }
    assert "not-mounted" not in text, "health gives no address"
    missing.mkdir()
    time.sleep(1.05)  # a probe's result stands for a second (jobs.core.dependencies)
    assert _health(client)[1]["dependencies"]["store"]["up"] is True


@dataclass
class SilentS3:
    url: str
    held: list[socket.socket]


@pytest.fixture
def silent_s3(monkeypatch) -> Iterator[SilentS3]:
    """An S3 endpoint that takes every connection and never answers (a hung gateway)."""
    with silent_server() as (endpoint, held):
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        for name, value in (
            ("AWS_ACCESS_KEY_ID", "key-id"),
            ("AWS_SECRET_ACCESS_KEY", "very-secret-key"),
            ("AWS_DEFAULT_REGION", "us-east-1"),
        ):
            monkeypatch.setenv(name, value)
        # A bucket of its own: a process keeps one store per address (jobs.tasks.originals).
        yield SilentS3(f"s3://originals-bucket-{endpoint.rsplit(':', 1)[1]}/intake", held)


def test_a_store_that_never_answers_is_down_within_the_bound(make_app, silent_s3):
    client = make_app(INTAKE_STORAGE_URL=silent_s3.url).test_client()
    for _ in range(2):  # the first poll builds the probe's client too
        started = time.monotonic()
        status, health, text = _health(client)
        took = time.monotonic() - started
        assert status == 200 and health["status"] == "degraded"
        store = health["dependencies"]["store"]
        assert store["kind"] == "s3" and store["up"] is False and store["error"] == "timeout"
        assert took < 1.5, f"{took:.2f} s: a hung store held health"
        assert "secret" not in text and "originals-bucket" not in text, text
        time.sleep(1.05)


def test_polls_within_a_second_share_one_probe(make_app, silent_s3):
    """Balancers polling at once while the store hangs: one probe in flight, not one each."""
    client = make_app(INTAKE_STORAGE_URL=silent_s3.url).test_client()
    answers: list[int] = []
    polls = [threading.Thread(target=lambda: answers.append(_health(client)[0])) for _ in range(8)]
    started = time.monotonic()
    for poll in polls:
        poll.start()
    for poll in polls:
        poll.join(timeout=10)
    assert answers == [200] * 8 and time.monotonic() - started < 1.5
    time.sleep(0.5)  # the probe's client gives up on its own within the bound
    assert len(silent_s3.held) == 1, "one HeadBucket for eight polls"


def test_metrics_give_each_dependencys_reachability_and_latency(make_app, tmp_path):
    client = make_app(
        INTAKE_KB_URL=NOWHERE,
        INTAKE_KB_REPLICA_URLS=NOWHERE_REPLICA,
        INTAKE_STORAGE_URL=tmp_path.as_uri(),
    ).test_client()
    values = _metrics(client)
    assert {name for _, name in values} == {"redis", "kb", "kb_replica_1", "store"}
    assert values[("intake_dependency_up", "redis")] == 1
    assert values[("intake_dependency_up", "store")] == 1
    assert values[("intake_dependency_up", "kb")] == 0
    assert values[("intake_dependency_up", "kb_replica_1")] == 0
    assert all(
        0 <= values[("intake_dependency_latency_seconds", name)] < 1
        for name in ("redis", "kb", "kb_replica_1", "store")
    )
