"""/search while the embedding service is down or hangs (DESIGN §13): it never waits on the
embedder longer than its short bound, answers 503 with a reason and Retry-After, and, once one
query failed, answers at once (the breaker, held in Redis, so every web process knows) until
the breaker's seconds pass; then search works again. On the fault stack: its web and workers use
a real HTTP embedding server, the search's timeout there is 1 s and its breaker 3 s."""
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


def test_a_hanging_embedder_makes_search_answer_503_within_its_bound_then_at_once(fault):
    word = unique_word()
    with ApiClient(fault.url) as client:
        response, _ = upload(client, [txt(f"outage-{word}.txt", f"The {word} outage notes.")])
        task_id = response.json()["tasks"][0]["id"]
        assert wait_terminal(client, [task_id])[0][task_id]["status"] == "succeeded"

        fault.embedding.mode = "hang"
        response, seconds = _search(client, word)
        assert response.status_code == 503, response.text
        assert seconds < SEARCH_TIMEOUT + MARGIN, f"search waited {seconds:.1f} s on the embedder"
        error = response.json()["error"]
        assert error["code"] == "search_unavailable"
        assert "did not answer within 1 s" in error["message"]
        assert int(response.headers["Retry-After"]) >= 1

        hung = fault.embedding.requests
        response, seconds = _search(client, word)
        assert response.status_code == 503 and seconds < 1.0, "the breaker answers at once"
        assert fault.embedding.requests == hung, "no query reached the embedder meanwhile"
        page = client.get(f"/search?q={word}")
        assert page.status_code == 200 and "Search is unavailable for about" in page.text

        fault.embedding.reset()   # the service is back: the next search after the breaker works
        poll(lambda: _search(client, word)[0].status_code, lambda status: status == 200,
             timeout=10, interval=0.5, message="search works again after the breaker")
        # Answered by the embedder again (the fault server's toy 8-dimension vectors may rank
        # nothing above zero for a random word, so the hits themselves are not checked here).
        assert fault.embedding.requests >= 1
        assert get_json(client, "/api/health")["redis"] == "ok"
