"""Webhooks (docs/architecture.md §14) on the running system: the Procfile's web, two ingestion
workers, the Procfile's webhook worker (its own process, queue `intake-webhooks`), a real
redis-server, the HTTP embedding server and a real HTTP receiver (webhook_receiver.py) that checks
every signature itself and fails on demand.

Its own stack (database 7) with two tenants' keys, INTAKE_WEBHOOK_URL at the receiver, a
1 s retry base (retries after ~1 s, ~2 s, ~4 s …) and a 2 s delivery timeout. Each test
makes its own documents with a unique word and looks only at its own events.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from jobs.worker.workers import webhook_worker_command
from tests.integration.fixtures import FAULT_ENV, Stack, running_stack
from tests.integration.helpers import ApiClient, assert_stays, poll
from tests.integration.intake_api import (
    TASK_TIMEOUT,
    get_json,
    txt,
    unique_word,
    upload,
    wait_terminal,
)
from tests.integration.webhook_receiver import WebhookReceiver, verify
from tests.samples import make_pdf_no_text

pytestmark = pytest.mark.integration

DATABASE = 7
SECRET = "whsec-integration-secret"
KEYS = {
    "acme": "acme-webhook-key-123-0123456789ab",
    "globex": "globex-webhook-key-456-0123456789ab",
}
DELIVERY_TIMEOUT = 30.0  # an event reaches a healthy receiver well within this
RETRIED_TIMEOUT = 40.0  # three attempts: ~2 s + ~4 s of backoff, RQ's scheduling, forks


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver()
    yield server
    server.close()


@pytest.fixture(scope="module")
def hooked(
    redis_server, _embedding_server, tmp_path_factory, postgres_url, receiver
) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "webhooks",
        DATABASE,
        {
            "INTAKE_EMBEDDING_URL": _embedding_server.url,
            **FAULT_ENV,
            "INTAKE_VECTOR_DATABASE_URL": postgres_url,
            "INTAKE_API_KEYS": ",".join(f"{t}:{k}" for t, k in KEYS.items()),
            "INTAKE_WEBHOOK_URL": receiver.url,
            "INTAKE_WEBHOOK_SECRET": SECRET,
            "INTAKE_WEBHOOK_RETRY_BASE_SECONDS": "2",
            "INTAKE_WEBHOOK_TIMEOUT": "2",
        },
        embedding=_embedding_server,
    ) as stack:
        name = f"itest-webhooks-{unique_word()}"
        webhook_worker = stack.workers.group.spawn(
            "webhook-worker", webhook_worker_command(stack.redis_url, name=name), stack.env
        )
        try:
            _wait_registered(stack, name)
            yield stack
        finally:
            webhook_worker.stop(20)


def _wait_registered(stack: Stack, name: str) -> None:
    from rq import Worker

    poll(
        lambda: {w.name for w in Worker.all(connection=stack.redis())},
        lambda seen: name in seen,
        timeout=30,
        message="the webhook worker registered in RQ",
        ignore=(redis.ConnectionError,),
    )


@pytest.fixture
def acme(hooked, receiver, embedding_server) -> Iterator[ApiClient]:
    receiver.set_mode("ok")
    with ApiClient(hooked.url, api_key=KEYS["acme"]) as client:
        yield client
    receiver.set_mode("ok")


def events_of(receiver: WebhookReceiver, batch_id: str) -> list[dict[str, Any]]:
    """The events a batch's tasks and the batch itself made, as answered 200, in order."""
    found = []
    for event in receiver.events():
        data = event["data"]
        if data.get("batch_id") == batch_id or (
            event["type"] == "batch.completed" and data.get("id") == batch_id
        ):
            found.append(event)
    return found


def wait_events(
    receiver: WebhookReceiver, batch_id: str, count: int, timeout: float = DELIVERY_TIMEOUT
) -> list[dict[str, Any]]:
    return poll(
        lambda: events_of(receiver, batch_id),
        lambda found: len(found) >= count,
        timeout=timeout,
        message=f"{count} webhook events of batch {batch_id}",
    )


def submitted(response) -> tuple[str, list[str]]:
    assert response.status_code == 202, response.text[:500]
    body = response.json()
    return body["batch_id"], [t["id"] for t in body["tasks"]]


