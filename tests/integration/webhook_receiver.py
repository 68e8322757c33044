"""A real, tiny webhook receiver: a threaded http.server that records every POST (headers,
exact body bytes, arrival time) and can be told to fail.

Behaviour is switched at run time (thread-safe):
- `mode = "ok"` (default) answers 200 to every POST;
- `mode = "status:<code>"` answers that status;
- `mode = "hang"` never answers: the request is held until `reset()` or `close()`, then the
  connection is closed without a response;
- `mode = "close"` closes the connection at once without an answer;
- `fail_next(n, mode, match=())` applies `mode` to the next n requests only (with `match`: the
  next n whose body contains every one of those texts, so one test's faults hit only its own
  event), then the current mode.
`received` lists every `Delivery` (also the failed ones, with the mode applied); `events()`
the parsed bodies of those answered 200; `verify(delivery, secret)` checks its
`Intake-Signature` with the README's verifier sample (`verified`, the same text: a unit test
compares them), independently of Intake's code.
Use `url` as INTAKE_WEBHOOK_URL.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.integration.helpers import free_port


@dataclass(frozen=True)
class Delivery:
    """One POST as the receiver saw it."""

    at: float  # time.time() when it arrived
    mode: str  # what the receiver did with it
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        return json.loads(self.body)


def verify(delivery: Delivery, secret: str, tolerance: float = 300.0) -> bool:
    """What a receiver does, with the README's own sample (`verified`): parse `t=…,v1=…`,
    recompute HMAC-SHA256 of "<t>.<body>" with the secret, compare in constant time, and
    refuse a timestamp too far from now."""
    return verified(
        secret, delivery.headers.get("intake-signature", ""), delivery.body, int(tolerance)
    )


def verified(secret: str, header: str, body: bytes, tolerance: int = 300) -> bool:
    """False, never an exception, for anything but a fresh signature of `body`: the header
    is the sender's, so it may hold any text (compare_digest refuses non-ASCII str, and
    str.isdigit() takes '²' for a digit)."""
    if not header.isascii():
        return False
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    t, sent = parts.get("t", ""), parts.get("v1", "")
    if not re.fullmatch(r"[0-9]{1,12}", t) or abs(time.time() - int(t)) > tolerance:
        return False
    expected = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), sent.encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError, OSError)):
            return
        super().handle_error(request, client_address)


class WebhookReceiver:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hooks/intake"
        self._lock = threading.Lock()
        self._release = threading.Event()
        self.mode = "ok"
        self._next: list[tuple[str, tuple[bytes, ...]]] = []
        self.received: list[Delivery] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                mode = receiver._take_mode(body)
                with receiver._lock:
                    receiver.received.append(
                        Delivery(
                            time.time(), mode, {k.lower(): v for k, v in self.headers.items()}, body
                        )
                    )
                if mode == "hang":
                    receiver._release.wait()
                    self._drop()
                    return
                if mode == "close":
                    self._drop()
                    return
                status = int(mode.split(":", 1)[1]) if mode.startswith("status:") else 200
                answer = b'{"ok": true}' if status == 200 else b'{"error": "injected"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def _drop(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        self._server = _Server(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="webhook-receiver"
        )
        self._thread.start()

    def _take_mode(self, body: bytes) -> str:
        with self._lock:
            for i, (mode, match) in enumerate(self._next):
                if all(text in body for text in match):
                    del self._next[i]
                    return mode
            return self.mode

    def fail_next(self, count: int, mode: str, match: tuple[str, ...] = ()) -> None:
        with self._lock:
            self._next.extend([(mode, tuple(t.encode() for t in match))] * count)

    def set_mode(self, mode: str) -> None:
        with self._lock:
            if self.mode == "hang" and mode != "hang":
                self._release.set()
            self.mode = mode
            if mode == "hang":
                self._release = threading.Event()

    def deliveries(self) -> list[Delivery]:
        with self._lock:
            return list(self.received)

    def events(self, **match: Any) -> list[dict[str, Any]]:
        """Bodies of the deliveries answered 200, optionally those whose fields match."""
        found = []
        for delivery in self.deliveries():
            if delivery.mode != "ok":
                continue
            event = delivery.json()
            if all(event.get(k) == v for k, v in match.items()):
                found.append(event)
        return found

    def reset(self) -> None:
        with self._lock:
            self._release.set()
            self._release = threading.Event()
            self.mode, self._next, self.received = "ok", [], []

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
