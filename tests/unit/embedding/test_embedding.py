import contextlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from jobs.core.failures import PermanentError, TransientError
from jobs.core.settings import Settings
from jobs.embedding.embedders import HttpEmbedder, LocalEmbedder, make_embedder

CORPUS = [
    "The invoice for March is attached; payment is due in thirty days.",
    "Our cat sleeps on the warm windowsill every afternoon.",
    "Kubernetes schedules pods onto nodes according to resource requests.",
    "",
]


# -- LocalEmbedder: no dense model ------------------------------------------------------------


def test_local_embedder_has_no_dense_model_and_keeps_its_version_name():
    embedder = LocalEmbedder()
    assert (embedder.model, embedder.dimension, embedder.batch_size) == (
        "local-bm25-v1",
        2**32,
        256,
    )
    assert embedder.embed(CORPUS).shape == (4, 0)


# -- a loopback OpenAI-compatible service ------------------------------------------------------


class FakeService:
    """Answers POST /v1/embeddings as `respond(body) -> (status, payload[, headers])` says;
    records calls."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.release = threading.Event()
        self.respond = self.embeddings
        self.url = ""

    @staticmethod
    def embeddings(body):
        data = [
            {"object": "embedding", "index": i, "embedding": [float(text.split()[-1]), 1.0, 0.0]}
            for i, text in enumerate(body["input"])
        ]
        return 200, {"object": "list", "data": data[::-1], "model": body["model"]}

    def slow(self, body):
        self.release.wait(10)
        return self.embeddings(body)


@pytest.fixture
def service():
    with serving() as state:
        yield state


@contextlib.contextmanager
def serving():
    """A `FakeService` on a loopback port for the block (the `service` fixture's)."""
    state = FakeService()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.calls.append(
                {
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": body,
                    "client": self.client_address,
                }
            )
            status, payload, *headers = state.respond(body)
            raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for name, value in (headers[0] if headers else {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)
            except OSError:  # the client gave up (the timeout test)
                self.close_connection = True

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


def http_error(embedder, error_type=TransientError):
    with pytest.raises(error_type) as caught:
        embedder.embed(["text 1"])
    return caught.value


def test_http_batches_in_order_with_one_connection(service):
    embedder = HttpEmbedder(service.url + "/", "test-model", api_key="k-123", batch_size=64)
    assert embedder.dimension == 0
    vectors = embedder.embed([f"text {i}" for i in range(150)])
    assert [len(call["body"]["input"]) for call in service.calls] == [64, 64, 22]
    assert vectors.shape == (150, 3) and vectors.dtype == np.float32
    assert embedder.dimension == 3
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.allclose(vectors[:, 0] / vectors[:, 1], np.arange(150)), "kept in input order"
    call = service.calls[0]
    assert call["path"] == "/v1/embeddings"
    assert call["body"]["model"] == "test-model"
    assert call["headers"]["Authorization"] == "Bearer k-123"
    assert len({c["client"] for c in service.calls}) == 1, "the session reuses its connection"


def test_http_without_key_sends_no_authorization(service):
    HttpEmbedder(service.url, "m").embed(["text 1"])
    assert "Authorization" not in service.calls[0]["headers"]


def test_http_empty_input_makes_no_request(service):
    assert HttpEmbedder(service.url, "m").embed([]).shape == (0, 0)
    assert service.calls == []


@pytest.mark.parametrize(
    "status, code",
    [
        (500, "embedding_unavailable"),
        (503, "embedding_unavailable"),
        (429, "embedding_rate_limited"),
        (408, "embedding_timeout"),
    ],
)
def test_http_retryable_statuses_are_transient(service, status, code):
    service.respond = lambda body: (status, {"error": {"message": "busy"}})
    error = http_error(HttpEmbedder(service.url, "m"))
    assert (error.code, error.transient, error.retryable) == (code, True, True)
    if status >= 500:
        assert f"answered {status}" in error.message


@pytest.mark.parametrize(
    "status, setting",
    [
        (401, "INTAKE_EMBEDDING_API_KEY"),
        (403, "INTAKE_EMBEDDING_API_KEY"),
        (400, "INTAKE_EMBEDDING_MODEL"),
        (404, "INTAKE_EMBEDDING_URL"),
    ],
)
def test_http_other_4xx_are_permanent_but_retryable_by_hand(service, status, setting):
    service.respond = lambda body: (status, {"error": {"message": "The model `m` is unknown"}})
    error = http_error(HttpEmbedder(service.url, "m", api_key="bad"), PermanentError)
    assert (error.code, error.transient, error.retryable) == ("embedding_rejected", False, True)
    assert f"HTTP {status}" in error.message and setting in error.message
    assert "The model `m` is unknown" in error.message
    assert "bad" not in error.message.replace("model", "")


def test_http_401_message():
    class Response:
        status_code, reason = 401, "Unauthorized"

        def json(self):
            raise ValueError("no body")

    from jobs.embedding.embedders import _status_error

    assert _status_error(Response()).message == (
        "The embedding service refused the API key (HTTP 401). "
        "Check INTAKE_EMBEDDING_API_KEY, then Retry."
    )


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        {"data": "nope"},
        {"data": [{"index": 0, "embedding": []}]},
        {"data": [{"index": 5, "embedding": [1.0, 2.0]}]},
        {"data": [{"index": 0, "embedding": [1.0, "x"]}]},
        {"data": []},
        {"unexpected": True},
    ],
)
def test_http_malformed_answers(service, payload):
    service.respond = lambda body: (200, payload)
    error = http_error(HttpEmbedder(service.url, "m"))
    assert error.code == "embedding_bad_response" and error.transient