def deliveries(client: ApiClient) -> list[dict[str, Any]]:
    return get_json(client, "/api/webhooks/deliveries?limit=200")["deliveries"]


def test_a_batch_sends_each_task_and_then_one_batch_completed(acme, receiver):
    word = unique_word()
    batch_id, task_ids = submitted(
        upload(
            acme,
            [
                txt(f"{word}-{n}.txt", f"The {word} memo number {n} about ledgers.")
                for n in range(3)
            ],
        )[0]
    )
    final, _ = wait_terminal(acme, task_ids)
    assert {t["status"] for t in final.values()} == {"succeeded"}, final
    wait_events(receiver, batch_id, 4)
    assert_stays(
        lambda: len(events_of(receiver, batch_id)),
        lambda n: n == 4,
        duration=1.0,
        message="no event beyond one per task and one batch.completed",
    )
    events = events_of(receiver, batch_id)
    assert [e["type"] for e in events].count("task.succeeded") == 3, events
    assert [e["type"] for e in events].count("batch.completed") == 1, events
    assert len({e["id"] for e in events}) == 4, "every event has its own id"
    own = [d for d in receiver.deliveries() if d.json()["id"] in {e["id"] for e in events}]
    assert own and all(verify(d, SECRET) for d in own), [d.headers for d in own]
    assert {d.headers["content-type"] for d in own} == {"application/json"}
    for event in events:
        assert event["tenant"] == "acme" and event["created_at"].endswith("Z"), event
        if event["type"] != "task.succeeded":
            continue
        api = get_json(acme, f"/api/tasks/{event['data']['id']}")
        assert set(event["data"]) == set(api), "the task JSON of GET /api/tasks/<id>"
        for name in (
            "id",
            "batch_id",
            "document_id",
            "filename",
            "status",
            "result",
            "error",
            "attempts",
            "started_at",
            "ended_at",
            "url",
            "can_retry",
        ):
            assert event["data"][name] == api[name], (name, event["data"][name], api[name])
    completed = [e for e in events if e["type"] == "batch.completed"][0]
    batch = get_json(acme, f"/api/batches/{batch_id}")
    assert completed["data"]["status"] == batch["status"] == "succeeded"
    assert completed["data"]["counts"] == batch["counts"]
    assert [t["id"] for t in completed["data"]["tasks"]] == task_ids
    listed = {d["id"]: d for d in deliveries(acme)}
    assert all(
        listed[e["id"]]["status"] == "delivered" and listed[e["id"]]["attempts"] == 1
        for e in events
    ), [listed.get(e["id"]) for e in events]


def test_a_failing_document_and_a_canceled_one(acme, receiver, embedding_server):
    word = unique_word()
    bad_batch, [bad] = submitted(
        upload(acme, [(f"{word}.pdf", make_pdf_no_text(), "application/pdf")])[0]
    )
    embedding_server.fail_next(1, "slow:3", match=word)  # below the 4 s embedding timeout
    slow_batch, [slow] = submitted(upload(acme, [txt(f"{word}.txt", f"The {word} memo.")])[0])
    poll(
        lambda: len(embedding_server.received(word)),
        lambda n: n >= 1,
        timeout=TASK_TIMEOUT,
        message="the slow document in its embedding step",
    )
    assert acme.post(f"/api/tasks/{slow}/cancel").status_code == 202
    [failed, failed_batch] = wait_events(receiver, bad_batch, 2)
    assert failed["type"] == "task.failed" and failed_batch["type"] == "batch.completed"
    assert failed["data"]["status"] == "failed"
    assert failed["data"]["error"] == get_json(acme, f"/api/tasks/{bad}")["error"]
    assert failed_batch["data"]["status"] == "failed"
    [canceled, canceled_batch] = wait_events(receiver, slow_batch, 2)
    assert (canceled["type"], canceled["data"]["id"], canceled["data"]["status"]) == (
        "task.canceled",
        slow,
        "canceled",
    )
    assert canceled_batch["data"]["status"] == "canceled"


