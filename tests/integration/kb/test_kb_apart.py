"""The knowledge base on a Redis of its own (INTAKE_KB_URL), on the real system: documents are
indexed, searched, listed by chunk and deleted there, the queue's Redis holds none of it, and
the knowledge base's bound is read there (429 `knowledge_base_full` until a delete makes room).

A stack of its own: the Procfile's web and two `rq worker` processes with the local embedder,
the queue on logical database 12 of the session's redis-server, the knowledge base on a second
redis-server process started here, with a read replica that searches take turns on
(INTAKE_KB_REPLICA_URLS); a search the replica does not finish in time is not run again on
the primary.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from jobs.core import keys
from jobs.kb.retrieval import _DENSE, _LEXICAL
from tests.integration.core.test_replica_acks import MARGIN_S, Pair, running_pair
from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, unique_word
from tests.integration.kb.test_kb_bound import ingest as ingest_one
from tests.integration.kb.test_kb_bound import send
from tests.integration.servers import REDIS_SERVER, RedisServer
from tests.integration.tasks.test_budgets import text_of_chunks

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed"),
]

DATABASE = 12  # nothing else uses this one
TENANT, KEY = "apart", "apart-key-123456-0123456789ab"
KB_LIMIT = 4


@pytest.fixture(scope="module")
def kb_pair(tmp_path_factory) -> Iterator[Pair]:
    """The knowledge base's Redis and its read replica, each a real redis-server."""
    with running_pair(tmp_path_factory, "kb-redis") as started:
        yield started


@pytest.fixture(scope="module")
def kb_server(kb_pair: Pair) -> RedisServer:
    return kb_pair.primary


@pytest.fixture(scope="module")
def stack(redis_server, kb_pair, _embedding_server, tmp_path_factory) -> Iterator[Stack]:
    with running_stack(
        redis_server,
        tmp_path_factory,
        "kb-apart",
        DATABASE,
        {
            "INTAKE_API_KEYS": f"{TENANT}:{KEY}",
            "INTAKE_KB_URL": kb_pair.primary.url,
            "INTAKE_KB_REPLICA_URLS": kb_pair.replica.url,
            "INTAKE_KB_CHUNK_LIMIT": str(KB_LIMIT),
        },
        embedding=_embedding_server,
    ) as started:
        yield started


def ingest(client: ApiClient, name: str, content: bytes) -> dict[str, Any]:
    done = ingest_one(client, name, content)
    assert done["status"] == "succeeded", done
    return done


def found(client: ApiClient, word: str) -> list[dict[str, Any]]:
    return get_json(client, f"/api/search?q={word}")["results"]


def test_a_document_lives_on_the_knowledge_bases_redis_from_upload_to_delete(stack, kb_server):
    queue, kb = stack.redis(), kb_server.client()
    with ApiClient(stack.url, api_key=KEY) as client:
        word = unique_word()
        done = ingest(client, f"apart-{word}.txt", text_of_chunks(word, 2))
        assert done["result"]["chunks"] == 2, done
        # Its flip follows the task's `succeeded` by one round trip (jobs.kb.pending_flips).
        hits = poll(
            lambda: found(client, word),
            timeout=10,
            message="the succeeded document found by search",
        )
        assert {hit["task_id"] for hit in hits} == {done["id"]}, hits
        page = get_json(client, f"/api/tasks/{done['id']}/chunks")
        assert page["total"] == 2 and word in page["chunks"][0]["text"], page

        assert list(kb.scan_iter(match="intake:kb:*", count=1000)), "the index is on its Redis"
        assert not list(queue.scan_iter(match="intake:kb:*", count=1000)), (
            "the queue's Redis holds nothing of the knowledge base"
        )
        assert queue.hlen(keys.pending_flips()) == 0, "the flip was applied and forgotten"

        assert client.delete(f"/api/documents/apart-{word}.txt").status_code == 204
        assert found(client, word) == []
        assert int(kb.get(keys.tenant_chunks(TENANT)) or 0) == 0
        assert client.get(f"/api/tasks/{done['id']}").status_code == 404


