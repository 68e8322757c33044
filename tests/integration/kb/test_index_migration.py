"""Upgrading an index written before chunk ids (docs/architecture.md §11), on a real redis-server
with the real web: `python -m jobs.upgrades.kb_layout` gives every old-layout document the new
layout, from its stored texts and vectors, and leaves the old fields for the previous release's web
processes, so a search finds the document before, during and after the switch."""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.parse import quote

import pytest
import redis

from jobs.core import keys
from jobs.text.terms import TERMS
from tests.integration.helpers import poll
from tests.integration.intake_api import get_json, unique_word
from tests.integration.processes import REPO_ROOT, base_env

pytestmark = pytest.mark.integration


def test_the_migration_command_makes_old_documents_searchable_and_keeps_their_old_fields(
    api, redis_server
):
    word = unique_word()
    texts = [f"An old {word} contract.", "Its second chunk."]
    indptr, indices, values = TERMS.count(texts).to_bytes()
    connection = redis.Redis.from_url(redis_server.url)
    key = keys.kb_document("default", f"{word}-old.txt")
    # The workers' housekeeping migrates too, at their start and every minute: held off (its
    # lock taken) so that the command is what migrates the document here.
    assert poll(
        lambda: connection.set(keys.housekeeping_lock(), "test", nx=True, ex=120),
        bool,
        timeout=90,
        interval=0.2,
        message="the housekeeping lock free",
    )
    connection.delete(keys.kb_layout_migrated())
    connection.hset(
        key,
        mapping={
            "version": 1,
            "task_id": "a" * 32,
            "document_id": f"{word}-old.txt",
            "filename": f"{word}-old.txt",
            "texts": json.dumps(texts),
            "locations": json.dumps([{"page": 3}, {}]),
            "format": "sparse",
            "dim": 2**32,
            "indptr": indptr,
            "indices": indices,
            "values": values,
        },
    )
    connection.sadd(keys.kb_documents("default"), key)
    search = f"/api/search?q={quote(word)}"
    assert get_json(api, search)["results"] == [], "not in the new layout yet"

    done = subprocess.run(
        [sys.executable, "-m", "jobs.upgrades.kb_layout"],
        cwd=REPO_ROOT,
        env=base_env({"REDIS_URL": redis_server.url}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "1 document migrated" in done.stdout

    (hit,) = get_json(api, search)["results"]
    assert (hit["document_id"], hit["chunk"], hit["location"]) == (
        f"{word}-old.txt",
        0,
        {"page": 3},
    )
    assert connection.hexists(key, "texts"), "the previous release's web still reads it"
    connection.delete(keys.housekeeping_lock())
    connection.close()


def test_the_migration_command_indexes_cosine_weighted_documents_again_for_bm25(redis_server):
    from jobs.kb import index
    from jobs.kb.retrieval import Retriever

    tenant, word = f"t{unique_word()}", unique_word()
    connection = redis.Redis.from_url(redis_server.url)
    for name, texts in (
        ("a", [f"The {word} inspection report", "valves and pumps"]),
        ("b", [f"{word} inspected twice, inspected"]),
    ):
        index.write(
            connection,
            index.IndexedDocument(tenant, name, f"{name}.txt", name * 32, 1, texts, None),
        )
    retriever = Retriever(connection)
    before = [
        (h["document_id"], h["score"])
        for h in retriever.lexical(tenant, TERMS.count_query(f"{word} inspections"), 10).hits
    ]
    assert [d for d, _ in before] == ["b", "a"]
    # As the release before BM25 left it: no BM25 entries, documents unmarked, cosine keys.
    prefix = keys.kb_prefix(tenant)
    for pattern in ("i:*", "m:*"):
        for key in connection.scan_iter(match=prefix + pattern):
            connection.delete(key)
    connection.delete(
        keys.kb_rows(tenant),
        keys.kb_term_chunks(tenant),
        keys.kb_lexical_stats(tenant),
        keys.kb_lexical_migrated(),
    )
    for member in connection.smembers(keys.kb_documents(tenant)):
        connection.hdel(member, "lexical")
    connection.set(prefix + "p:0000abcd:200", b"\0" * 4)
    assert retriever.lexical(tenant, TERMS.count_query(word), 10).hits == []

    done = subprocess.run(
        [sys.executable, "-m", "jobs.upgrades.kb_layout"],
        cwd=REPO_ROOT,
        env=base_env({"REDIS_URL": redis_server.url}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    after = [
        (h["document_id"], h["score"])
        for h in retriever.lexical(tenant, TERMS.count_query(f"{word} inspections"), 10).hits
    ]
    assert after == before
    assert not connection.exists(prefix + "p:0000abcd:200")
    assert connection.exists(keys.kb_lexical_migrated())
    connection.close()
