"""Many open pages and slow clients against gunicorn as the Procfile runs it
(docs/architecture.md §13): hundreds of open event streams and hundreds of half-sent requests hold
no request thread, so a poll and an upload still answer at once; and one change, announced by a
real worker, reaches every open stream of its batch.

The streams are plain sockets in one selector loop here, as many browser tabs would be.
"""

from __future__ import annotations

import selectors
import socket
import time
from urllib.parse import urlsplit

import pytest

from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, txt, unique_word, upload

pytestmark = pytest.mark.integration

STREAMS = 300  # open event streams on one web instance (the bench opens 1,000)
SLOW_CLIENTS = 200  # connections that sent half a request header and stopped
ANSWER_BOUND = 3.0  # seconds: with 120 streams on 2 x 16 gthread threads a poll took > 3 s


class Sockets:
    """Connections to the web server, read in one selector loop."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.address = (parts.hostname, parts.port)
        self.selector = selectors.DefaultSelector()
        self.received: dict[socket.socket, bytes] = {}
        self.closed: set[socket.socket] = set()

    def open(self, request: bytes) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=10)
        sock.sendall(request)
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ)
        self.received[sock] = b""
        return sock

    def read(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            for key, _ in self.selector.select(min(left, 0.1)):
                sock = key.fileobj
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                if data:
                    self.received[sock] += data
                else:
                    self.selector.unregister(sock)
                    self.closed.add(sock)

    def close(self) -> None:
        for sock in self.received:
            if sock not in self.closed:
                self.selector.unregister(sock)
            sock.close()
        self.selector.close()


def _stream_request(host: str, path: str) -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n"
        "Connection: keep-alive\r\n\r\n"
    ).encode()


def _timed(call) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def test_hundreds_of_open_streams_hold_no_thread_and_all_hear_one_change(web, workers):
    names = list(workers.names)
    for name in names:
        workers.stop(name)
    word = unique_word()
    with ApiClient(web.url) as client:
        response, _ = upload(client, [txt(f"watched-{word}.txt", f"The {word} note.")])
        batch = response.json()
        task_id = batch["tasks"][0]["id"]
        sockets = Sockets(web.url)
        try:
            request = _stream_request(sockets.address[0], f"{batch['url']}/events")
            streams = [sockets.open(request) for _ in range(STREAMS)]
            sockets.read(0.5)
            poll(
                lambda: (sockets.read(0.2), sum(b"retry:" in sockets.received[s] for s in streams))[
                    1
                ],
                lambda started: started == STREAMS,
                timeout=60,
                interval=0.1,
                message=f"all {STREAMS} streams answered",
            )

            seconds = _timed(lambda: get_json(client, f"/api/tasks/{task_id}"))
            assert seconds < ANSWER_BOUND, (
                f"a poll took {seconds:.2f} s with {STREAMS} streams open"
            )
            seconds = _timed(lambda: upload(client, [txt(f"other-{word}.txt", "Other words.")]))
            assert seconds < ANSWER_BOUND, f"an upload took {seconds:.2f} s with streams open"

            workers.ensure(len(names))  # the worker announces each change of the task
            poll(
                lambda: (
                    sockets.read(0.2),
                    sum(b'"status":"succeeded"' in sockets.received[s] for s in streams),
                )[1],
                lambda done: done == STREAMS,
                timeout=90,
                interval=0.1,
                message="every stream sent the task's success",
            )
        finally:
            sockets.close()


def test_half_sent_requests_do_not_freeze_the_web(web, workers):
    sockets = Sockets(web.url)
    try:
        host = sockets.address[0]
        for _ in range(SLOW_CLIENTS):
            sockets.open(f"GET /api/health HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode())
        sockets.read(1.0)
        with ApiClient(web.url) as client:
            for _ in range(3):
                seconds = _timed(lambda: get_json(client, "/api/health"))
                assert seconds < ANSWER_BOUND, (
                    f"a request took {seconds:.2f} s with {SLOW_CLIENTS} half-sent ones open"
                )
    finally:
        sockets.close()
