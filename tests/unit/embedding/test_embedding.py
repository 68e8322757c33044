import contextlib
import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from jobs.core.failures import PermanentError, TransientError
from jobs.core.settings import Settings
from jobs.embedding.embedders import HttpEmbedder, LocalEmbedder, SparseRows, make_embedder
from tests.unit.sparse_reference import InvertedIndex, top_k

ROOT = Path(__file__).resolve().parents[3]
CORPUS = [
    "The invoice for March is attached; payment is due in thirty days.",
    "Our cat sleeps on the warm windowsill every afternoon.",
    "Kubernetes schedules pods onto nodes according to resource requests.",
    "",
]


# -- LocalEmbedder -----------------------------------------------------------------------------


def scores(rows: SparseRows, query: SparseRows) -> np.ndarray:
    """Dot product of the query's single row with every row (what search computes)."""
    return InvertedIndex(rows).scores(query)


def row_of(rows: SparseRows, i: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = rows.indptr[i], rows.indptr[i + 1]
    return rows.indices[lo:hi], rows.values[lo:hi]


def test_local_rows_are_sparse_sorted_term_counts():
    embedder = LocalEmbedder()
    rows = embedder.embed(CORPUS)
    assert (embedder.model, embedder.dimension, embedder.batch_size) == (
        "local-bm25-v1",
        2**32,
        256,
    )
    assert isinstance(rows, SparseRows) and len(rows) == 4 and rows.dimension == 2**32
    assert (rows.indptr.dtype, rows.indices.dtype, rows.values.dtype) == (
        np.int64,
        np.uint32,
        np.float32,
    )
    for i in range(3):
        indices, values = row_of(rows, i)
        assert np.all(np.diff(indices.astype(np.int64)) > 0), "sorted and unique"
        assert np.all(indices < 2**32) and np.all(values >= 1) and np.all(values % 1 == 0)
    assert rows.indptr[3] == rows.indptr[4], "a text without words is an empty row"


def test_local_empty_input():
    rows = LocalEmbedder().embed([])
    assert len(rows) == 0 and rows.indptr.tolist() == [0] and rows.indices.size == 0


def test_local_same_text_same_row_regardless_of_batch():
    embedder = LocalEmbedder()
    alone = embedder.embed([CORPUS[1]])
    in_batch = embedder.embed(CORPUS)
    for a, b in zip(row_of(alone, 0), row_of(in_batch, 1)):
        assert a.tobytes() == b.tobytes()
    assert (
        embedder.embed(["Cat, CAT! cat"]).to_bytes() == embedder.embed(["cat cat cat"]).to_bytes()
    )


def test_local_rows_count_stemmed_words_without_stop_words():
    indices, values = row_of(LocalEmbedder().embed(["Cats, cat and the CAT's cat dog"]), 0)
    by_bucket = dict(zip(indices.tolist(), values.tolist()))
    cat, dog = (zlib.crc32(w.encode()) % 2**32 for w in ("cat", "dog"))
    # "cats" and "cat" stem alike; "and", "the" and the one-letter "s" are not indexed.
    assert by_bucket == {cat: 4.0, dog: 1.0}


@pytest.mark.parametrize(
    "query, expected",
    [
        ("invoice", 0),
        ("When is payment due?", 0),
        ("cat", 1),
        ("windowsill", 1),
        ("pods and nodes", 2),
        ("invoice for March attached", 0),
        ("cat sleeps on the windowsill", 1),
        ("schedules pods onto nodes", 2),
    ],
)
def test_local_query_finds_the_chunk_with_its_words(query, expected):
    embedder = LocalEmbedder()
    found = scores(embedder.embed(CORPUS), embedder.embed_query(query))
    assert int(np.argmax(found)) == expected
    assert found[expected] > 0.2


def test_local_unicode_words():
    embedder = LocalEmbedder()
    rows = embedder.embed(["Ein Café in München", "cafe\u0301 MÜNCHEN"])
    found = scores(rows, embedder.embed_query("cafe\u0301 MÜNCHEN"))
    assert found[0] > 0 and found[1] > found[0], "NFKC and case folded alike; the shorter first"


def _zipf_corpus(rng: random.Random, chunks: int, words_per_chunk: int, vocabulary: int):
    """Chunks of common words (Zipf-like frequencies), each with one unique rare word."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    common: set[str] = set()
    while len(common) < vocabulary:
        common.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    common_words = sorted(common)
    rng.shuffle(common_words)
    weights = [1 / rank for rank in range(1, vocabulary + 1)]
    rare: list[str] = []
    while len(rare) < chunks:
        word = "".join(rng.choice(letters) for _ in range(12))
        if word not in common:
            rare.append(word)
    texts = []
    for word in rare:
        words = rng.choices(common_words, weights=weights, k=words_per_chunk)
        words.insert(rng.randrange(len(words) + 1), word)
        texts.append(" ".join(words))
    return texts, rare


def test_local_a_rare_word_ranks_its_chunk_first_in_a_large_corpus():
    # At 384 dense buckets this found the right chunk first ~5% of the time: every bucket was
    # shared by dozens of common words. With 2**32 buckets a rare word has its bucket to itself.
    rng = random.Random(20240607)
    texts, rare = _zipf_corpus(rng, chunks=2000, words_per_chunk=150, vocabulary=4000)
    embedder = LocalEmbedder()
    index = InvertedIndex(embedder.embed(texts))
    for chunk in rng.sample(range(len(texts)), 50):
        found = index.scores(embedder.embed_query(rare[chunk]))
        assert list(top_k(found, 3))[:1] == [chunk], rare[chunk]


def test_local_rows_are_stable_across_processes():
    script = (
        "import hashlib, sys; from jobs.embedding.embedders import LocalEmbedder; "
        "v = LocalEmbedder().embed(sys.argv[1:]); "
        "print(hashlib.sha256(b''.join(v.to_bytes())).hexdigest())"
    )
    expected = hashlib.sha256(b"".join(LocalEmbedder().embed(CORPUS).to_bytes())).hexdigest()
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # this process has another, random seed
    done = subprocess.run(
        [sys.executable, "-c", script, *CORPUS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == expected


def test_local_is_fast_enough_for_a_batch():
    texts = [" ".join(f"token{(i * 31 + j) % 5000}" for j in range(100)) for i in range(1000)]
    started = time.perf_counter()
    rows = LocalEmbedder().embed(texts)
    assert len(rows) == 1000 and rows.indptr[-1] == 100_000
    assert time.perf_counter() - started < 2.0


# -- SparseRows --------------------------------------------------------------------------------


def test_sparse_rows_concatenate_and_bytes_round_trip():
    embedder = LocalEmbedder()
    whole = embedder.embed(CORPUS)
    parts = SparseRows.concatenate(
        [
            embedder.embed(CORPUS[:1]),
            embedder.embed(CORPUS[1:3]),
            SparseRows.empty(2**32),
            embedder.embed(CORPUS[3:]),
        ]
    )
    assert len(parts) == 4 and parts.to_bytes() == whole.to_bytes()
    again = SparseRows.from_bytes(*whole.to_bytes(), dimension=whole.dimension)
    assert again.to_bytes() == whole.to_bytes() and again.dimension == 2**32


def test_sparse_rows_refuse_inconsistent_arrays_and_mixed_dimensions():
    with pytest.raises(ValueError):
        SparseRows(np.array([0, 2]), np.array([1], np.uint32), np.array([1.0], np.float32), 8)
    with pytest.raises(ValueError):
        SparseRows.concatenate([SparseRows.empty(8), SparseRows.empty(16)])
    with pytest.raises(ValueError):
        SparseRows.concatenate([])


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
