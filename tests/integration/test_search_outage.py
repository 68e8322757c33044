"""/search by meaning, and while the embedding service is down or hangs (docs/architecture.md §12).

On the fault stack: its web and workers use a real HTTP embedding server and keep the dense
vectors in a real PostgreSQL with pgvector; the search's embedding timeout there is 1 s and its
breaker 3 s. A search never waits on the embedder longer than its bound: it answers by words
(every document's words are indexed in Redis too), says so, and, once one query failed, does
not call the embedder at all (the breaker, held in Redis, so every web process knows) until the
breaker's seconds pass; then search by meaning comes back."""
from __future__ import annotations

import time

import pytest

from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal

pytestmark = pytest.mark.integration

SEARCH_TIMEOUT = 1.0   # INTAKE_SEARCH_EMBEDDING_TIMEOUT of the fault stack
MARGIN = 2.0           # a loaded 2-core machine


def _search(client: ApiClient, query: str):
    started = time.monotonic()
    response = client.get(f"/api/search?q={query}")
    return response, time.monotonic() - started


def _indexed(client: ApiClient, name: str, text: str) -> str:
    response, _ = upload(client, [txt(name, text)])
    task_id = response.json()["tasks"][0]["id"]
    assert wait_terminal(client, [task_id])[0][task_id]["status"] == "succeeded"
    return task_id


def test_search_by_meaning_uses_the_vector_engine_and_forgets_a_deleted_document(fault):
    word = unique_word()
    text = f"The {word} ledger reconciles the quarterly accounts."
    with ApiClient(fault.url) as client:
        task_id = _indexed(client, f"meaning-{word}.txt", text)
        response, _ = _search(client, text)   # the same words: the same toy vector, cosine 1
        answer = response.json()
        assert response.status_code == 200 and answer["mode"] == "semantic", answer
        assert "notice" not in answer
        assert answer["results"][0]["task_id"] == task_id
        assert answer["results"][0]["score"] == pytest.approx(1.0, abs=1e-3)

        assert client.delete(f"/api/documents/meaning-{word}.txt").status_code == 204
        answer = _search(client, text)[0].json()
        assert all(hit["task_id"] != task_id for hit in answer["results"])


def test_a_hanging_embedder_makes_search_answer_by_words_within_its_bound_then_at_once(fault):
    word = unique_word()
    with ApiClient(fault.url) as client:
        task_id = _indexed(client, f"outage-{word}.txt", f"The {word} outage notes.")

        fault.embedding.mode = "hang"
        response, seconds = _search(client, word)
        assert seconds < SEARCH_TIMEOUT + MARGIN, f"search waited {seconds:.1f} s on the embedder"
        answer = response.json()
        assert response.status_code == 200 and answer["mode"] == "lexical", answer
        assert "did not answer within 1 s" in answer["notice"]
        assert "match your words only" in answer["notice"]
        assert [hit["task_id"] for hit in answer["results"]] == [task_id]

        hung = fault.embedding.requests
        response, seconds = _search(client, word)
        assert response.status_code == 200 and seconds < 1.0, "the breaker answers at once"
        assert response.json()["mode"] == "lexical"
        assert fault.embedding.requests == hung, "no query reached the embedder meanwhile"
        page = client.get(f"/search?q={word}")
        assert page.status_code == 200 and "Search by meaning is unavailable" in page.text
        assert f"outage-{word}.txt" in page.text

        fault.embedding.reset()   # the service is back: after the breaker, search by meaning
        poll(lambda: _search(client, word)[0].json()["mode"], lambda mode: mode == "semantic",
             timeout=10, interval=0.5, message="search by meaning again after the breaker")
        assert fault.embedding.requests >= 1
        assert get_json(client, "/api/health")["redis"] == "ok"
