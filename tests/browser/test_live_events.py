"""Server-Sent Events against the Procfile's gunicorn (docs/architecture.md §2, §5): a plain HTTP
client sees each state change of a task pushed, in order, without polling; a stream of a live batch
ends by itself within its bound; and the batch page's EventSource reconnects, then stops for good
once the batch is terminal.

Bounds: a stream lasts at most 25 s (webapp/events.py); the test allows 3 s on top for a busy
machine. The page reconnects after the stream's `retry: 2000` hint, so over 31 s it opens at
least 2 streams and at most 3.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field

import requests

from jobs import announce
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import unique_word

STREAM_BOUND = 25.0
SHORTEST = (1 - 0.16) * STREAM_BOUND  # webapp.events.Timing.spread
MARGIN = 3.0


@dataclass
class Received:
    """What one SSE client read, with arrival times relative to the request."""

    messages: list[tuple[float, str, object]] = field(default_factory=list)
    ended_after: float | None = None

    def of(self, kind: str) -> list[object]:
        return [payload for _, name, payload in self.messages if name == kind]


def read_stream(url: str, received: Received, until=lambda r: False) -> None:
    """Read an event stream until the server ends it (or `until(received)` holds)."""
    started = time.monotonic()
    with requests.get(url, stream=True, timeout=(5, STREAM_BOUND + MARGIN + 5)) as response:
        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        buffer = ""
        for chunk in response.iter_content(chunk_size=None, decode_unicode=True):
            buffer += chunk
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                received.messages.append((time.monotonic() - started, *_parse(block)))
            if until(received):
                return
    received.ended_after = time.monotonic() - started


def _parse(block: str) -> tuple[str, object]:
    if block.startswith(":"):
        return "comment", block[1:].strip()
    fields = dict(line.split(": ", 1) for line in block.split("\n"))
    if "retry" in fields:
        return "retry", int(fields["retry"])
    return fields["event"], json.loads(fields["data"])


def test_each_state_change_of_a_task_is_pushed_in_order(fault):
    """On the fault stack, whose HTTP embedder is made slow, so `running` lasts seconds."""
    word = unique_word()
    fault.embedding.mode = "slow:1"  # each embedding request (64 chunks) takes 1 s
    for name in list(fault.workers.names):
        fault.workers.stop(name)  # the stream must open while the task is still pending
    text = (f"The {word} ledger lists one more entry in a careful record. " * 2400).encode()
    with ApiClient(fault.url) as client:
        body = client.post("/api/documents", files=[("files", (f"ledger-{word}.txt", text))]).json()
    received = Received()
    reader = threading.Thread(
        target=read_stream, args=(fault.url + body["url"] + "/events", received)
    )
    reader.start()
    poll(lambda: received.of("task"), bool, timeout=10, message="the first state arrives")
    fault.workers.start(2)
    reader.join(timeout=60)
    assert not reader.is_alive(), "the stream ends once the batch is terminal"

    assert received.messages[0][1:] == ("retry", 2000)
    tasks = received.of("task")
    statuses = [t["status"] for t in tasks]
    assert [s for i, s in enumerate(statuses) if i == 0 or statuses[i - 1] != s] == [
        "pending",
        "running",
        "succeeded",
    ], statuses
    progress = [t["progress"] for t in tasks if t["status"] == "running"]
    assert progress == sorted(progress), f"progress went down: {progress}"
    assert len(set(progress)) >= 3, f"too few running states pushed: {progress}"
    assert [b["status"] for b in received.of("batch")][-1] == "succeeded"
    last_task_at = max(at for at, name, _ in received.messages if name == "task")
    assert received.ended_after - last_task_at < 1.5, "the stream ends right after the end"


def test_a_live_stream_ends_within_its_bound_and_the_page_reconnects(open_page, web, api, workers):
    for name in list(workers.names):
        workers.stop(name)  # nothing runs: the batch stays live for the whole test
    try:
        word = uuid.uuid4().hex[:10]
        body = api.post(
            "/api/documents",
            files=[("files", (f"waiting-{word}.txt", f"Waiting for a worker: {word}.".encode()))],
        ).json()
        events_url = web.url + body["url"] + "/events"
        received = Received()
        reader = threading.Thread(target=read_stream, args=(events_url, received))
        page = open_page(web.url)
        streams: list[float] = []
        others: list[str] = []
        page.on(
            "request",
            lambda r: (
                streams.append(time.monotonic())
                if r.url == events_url
                else others.append(r.url)
                if "/api/" in r.url
                else None
            ),
        )
        started = time.monotonic()
        reader.start()
        page.goto(body["page_url"])
        page.wait_for_timeout(31000)
        reader.join(timeout=5)

        assert received.ended_after is not None, "the stream never ended by itself"
        # Each stream's own bound is drawn in 84–100 % of it (pages opened together do not
        # reconnect together: webapp.events).
        assert SHORTEST - 1 <= received.ended_after <= STREAM_BOUND + MARGIN, (
            f"a live stream ended after {received.ended_after:.1f} s"
        )
        assert received.messages[0][1:] == ("retry", 2000)
        pings = [at for at, name, text in received.messages if name == "comment" and text == "ping"]
        assert len(pings) >= 2 and all(b - a >= 9 for a, b in zip(pings, pings[1:])), pings
        assert [t["status"] for t in received.of("task")] == ["pending"], "nothing changed"

        offsets = [round(at - started, 1) for at in streams]
        assert 2 <= len(streams) <= 3, f"the page opened streams at {offsets} s"
        assert streams[1] - streams[0] >= SHORTEST - 1, offsets
        assert others == [], f"the page also polled: {others}"
    finally:
        workers.start(2)

    poll(
        lambda: page.locator("[data-field=batch_status]").inner_text(),
        lambda text: text == "Succeeded",
        timeout=60,
        message="the page follows to the end",
    )
    opened = len(streams)
    page.wait_for_timeout(4000)  # longer than the retry hint: a reconnect would show here
    assert len(streams) == opened, "the page reconnected after the batch was terminal"


def test_the_no_progress_hint_follows_the_heartbeat(open_page, web, api, workers, redis_server):
    """A running task whose `updated_at` is 3 min old gets the hint from the pushed state; a fresh
    heartbeat takes it away. The state is written straight into Redis (and announced, as a
    worker's writes are) while no worker runs."""
    for name in list(workers.names):
        workers.stop(name)
    try:
        word = uuid.uuid4().hex[:10]
        body = api.post(
            "/api/documents",
            files=[("files", (f"stuck-{word}.txt", f"Seemingly stuck: {word}.".encode()))],
        ).json()
        task_id = body["tasks"][0]["id"]
        page = open_page(web.url)
        page.goto(body["page_url"])
        hint = page.locator(f"#t-{task_id} [data-field=stalled]")
        assert not hint.is_visible()
        old = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 185))
        redis = redis_server.client()
        redis.hset(
            f"intake:task:{task_id}",
            mapping={
                "status": "running",
                "current_step": "embedding",
                "progress": 40,
                "updated_at": old,
            },
        )
        announce(redis, task_id)  # as every writer of a task does (jobs.tasks.announcements)
        poll(
            lambda: hint.is_visible() and hint.inner_text(),
            lambda text: text == "No progress for 3 min",
            timeout=10,
            message="the hint appears",
        )
        redis.hset(
            f"intake:task:{task_id}",
            mapping={
                "progress": 41,
                "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            },
        )
        announce(redis, task_id)
        poll(
            lambda: hint.is_visible(),
            lambda shown: not shown,
            timeout=10,
            message="a fresh heartbeat hides the hint",
        )
    finally:
        workers.start(2)  # the job is still queued: it runs and ends the batch
    poll(
        lambda: page.locator("[data-field=batch_status]").inner_text(),
        lambda text: text == "Succeeded",
        timeout=60,
        message="the task still completes",
    )
