"""Uploads accepted without a replica's confirmation are visible to an operator: counted in
/metrics by reason and described by /api/health's `replication`; the refusal of ROLE is a
warning once per process, except in a worker's in-memory warm-up (its own fakeredis)."""

from __future__ import annotations

import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis.exceptions import ResponseError

from jobs.core import replicas
from jobs.worker import warmup
from tests.unit.conftest import upload


def _samples(client) -> dict:
    text = client.get("/metrics").get_data(as_text=True)
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture
def fresh_warning(monkeypatch):
    """This process has not warned yet (another test may have)."""
    monkeypatch.setattr(replicas, "_warned", [False])


def test_uploads_on_a_server_refusing_role_are_counted_unconfirmed(client):
    upload(client, ("a.txt", b"One."))
    upload(client, ("b.txt", b"Two."), ("c.txt", b"Three."))
    key = ("intake_uploads_unconfirmed_total", (("reason", "role_refused"),))
    assert _samples(client)[key] == 2  # uploads (requests), not files


def test_health_says_uploads_are_not_confirmed_when_role_is_refused(client):
    health = client.get("/api/health").get_json()
    assert health["replication"] == {
        "role": "unknown",
        "replicas_online": 0,
        "uploads_confirmed": False,
        "role_refused": True,
    }
    assert _samples(client)[("intake_redis_replicas_online", ())] == 0


def test_what_a_role_reply_and_the_claim_s_count_say_about_confirmation(fresh_warning):
    assert replicas.reported(-1) == 0 and replicas.reported(0) == 0  # refused INFO, none online
    assert replicas.reported(2) == 2
    assert replicas.describe([b"master", 10, []])["uploads_confirmed"] is False
    assert replicas.describe([b"master", 10, [[b"10.0.0.2", b"6379", b"10"]]]) == {
        "role": "master",
        "replicas_online": 1,
        "uploads_confirmed": True,
        "role_refused": False,
    }
    assert replicas.describe([b"slave", b"10.0.0.1", 6379, b"connected", 10])["role"] == "slave"


def test_a_refused_role_warns_once_per_process(fresh_warning, caplog):
    refused = ResponseError("NOPERM no permissions to run the 'role' command")
    replicas.attached(refused)
    replicas.attached(refused)
    warnings = [
        r for r in caplog.records if r.name == "jobs.core.replicas" and r.levelno == logging.WARNING
    ]
    assert len(warnings) == 1 and "not confirmed by a replica" in warnings[0].getMessage()


def test_the_warm_up_is_quiet_and_leaves_the_warning_to_the_real_server(fresh_warning, caplog):
    caplog.set_level(logging.DEBUG, logger="jobs.core.replicas")
    assert warmup.warm_up() == warmup.WARM_UP_DOCUMENTS
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    replicas.attached(ResponseError("NOPERM no permissions to run the 'role' command"))
    assert [r.levelno for r in caplog.records if r.name == "jobs.core.replicas"][
        -1
    ] == logging.WARNING