def test_500_twice_then_200_is_delivered_on_the_third_attempt(acme, receiver):
    word = unique_word()
    receiver.fail_next(2, "status:500", match=('"type":"task.succeeded"', word))
    batch_id, [task_id] = submitted(upload(acme, [txt(f"{word}.txt", f"The {word} memo.")])[0])
    wait_terminal(acme, [task_id])
    event = poll(
        lambda: [e for e in events_of(receiver, batch_id) if e["type"] == "task.succeeded"],
        bool,
        timeout=RETRIED_TIMEOUT,
        message="the task event delivered",
    )[0]
    tries = [d for d in receiver.deliveries() if d.json()["id"] == event["id"]]
    assert [d.mode for d in tries] == ["status:500", "status:500", "ok"], tries
    assert len({d.body for d in tries}) == 1, "every attempt sends the same bytes"
    assert all(verify(d, SECRET) for d in tries)
    # Delays of 2 and 4 s (±20 %, whole seconds: at least 2 and 3); RQ keeps a retry's due time
    # in whole seconds, truncated, so it may come up to 1 s early: at least 1 and 2 s apart.
    assert tries[1].at - tries[0].at >= 1.0 and tries[2].at - tries[1].at >= 2.0, "backoff"
    row = poll(
        lambda: [d for d in deliveries(acme) if d["id"] == event["id"]],
        lambda rows: rows and rows[0]["status"] == "delivered",
        timeout=10,
        message="the delivery recorded",
    )[0]
    assert (row["attempts"], row["last_status_code"], row["last_error"]) == (3, 200, "HTTP 500")
    assert row["task_id"] == task_id and row["delivered_at"]


def test_a_hanging_receiver_never_slows_ingestion(acme, receiver):
    def ingest(tag: str) -> tuple[str, float]:
        started = time.monotonic()
        batch_id, task_ids = submitted(
            upload(acme, [txt(f"{tag}-{n}.txt", f"The {tag} memo {n}.") for n in range(3)])[0]
        )
        final, _ = wait_terminal(acme, task_ids)
        assert {t["status"] for t in final.values()} == {"succeeded"}, final
        return batch_id, time.monotonic() - started

    _, usual = ingest(unique_word())
    receiver.set_mode("hang")
    hung_batch, hung = ingest(unique_word())
    # The webhook worker is stuck in 2 s timeouts meanwhile; ingestion does not wait for it.
    assert hung < usual + 5.0, f"{hung:.1f} s with a hanging receiver, {usual:.1f} s without"
    rows = poll(
        lambda: [
            d
            for d in deliveries(acme)
            if d["status"] == "retrying"
            and d["last_error"] == "timed out after 2 s without an answer"
        ],
        bool,
        timeout=DELIVERY_TIMEOUT,
        message="a delivery retrying after a timeout",
    )
    assert rows[0]["next_attempt_at"] and rows[0]["last_status_code"] is None
    page = acme.get("/webhooks")
    assert page.status_code == 200 and "timed out after 2 s without an answer" in page.text
    receiver.set_mode("ok")
    events = wait_events(receiver, hung_batch, 4, timeout=60)
    assert [e["type"] for e in events].count("batch.completed") == 1


def test_deliveries_are_tenant_scoped(acme, hooked, receiver):
    word = unique_word()
    receiver.fail_next(5, "status:503", match=(word,))
    batch_id, [task_id] = submitted(upload(acme, [txt(f"{word}.txt", f"The {word} memo.")])[0])
    wait_terminal(acme, [task_id])
    rows = poll(
        lambda: [d for d in deliveries(acme) if d["task_id"] == task_id],
        lambda found: found and found[0]["last_error"] == "HTTP 503",
        timeout=DELIVERY_TIMEOUT,
        message="acme's failed delivery listed",
    )
    with ApiClient(hooked.url, api_key=KEYS["globex"]) as globex:
        theirs = get_json(globex, "/api/webhooks/deliveries?limit=200")
        assert rows[0]["id"] not in {d["id"] for d in theirs["deliveries"]}
        assert all(d["task_id"] != task_id for d in theirs["deliveries"])
        page = globex.get("/webhooks")
        assert page.status_code == 200 and rows[0]["id"] not in page.text
    with ApiClient(hooked.url) as anonymous:
        assert anonymous.get("/api/webhooks/deliveries").status_code == 401
    page = acme.get("/webhooks")
    assert page.status_code == 200 and rows[0]["id"] in page.text and "HTTP 503" in page.text
