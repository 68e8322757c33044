"""Search while a large document is being indexed (docs/architecture.md §11, §12),
through the real system: gunicorn, real rq workers, the local embedder, a real redis-server.

What a person sees: searches keep answering, promptly, with what was already indexed; none of
the new document's chunks is found before its task says `succeeded` (it is never half
indexed), and all of them are found the moment it does. And the index is in Redis, not in the
web process: what search reads is per-chunk keys, and nothing of the tenant's texts is copied
whole (the old layout's `texts` field is gone).
"""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest
import redis

from jobs.core import keys
from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal

pytestmark = pytest.mark.integration

LINES = 3000  # ~3,000 chunks of ~1,000 characters: several seconds of work
SLOW_SEARCH = 3.0  # a search that takes this long while indexing is a failure (2-core CI)


def _hits(client, query: str, k: int = 50) -> list[dict]:
    return get_json(client, f"/api/search?q={quote(query)}&k={k}")["results"]


def test_searches_answer_while_a_large_document_is_indexed_and_never_see_half_of_it(
    api, redis_server
):
    run = unique_word()
    base_word, big_word = f"{run}base", f"{run}big"
    response, _ = upload(api, [txt(f"{run}-base.txt", f"The {base_word} handbook. " * 20)])
    base_id = response.json()["tasks"][0]["id"]
    assert wait_terminal(api, [base_id])[0][base_id]["status"] == "succeeded"

    line = (
        f"Paragraph about {big_word} and the many other ordinary words it holds, written "
        "long enough that each one fills most of a chunk of the knowledge base on its own, "
        "with a number to keep it apart from its neighbours: "
    )
    body = "\n\n".join(f"{line}{n} " * 6 for n in range(LINES))
    response, _ = upload(api, [txt(f"{run}-big.txt", body)])
    big_id = response.json()["tasks"][0]["id"]

    searches, slowest, seen_running = 0, 0.0, False
    deadline = time.monotonic() + 240
    while True:
        status = get_json(api, f"/api/tasks/{big_id}")["status"]
        started = time.monotonic()
        base_hits = _hits(api, base_word, 5)
        big_hits = _hits(api, big_word, 5)
        slowest = max(slowest, (time.monotonic() - started) / 2)
        searches += 2
        assert [h["task_id"] for h in base_hits] == [base_id], "what was indexed stays found"
        if status == "succeeded":
            break
        seen_running = seen_running or status == "running"
        assert status in ("pending", "running"), get_json(api, f"/api/tasks/{big_id}")["error"]
        # The document may succeed between the status read and the search: read it again.
        if big_hits:
            assert get_json(api, f"/api/tasks/{big_id}")["status"] == "succeeded", (
                "a chunk of a document still being indexed was found"
            )
            break
        assert time.monotonic() < deadline, "the large document did not finish in 4 minutes"
    assert seen_running, "the searches ran while the document was being processed"
    assert slowest < SLOW_SEARCH, f"a search took {slowest:.1f} s while indexing"

    task = get_json(api, f"/api/tasks/{big_id}")
    chunks = task["result"]["chunks"]
    assert chunks >= 1000, chunks
    found = _hits(api, big_word, 50)
    assert len(found) == 50 and {h["task_id"] for h in found} == {big_id}
    page = get_json(api, f"/api/tasks/{big_id}/chunks?offset={chunks - 1}&limit=5")
    assert page["total"] == chunks and len(page["chunks"]) == 1

    connection = redis.Redis.from_url(redis_server.url)
    stored = connection.hgetall(keys.kb_document("default", f"{run}-big.txt"))
    assert int(stored[b"chunks"]) == chunks and b"texts" not in stored
    assert connection.hlen(keys.kb_rows("default")) >= chunks
    connection.close()
    assert searches >= 4
