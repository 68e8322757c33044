"""/search by meaning, by words and meaning fused, and while the embedding service is down or
hangs (docs/architecture.md §12).

On the fault stack: its web and workers use a real HTTP embedding server and keep the dense
vectors in a real PostgreSQL with pgvector; the search's embedding timeout there is 1 s and its
breaker 3 s. By default a search there fuses the lexical and the dense rankings (`hybrid`);
`mode` picks one. A search never waits on the embedder longer than its bound: it answers by
words (every document's words are indexed in Redis too), says so, and, once one query failed,
does not call the embedder at all (the breaker, held in Redis, so every web process knows) until
the breaker's seconds pass; then search by meaning comes back."""

from __future__ import annotations

import time

import pytest

from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal

pytestmark = pytest.mark.integration

SEARCH_TIMEOUT = 1.0  # INTAKE_SEARCH_EMBEDDING_TIMEOUT of the fault stack
MARGIN = 2.0  # a loaded 2-core machine


RRF_K = 60  # reciprocal rank fusion's constant (docs/architecture.md §12)


def _search(client: ApiClient, query: str, **params: str | int):
    started = time.monotonic()
    response = client.get("/api/search", params={"q": query, **params})
    return response, time.monotonic() - started


def _rank(answer: dict, task_id: str) -> int:
    ranks = [n for n, hit in enumerate(answer["results"], start=1) if hit["task_id"] == task_id]
    assert ranks, answer
    return ranks[0]


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
        # the same words: the same toy vector, cosine 1
        response, _ = _search(client, text, mode="dense")
        answer = response.json()
        assert response.status_code == 200 and answer["mode"] == "dense", answer
        assert "notice" not in answer
        assert answer["results"][0]["task_id"] == task_id
        assert answer["results"][0]["score"] == pytest.approx(1.0, abs=1e-3)

        assert client.delete(f"/api/documents/meaning-{word}.txt").status_code == 204
        for mode in ("dense", "hybrid"):
            answer = _search(client, text, mode=mode)[0].json()
            assert answer["mode"] == mode, answer
            assert all(hit["task_id"] != task_id for hit in answer["results"]), mode


def test_a_default_search_fuses_words_and_meaning_and_mode_picks_one(fault):
    word = unique_word()
    text = f"The {word} almanac lists the tides of the harbour."
    with ApiClient(fault.url) as client:
        task_id = _indexed(client, f"hybrid-{word}.txt", text)
        # A breaker another test left open closes within its 3 s: poll, then ask.
        answer = poll(
            lambda: _search(client, text)[0].json(),
            lambda found: found["mode"] == "hybrid",
            timeout=10,
            interval=0.5,
            message="a default search on the fault stack is hybrid",
        )
        assert "notice" not in answer and answer["exact"] is True
        hit = answer["results"][_rank(answer, task_id) - 1]
        assert set(hit["scores"]) == {"lexical", "dense"}, hit
        assert hit["scores"]["dense"] == pytest.approx(1.0, abs=1e-3)
        assert hit["scores"]["lexical"] > 0

        dense = _search(client, text, mode="dense")[0].json()
        assert dense["mode"] == "dense" and "notice" not in dense, dense
        assert all(set(h["scores"]) == {"dense"} for h in dense["results"])
        assert all(h["score"] == h["scores"]["dense"] for h in dense["results"])
        assert dense["results"][0]["task_id"] == task_id

        lexical = _search(client, text, mode="lexical")[0].json()
        assert lexical["mode"] == "lexical" and "notice" not in lexical, lexical
        assert all(set(h["scores"]) == {"lexical"} for h in lexical["results"])
        assert lexical["results"][_rank(lexical, task_id) - 1]["score"] == hit["scores"]["lexical"]
        # k=10 here, so each list was read 50 deep: both ranks are the single lists' own.
        fused = 1 / (RRF_K + _rank(lexical, task_id)) + 1 / (RRF_K + _rank(dense, task_id))
        assert hit["score"] == pytest.approx(fused, abs=1e-6)
        assert hit is answer["results"][0], "first in both lists: first fused"

        wide = _search(client, text, k=200)[0]
        assert wide.status_code == 200 and wide.json()["mode"] == "hybrid"
        assert len(wide.json()["results"]) <= 200
        too_wide = _search(client, text, k=201)[0]
        assert too_wide.status_code == 400, too_wide.text
        assert too_wide.json()["error"]["code"] == "bad_parameter"
        unknown = _search(client, text, mode="semantic")[0]
        assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "bad_parameter"
        page = client.get("/search", params={"q": text})
        assert page.status_code == 200 and f"hybrid-{word}.txt" in page.text
        assert "Ranked by: words and meaning (hybrid)" in page.text
        page = client.get("/search", params={"q": text, "mode": "dense"})
        assert "Ranked by: meaning (dense)" in page.text


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

        fault.embedding.reset()  # the service is back: after the breaker, search by meaning
        poll(
            lambda: _search(client, word)[0].json()["mode"],
            lambda mode: mode == "hybrid",
            timeout=10,
            interval=0.5,
            message="search by meaning again after the breaker",
        )
        assert fault.embedding.requests >= 1
        assert get_json(client, "/api/health")["redis"] == "ok"
