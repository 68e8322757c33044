"""Webhooks (docs/architecture.md §14) on fakeredis with in-process workers and a real HTTP
receiver: the body and its signature, the retry schedule, readable failure reasons, which events a
batch's tasks make (batch.completed once, again after a Retry, for reused duplicates), and that
nothing at all is written with webhooks off. tests/integration/webhooks/test_webhooks.py proves the
same on real processes."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import socket

import pytest
from rq import Queue, SimpleWorker

from jobs.core import keys
from jobs.core.settings import Settings
from jobs.tasks import webhook_events
from jobs.webhooks import delivery as webhooks
from tests.integration.webhook_receiver import WebhookReceiver, verify
from tests.samples import make_pdf_no_text
from tests.unit.conftest import upload

SECRET = "whsec-unit-test"
TEXT = b"Webhooks tell a receiver what finished. " * 20


@pytest.fixture
def receiver():
    server = WebhookReceiver()
    yield server
    server.close()


@pytest.fixture
def hooked(make_app, receiver, monkeypatch):
    """A client of an app with webhooks on (the jobs read the same settings from the env)."""
    env = {
        "INTAKE_WEBHOOK_URL": receiver.url,
        "INTAKE_WEBHOOK_SECRET": SECRET,
        "INTAKE_WEBHOOK_RETRY_BASE_SECONDS": "1",
        "INTAKE_WEBHOOK_TIMEOUT": "2",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    webhooks.install(None)
    yield make_app(**env).test_client()
    webhooks.install(None)


def deliver_all(redis, rounds: int = 1) -> None:
    """Run the webhook queue dry in-process (a retry parked by RQ is not run again here)."""
    for _ in range(rounds):
        SimpleWorker([Queue(webhook_events.QUEUE, connection=redis)], connection=redis).work(
            burst=True
        )


def _ids(response):
    body = response.get_json()
    assert response.status_code == 202, body
    return body["batch_id"], [t["id"] for t in body["tasks"]]


def test_the_signature_is_hmac_sha256_of_time_dot_body():
    payload = b'{"id":"e1","type":"task.succeeded"}'
    header = webhooks.signature("s3cret", 1700000000, payload)
    expected = hmac.new(b"s3cret", b"1700000000." + payload, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"


def test_the_body_has_the_five_fields_in_compact_json():
    event = {
        "id": "ab" * 16,
        "type": "task.failed",
        "created_at": "2026-01-01T00:00:00.000Z",
        "tenant": "acme",
        "subject": "x",
        "status": "pending",
    }
    payload = webhooks.body(event, {"id": "x", "status": "failed"})
    assert json.loads(payload) == {
        "id": "ab" * 16,
        "type": "task.failed",
        "created_at": "2026-01-01T00:00:00.000Z",
        "tenant": "acme",
        "data": {"id": "x", "status": "failed"},
    }
    assert b": " not in payload and b", " not in payload


def test_retries_last_at_least_a_day_in_whole_growing_seconds():
    delays = webhook_events.retry_delays(10)
    assert sum(delays) >= 86400 and sum(delays[:-1]) < 86400
    assert all(isinstance(d, int) and 1 <= d <= 3600 for d in delays)
    assert delays[0] < delays[3] < delays[6]
    assert webhook_events.retry_delays(1)[0] <= 2, "a 1 s base retries within seconds in tests"


def test_failure_reasons_are_readable(receiver):
    settings = Settings(webhook_url=receiver.url, webhook_timeout=0.5)
    event = {"id": "e", "type": "task.succeeded"}
    receiver.set_mode("hang")
    with pytest.raises(webhooks.DeliveryFailed, match=r"^timed out after 0.5 s"):
        webhooks.post(settings, b"{}", event)
    receiver.set_mode("close")
    with pytest.raises(webhooks.DeliveryFailed, match="^connection closed without an answer$"):
        webhooks.post(settings, b"{}", event)
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    refused = Settings(webhook_url=f"http://127.0.0.1:{port}/", webhook_timeout=0.5)
    with pytest.raises(webhooks.DeliveryFailed, match="^connection refused$"):
        webhooks.post(refused, b"{}", event)
    receiver.set_mode("status:503")
    assert webhooks.post(settings, b"{}", event) == 503


def test_a_batch_sends_each_task_then_one_batch_completed(hooked, run_jobs, redis, receiver):
    batch_id, task_ids = _ids(
        upload(hooked, ("a.txt", TEXT), ("b.txt", TEXT + b"b"), ("scan.pdf", make_pdf_no_text()))
    )
    run_jobs()
    deliver_all(redis)
    got = receiver.deliveries()
    assert all(verify(d, SECRET) for d in got), [d.headers for d in got]
    events = [d.json() for d in got]
    assert len({e["id"] for e in events}) == len(events) == 4
    by_task = {e["data"]["id"]: e for e in events if e["type"].startswith("task.")}
    assert {by_task[t]["type"] for t in task_ids[:2]} == {"task.succeeded"}
    assert by_task[task_ids[2]]["type"] == "task.failed"
    for task_id, event in by_task.items():
        api = hooked.get(f"/api/tasks/{task_id}").get_json()
        assert set(event["data"]) == set(api)
        for name in ("id", "batch_id", "status", "result", "error", "attempts", "ended_at"):
            assert event["data"][name] == api[name], name
        assert event["tenant"] == "default" and event["created_at"]
    [completed] = [e for e in events if e["type"] == "batch.completed"]
    assert events[-1] is completed, "the batch's event follows its tasks'"
    assert completed["data"]["id"] == batch_id and completed["data"]["status"] == "partial"
    assert completed["data"] == hooked.get(f"/api/batches/{batch_id}").get_json()
    listed = hooked.get("/api/webhooks/deliveries").get_json()
    assert [d["status"] for d in listed["deliveries"]] == ["delivered"] * 4
    assert listed["deliveries"][0]["type"] == "batch.completed", "newest first"


def test_a_failed_delivery_is_retried_and_keeps_its_reason(hooked, run_jobs, redis, receiver):
    _ids(upload(hooked, ("a.txt", TEXT)))
    run_jobs()
    receiver.fail_next(2, "status:500")  # both first attempts: the task's and the batch's
    deliver_all(redis)
    rows = hooked.get("/api/webhooks/deliveries").get_json()["deliveries"]
    assert {r["status"] for r in rows} == {"retrying"}
    assert {(r["attempts"], r["last_status_code"], r["last_error"]) for r in rows} == {
        (1, 500, "HTTP 500")
    }
    assert rows[0]["next_attempt_at"]
    page = hooked.get("/webhooks").get_data(as_text=True)
    assert "HTTP 500" in page and "Retrying" in page
    bodies = {d.body for d in receiver.deliveries()}
    event_id = rows[0]["id"]
    webhooks.install(Settings.from_env())
    assert webhooks.attempt(redis, Settings.from_env(), event_id, retries_left=3) == "delivered"
    again = [d.body for d in receiver.deliveries() if d.json()["id"] == event_id]
    assert len(again) == 2 and again[0] == again[1] and again[0] in bodies, "same bytes again"
    row = [
        r
        for r in hooked.get("/api/webhooks/deliveries").get_json()["deliveries"]
        if r["id"] == event_id
    ][0]
    assert (row["status"], row["attempts"], row["last_error"]) == ("delivered", 2, "HTTP 500")


def test_a_retry_reopens_the_batch_and_it_completes_again(hooked, run_jobs, redis, receiver):
    batch_id, [task_id] = _ids(upload(hooked, ("a.txt", TEXT)))
    assert hooked.post(f"/api/tasks/{task_id}/cancel").status_code == 202
    deliver_all(redis)
    assert [e["type"] for e in receiver.events()] == ["task.canceled", "batch.completed"]
    assert receiver.events()[0]["data"]["status"] == "canceled"
    assert hooked.post(f"/api/tasks/{task_id}/retry").status_code == 202
    run_jobs()
    deliver_all(redis)
    types = [e["type"] for e in receiver.events()]
    assert types == ["task.canceled", "batch.completed", "task.succeeded", "batch.completed"]
    first, second = receiver.events(type="batch.completed")
    assert first["id"] != second["id"] and second["data"]["status"] == "succeeded"
    assert receiver.events()[0]["data"]["status"] == "canceled", "the event kept its copy"


def test_a_batch_of_a_live_duplicate_completes_when_that_task_does(
    hooked, run_jobs, redis, receiver
):
    first, [task_id] = _ids(upload(hooked, ("a.txt", TEXT)))
    second, [same] = _ids(upload(hooked, ("a.txt", TEXT)))
    assert same == task_id
    run_jobs()
    deliver_all(redis)
    done = {e["data"]["id"] for e in receiver.events(type="batch.completed")}
    assert done == {first, second}
    assert len(receiver.events(type="task.succeeded")) == 1


def test_a_batch_of_finished_duplicates_is_complete_at_submit(hooked, run_jobs, redis, receiver):
    _ids(upload(hooked, ("a.txt", TEXT)))
    run_jobs()
    deliver_all(redis)
    again, _ = _ids(upload(hooked, ("a.txt", TEXT)))
    deliver_all(redis)
    assert receiver.events()[-1]["type"] == "batch.completed"
    assert receiver.events()[-1]["data"]["id"] == again


def test_deliveries_are_per_tenant(make_app, receiver, run_jobs, redis, monkeypatch):
    monkeypatch.setenv("INTAKE_WEBHOOK_URL", receiver.url)
    webhooks.install(None)
    client = make_app(
        INTAKE_API_KEYS="acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab",
        INTAKE_WEBHOOK_URL=receiver.url,
    ).test_client()
    a = {"Authorization": "Bearer acme-key-123-0123456789ab"}
    b = {"Authorization": "Bearer globex-key-456-0123456789ab"}
    response = client.post(
        "/api/documents",
        headers=a,
        content_type="multipart/form-data",
        data={"files": [(io.BytesIO(TEXT), "a.txt")]},
    )
    assert response.status_code == 202
    run_jobs()
    receiver.set_mode("status:410")
    deliver_all(redis)
    assert len(client.get("/api/webhooks/deliveries", headers=a).get_json()["deliveries"]) == 2
    assert client.get("/api/webhooks/deliveries", headers=b).get_json()["deliveries"] == []
    assert client.get("/api/webhooks/deliveries").status_code == 401
    webhooks.install(None)


def test_with_webhooks_off_nothing_is_written(client, run_jobs, redis):
    _ids(upload(client, ("a.txt", TEXT), ("scan.pdf", make_pdf_no_text())))
    run_jobs()
    written = [k.decode() for k in redis.keys("*")]
    made = [
        k
        for k in written
        if ":webhook" in k
        or k.startswith((keys.task("").rstrip(":"), keys.batch("")))
        and k.endswith((":live", ":batches"))
    ]
    assert not made and written
    assert Queue(webhook_events.QUEUE, connection=redis).count == 0


def test_a_resent_event_script_records_one_event(redis):
    """The task-finished script run twice (a client re-sending it) leaves one task event and
    one batch event."""
    settings = Settings(webhook_url="http://127.0.0.1:9/")
    redis.hset(keys.task("t1"), mapping={"id": "t1", "tenant": "acme", "status": "succeeded"})
    redis.sadd(keys.task_batches("t1"), "b1")
    redis.sadd(keys.batch_live("b1"), "t1")
    pipe = redis.pipeline()
    webhook_events.task_finished(pipe, settings, "acme", "t1", "task.succeeded")
    args = pipe.command_stack[0][0]
    pipe.execute()
    redis.execute_command(*args)  # the same EVAL again
    events = [e.decode() for e in redis.zrange(keys.tenant_webhooks("acme"), 0, -1)]
    kinds = sorted(redis.hget(keys.webhook_event(e), "type").decode() for e in events)
    assert kinds == ["batch.completed", "task.succeeded"]