def test_the_bound_of_a_knowledge_base_apart_is_read_on_its_redis(stack, kb_server):
    kb = kb_server.client()
    poll(
        lambda: kb.exists(keys.kb_total_chunks()),
        timeout=90,
        message="the knowledge base of all tenants counted (a worker's housekeeping)",
    )
    with ApiClient(stack.url, api_key=KEY) as client:
        words = [unique_word() for _ in range(3)]
        for word in words[:2]:  # 2 + 2 chunks: what the knowledge base may hold
            ingest(client, f"full-{word}.txt", text_of_chunks(word, 2))
        # Each flip, which counts the chunks, follows its task's `succeeded` by a round trip.
        poll(
            lambda: int(kb.get(keys.kb_total_chunks()) or 0),
            lambda total: total == KB_LIMIT,
            timeout=5,
            message="both documents' chunks counted on the knowledge base's Redis",
        )

        refused = send(client, f"late-{words[2]}.txt", text_of_chunks(words[2], 1))
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "knowledge_base_full", refused.text
        assert found(client, words[0]), "searches go on"

        assert client.delete(f"/api/documents/full-{words[0]}.txt").status_code == 204
        done = ingest(client, f"late-{words[2]}.txt", text_of_chunks(words[2], 1))
        hits = poll(
            lambda: found(client, words[2]),
            timeout=10,
            message="the document indexed once room was made",
        )
        assert {hit["task_id"] for hit in hits} == {done["id"]}, hits


def searches_served(server: RedisServer) -> int:
    """How many search scripts `server` ran for clients (writes reach a replica as effects)."""
    stats = server.client().info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval"))


@contextmanager
def commands_logged(server: RedisServer) -> Iterator[list[bytes]]:
    """Every command `server` runs in the block, each as its words (its slow log with a
    threshold of 0 µs: no MONITOR), in the list given, once the block ends."""
    client = server.client()
    threshold = client.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
    client.config_set("slowlog-max-len", 100_000)
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    logged: list[bytes] = []
    try:
        yield logged
    finally:
        client.config_set("slowlog-log-slower-than", threshold)
        logged += [entry["command"] for entry in client.slowlog_get(100_000)]


def search_scripts(commands: list[bytes]) -> list[bytes]:
    """The commands that ran a search script as the primary runs them (its own variants)."""
    shas = {script.sha.encode() for script in (_LEXICAL, _DENSE)}
    return [
        command
        for command in commands
        if any(sha in command for sha in shas) or command.upper().startswith(b"EVAL ")
    ]


def test_searches_take_turns_on_the_read_replica_and_go_on_without_it(stack, kb_pair):
    with ApiClient(stack.url, api_key=KEY) as client:
        word = unique_word()
        done = ingest(client, f"replica-{word}.txt", text_of_chunks(word, 1))
        poll(lambda: found(client, word), timeout=5, message="the document found")

        before = searches_served(kb_pair.replica)
        for _ in range(6):  # one web process (the Procfile's), turns on its one replica
            assert {hit["task_id"] for hit in found(client, word)} == {done["id"]}
        assert searches_served(kb_pair.replica) - before >= 6, "the replica answered them"

        # Stalled: the web's read times out after 2 s. That search is not run again on the
        # primary (docs/architecture.md §18): 503 with Retry-After, and the primary ran no
        # search script meanwhile.
        kb_pair.pause()
        try:
            with commands_logged(kb_pair.primary) as on_primary:
                started = time.monotonic()
                refused = client.get("/api/search", params={"q": word})
                first = time.monotonic() - started
            later = []
            with commands_logged(kb_pair.primary) as after:
                for _ in range(6):  # the replica is left alone: the primary answers at once
                    started = time.monotonic()
                    response = client.get("/api/search", params={"q": word})
                    later.append((response, time.monotonic() - started))
        finally:
            kb_pair.resume()
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "search_timeout", refused.text
        assert int(refused.headers["Retry-After"]) >= 1
        assert not search_scripts(on_primary), "the timed-out search was run on the primary"
        assert search_scripts(after), "the searches after it ran there (what the log would show)"
        assert first < 2.0 + MARGIN_S, f"the search on the stalled replica took {first:.1f} s"
        # The Procfile's web has two processes: the other one meets the stalled replica once.
        timed_out = [r for r, _ in later if r.status_code == 503]
        assert len(timed_out) <= 1, [(r.status_code, r.text[:80]) for r, _ in later]
        assert all(r.json()["error"]["code"] == "search_timeout" for r in timed_out)
        for response, seconds in later:
            if response.status_code != 503:
                assert response.status_code == 200, response.text
                assert {hit["task_id"] for hit in response.json()["results"]} == {done["id"]}
                assert seconds < MARGIN_S, (
                    f"a search after it took {seconds:.1f} s: the "
                    "replica is left alone, not waited for again"
                )