def test_http_dimension_must_not_change(service):
    embedder = HttpEmbedder(service.url, "m")
    embedder.embed(["text 1"])
    service.respond = lambda body: (200, {"data": [{"index": 0, "embedding": [1.0, 2.0]}]})
    assert http_error(embedder).code == "embedding_bad_response"


def test_http_slow_service_times_out(service):
    service.respond = service.slow
    embedder = HttpEmbedder(service.url, "m", timeout=0.5)
    started = time.monotonic()
    error = http_error(embedder)
    assert error.code == "embedding_timeout"
    assert error.message == "The embedding service did not answer within 0.5 s."
    assert time.monotonic() - started < 5
    assert len(service.calls) == 1, "the request did reach the service"


def test_http_connection_refused():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://user:secret@127.0.0.1:{port}/v1"
    error = http_error(HttpEmbedder(url, "m", timeout=2))
    assert error.code == "embedding_unavailable" and error.transient
    assert error.message == (
        f"The embedding service at http://127.0.0.1:{port}/v1 could not be reached."
    )


def test_http_unusable_url_is_a_configuration_error():
    error = http_error(HttpEmbedder("localhost:8080/v1", "m"), PermanentError)
    assert (error.code, error.retryable) == ("embedding_rejected", True)
    assert "INTAKE_EMBEDDING_URL" in error.message


# -- make_embedder -----------------------------------------------------------------------------


def test_make_embedder_defaults_to_local():
    assert isinstance(make_embedder(Settings()), LocalEmbedder)


def test_make_embedder_http_from_settings():
    embedder = make_embedder(
        Settings(
            embedding_url="http://127.0.0.1:9/v1", embedding_api_key="k", embedding_timeout=7.5
        )
    )
    assert isinstance(embedder, HttpEmbedder)
    assert (embedder.model, embedder.timeout, embedder.batch_size) == (
        "text-embedding-3-small",
        7.5,
        64,
    )
    assert embedder.endpoint == "http://127.0.0.1:9/v1/embeddings"
    named = make_embedder(Settings(embedding_url="http://x/v1", embedding_model="bge-small"))
    assert named.model == "bge-small"
