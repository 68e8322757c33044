"""A real, tiny OpenAI-compatible embeddings server for fault injection.

`POST /v1/embeddings` with `{"model": ..., "input": str | [str, ...]}` answers
`{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [64 floats]}], ...}`.
Vectors are deterministic: each word is hashed to one of 64 dimensions with a sign, then the
vector is L2-normalised, so the same text always gets the same vector and shared words score.
Sixty-four dimensions, not fewer: the session's hundreds of short documents would otherwise
share identical vectors, and pgvector's HNSW index misses exact matches among many duplicates.

Behaviour is switched at run time (thread-safe):
- `mode = "ok"` (default) answers 200;
- `mode = "status:<code>"` answers that status with an OpenAI-style error body: "status:503" is
  an embedder that is down, "status:400" one that rejects the request; "status:<code>:<s>" also
  sends `Retry-After: <s>` ("status:429:3": rate-limited, come back in 3 s);
- `mode = "slow:<seconds>"` waits that long, then answers 200 (slow but within a client timeout);
- `mode = "hang"` never answers: the request is held until `reset()` or `close()` (so, past any
  client timeout), then the connection is closed without a response;
- `fail_next(n, mode, match=None)` applies `mode` to the next n requests only (with `match`: the
  next n whose input contains that text, so one test's faults never hit another document), then
  the current mode again ("fail next 2 with 503, then ok": `fail_next(2, "status:503")`).
- `limit_inputs(n, status=413)`: a request with more than n texts is refused, whatever the mode,
  with a 413 or (status=400) a 400 saying "too many inputs" as Voyage AI does.
`requests` counts every POST received; `bodies` keeps their JSON; `log` keeps a `Received` per
request (monotonic arrival time and, once answered, end time; the mode applied; the input
texts); `max_in_flight` is the most requests it held at once; `received(text)` lists the
requests of a document containing `text`; `reset()` restores all and releases hung requests.
Base URL for INTAKE_EMBEDDING_URL: `server.url` (ends with `/v1`).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.integration.helpers import free_port

DIMENSION = 64


def embed(text: str) -> list[float]:
    """The deterministic vector this server returns for `text`."""
    vector = [0.0] * DIMENSION
    for word in text.lower().split():
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % DIMENSION] += 1.0 if digest[1] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


@dataclass
class Received:
    """One POST as the server saw it."""

    at: float  # time.monotonic() when it arrived
    mode: str  # what the server did with it ("ok", "status:503", "slow:2", "hang",
    # "too_many:413")
    inputs: tuple[str, ...]  # the texts to embed
    ended: float | None = None  # time.monotonic() when its answer was sent (None: none was)


def _inputs(body: Any) -> tuple[str, ...]:
    if not isinstance(body, dict):
        return ()
    raw = body.get("input")
    return tuple(str(text) for text in (raw if isinstance(raw, list) else [raw]))


class _QuietHTTPServer(ThreadingHTTPServer):
    """A client that gave up (a timeout, a killed work-horse) is normal here, not worth a
    traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class EmbeddingServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        """`host`: the address it listens on (a test's own network namespace's, say)."""
        self.port = free_port()
        self.url = f"http://{host}:{self.port}/v1"
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._release = threading.Event()
        self.reset()
        self._httpd = _QuietHTTPServer((host, self.port), _handler_for(self))
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, name="embedding-server", daemon=True
        ).start()

    def reset(self) -> None:
        with self._lock:
            self.mode = "ok"
            self._scripted: list[tuple[str, str | None]] = []
            self._input_limit: tuple[int, int] | None = None
            self.in_flight = 0
            self.max_in_flight = 0
            self.requests = 0
            self.bodies: list[Any] = []
            self.log: list[Received] = []
            self._release.set()  # hung requests of the previous test end now
            self._release = threading.Event()

    def fail_next(self, count: int, mode: str, match: str | None = None) -> None:
        """The next `count` requests (whose input contains `match`, if given) get `mode`."""
        with self._lock:
            self._scripted = [entry for entry in self._scripted if entry[1] != match]
            self._scripted += [(mode, match)] * count

    def limit_inputs(self, count: int, status: int = 413) -> None:
        """Refuse every request with more than `count` texts: 413, or a 400 "too many inputs"."""
        with self._lock:
            self._input_limit = (count, status)

    def received(self, text: str) -> list[Received]:
        """Requests that embedded a document's chunk containing `text` (a chunk: more than the bare
        `text`, so a search query for the word alone is not counted)."""
        with self._lock:
            return [
                r
                for r in self.log
                if any(text in chunk and chunk.strip() != text for chunk in r.inputs)
            ]

    def _next_mode(self, body: Any) -> tuple[str, threading.Event, Received]:
        inputs = _inputs(body)
        with self._lock:
            self.requests += 1
            self.bodies.append(body)
            mode = self.mode
            if self._input_limit and len(inputs) > self._input_limit[0]:
                mode = f"too_many:{self._input_limit[1]}"
            else:
                for position, (_, match) in enumerate(self._scripted):
                    if match is None or any(match in text for text in inputs):
                        mode = self._scripted.pop(position)[0]
                        break
            entry = Received(time.monotonic(), mode, inputs)
            self.log.append(entry)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return mode, self._release, entry

    def _answered(self, entry: Received) -> None:
        """`entry` is over (its answer goes out now, or none will): once per request."""
        with self._lock:
            if entry.ended is None:
                entry.ended = time.monotonic()
                self.in_flight -= 1

    def close(self) -> None:
        self._stopping.set()
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler_for(server: EmbeddingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            # Over for the server before the client can read it: a client that takes its next
            # request's place as soon as it has the answer is never counted twice in flight.
            server._answered(self.entry)
            self.wfile.write(data)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = None
            mode, release, self.entry = server._next_mode(body)
            try:
                self._answer(body, mode, release)
            finally:
                server._answered(self.entry)

        def _answer(self, body: Any, mode: str, release: threading.Event) -> None:
            if self.path.rstrip("/") != "/v1/embeddings":
                return self._send(
                    404, {"error": {"message": "not found", "type": "invalid_request_error"}}
                )
            kind, _, arg = mode.partition(":")
            if kind == "status":
                code, _, retry_after = arg.partition(":")
                headers = {"Retry-After": retry_after} if retry_after else None
                return self._send(
                    int(code),
                    {
                        "error": {
                            "message": f"injected {code}",
                            "type": "injected",
                            "code": int(code),
                        }
                    },
                    headers,
                )
            if kind == "too_many":
                if arg == "413":
                    return self._send(413, {"error": {"message": "Request Entity Too Large"}})
                return self._send(int(arg), {"detail": "too many inputs"})
            if kind == "slow":
                if server._stopping.wait(float(arg)):
                    return
            if kind == "hang":
                release.wait(600)  # past any client timeout; reset() or close() ends it
                self.close_connection = True
                return
            if not isinstance(body, dict) or "input" not in body:
                return self._send(
                    400,
                    {"error": {"message": "'input' is required", "type": "invalid_request_error"}},
                )
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            tokens = sum(len(str(text).split()) for text in inputs)
            self._send(
                200,
                {
                    "object": "list",
                    "model": body.get("model", "test-embedding"),
                    "data": [
                        {"object": "embedding", "index": i, "embedding": embed(str(text))}
                        for i, text in enumerate(inputs)
                    ],
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

    return Handler
