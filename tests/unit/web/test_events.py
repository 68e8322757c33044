"""GET /api/batches/<id>/events on fakeredis: scope, first events, heartbeats, the time bound and
the end at a terminal state (docs/architecture.md §5). The stream is proven again against gunicorn
in tests/browser/test_live_events.py."""

from __future__ import annotations

import io
import json
import time

import pytest

from jobs import announce
from tests.unit.conftest import upload

# Short timing so a stream that runs to its bound takes a second, not 25.
FAST = {"EVENTS_MAX_SECONDS": 1.0, "EVENTS_HEARTBEAT_SECONDS": 0.3, "EVENTS_RETRY_MS": 1234}


def parse(text: str) -> list[tuple[str, object]]:
    """SSE text → [(event name, payload)], with ("retry", ms) and ("comment", text) too."""
    messages: list[tuple[str, object]] = []
    for block in text.split("\n\n"):
        if not block:
            continue
        fields = dict(
            line.split(": ", 1) if ": " in line else (line, "")
            for line in block.split("\n")
            if not line.startswith(":")
        )
        if block.startswith(":"):
            messages.append(("comment", block[1:].strip()))
        elif "retry" in fields:
            messages.append(("retry", int(fields["retry"])))
        else:
            messages.append((fields["event"], json.loads(fields["data"])))
    return messages


@pytest.fixture
def fast_client(make_app):
    return make_app(**FAST).test_client()


def test_unknown_batch_or_task_is_a_json_404(fast_client):
    for url in ("/api/batches/nope/events", "/api/batches/" + "0" * 32 + "/events"):
        response = fast_client.get(url)
        assert response.status_code == 404 and response.is_json
        assert response.get_json()["error"]["code"] == "not_found"
    batch = upload(fast_client, ("a.txt", b"Some words.")).get_json()
    assert fast_client.get(f"{batch['url']}/events?task=nope").status_code == 404


def test_another_tenants_batch_is_a_404(make_app):
    client = make_app(
        INTAKE_API_KEYS="acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab", **FAST
    ).test_client()
    mine = {"Authorization": "Bearer acme-key-123-0123456789ab"}
    theirs = {"Authorization": "Bearer globex-key-456-0123456789ab"}
    batch = client.post(
        "/api/documents",
        headers=mine,
        content_type="multipart/form-data",
        data={"files": [(io.BytesIO(b"Secret words."), "a.txt")]},
    ).get_json()
    assert client.get(f"{batch['url']}/events", headers=theirs).status_code == 404
    assert client.get(f"{batch['url']}/events").status_code == 401
    response = client.get(f"{batch['url']}/events", headers=mine)
    assert response.status_code == 200
    response.close()


def test_a_live_batch_streams_its_state_then_heartbeats_then_ends_at_its_bound(fast_client):
    batch = upload(fast_client, ("a.txt", b"Some words."), ("b.txt", b"Other words.")).get_json()
    started = time.monotonic()
    response = fast_client.get(f"{batch['url']}/events")
    assert response.status_code == 200
    assert response.mimetype == "text/event-stream"
    assert response.headers["Cache-Control"] == "private, no-store"
    assert response.headers["X-Accel-Buffering"] == "no"
    messages = parse(response.get_data(as_text=True))
    elapsed = time.monotonic() - started
    assert messages[0] == ("retry", 1234)
    tasks = [m[1] for m in messages if m[0] == "task"]
    assert {t["id"] for t in tasks} == {t["id"] for t in batch["tasks"]}, "every task, once"
    assert len(tasks) == 2 and all(t["status"] == "pending" and "status_text" in t for t in tasks)
    summaries = [m[1] for m in messages if m[0] == "batch"]
    assert len(summaries) == 1, "an unchanged batch is sent once"
    assert summaries[0]["id"] == batch["batch_id"] and summaries[0]["status"] == "pending"
    assert summaries[0]["counts"]["pending"] == 2 and summaries[0]["progress"] == 0
    assert ("comment", "ping") in messages, "a quiet stream sends heartbeats"
    assert 0.8 <= elapsed < 2.0, f"the stream ended after {elapsed:.2f} s, its bound 0.84–1 s"


def test_a_change_is_pushed_while_the_stream_is_open(fast_client, redis):
    batch = upload(fast_client, ("a.txt", b"Some words.")).get_json()
    task_id = batch["tasks"][0]["id"]
    response = fast_client.get(f"{batch['url']}/events")
    chunks = iter(response.response)
    seen = ""
    while "event: batch" not in seen:
        seen += next(chunks).decode()
    redis.hset(
        f"intake:task:{task_id}",
        mapping={"status": "running", "progress": 40, "current_step": "embedding"},
    )
    announce(redis, task_id)  # as every writer of a task does (jobs.tasks.announcements)
    while '"progress":40' not in seen:
        seen += next(chunks).decode()
    response.close()
    tasks = [m[1] for m in parse(seen) if m[0] == "task"]
    assert [t["status"] for t in tasks] == ["pending", "running"]
    assert tasks[-1]["progress"] == 40 and tasks[-1]["status_text"] == "Embedding (40 %)"


def test_a_terminal_batch_sends_its_final_state_and_ends_at_once(make_app, run_jobs):
    client = make_app().test_client()  # the real 25 s bound
    batch = upload(client, ("a.txt", b"Some words."), ("b.txt", b"More words.")).get_json()
    run_jobs()
    started = time.monotonic()
    messages = parse(client.get(f"{batch['url']}/events").get_data(as_text=True))
    assert time.monotonic() - started < 1.0
    assert [m[1]["status"] for m in messages if m[0] == "task"] == ["succeeded", "succeeded"]
    assert [m[1]["status"] for m in messages if m[0] == "batch"] == ["succeeded"]


def test_a_task_stream_ends_when_that_task_is_terminal(make_app, run_jobs, redis):
    client = make_app().test_client()
    batch = upload(client, ("a.txt", b"Some words."), ("b.txt", b"More words.")).get_json()
    first, second = (t["id"] for t in batch["tasks"])
    client.post(f"/api/tasks/{first}/cancel")
    started = time.monotonic()
    messages = parse(client.get(f"{batch['url']}/events?task={first}").get_data(as_text=True))
    assert time.monotonic() - started < 1.0, "the batch is live but this task is done"
    tasks = [m[1] for m in messages if m[0] == "task"]
    assert [(t["id"], t["status"]) for t in tasks] == [(first, "canceled")]


def test_streams_opened_together_end_at_different_moments():
    from webapp.events import BatchStream, Timing

    lifetimes = [BatchStream(Timing(max_seconds=25.0)).lifetime for _ in range(200)]
    assert all(21.0 <= t <= 25.0 for t in lifetimes)
    assert max(lifetimes) - min(lifetimes) > 3.0, "spread over the last 5 s of the bound"
