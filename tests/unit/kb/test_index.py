"""The knowledge base on fakeredis: staged writes and flips, versions, removal, garbage, the
search script's exactness and its budget. (tests/integration runs the same on a real Redis.)"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from jobs.core import keys
from jobs.kb import index, postings
from jobs.kb.index import IndexedDocument
from jobs.kb.retrieval import Retriever
from jobs.kb.search import Searcher
from jobs.text.terms import TERMS
from jobs.upgrades import kb_layout as kb_migration
from tests.unit.sparse_reference import InvertedIndex, top_k


class MemoryVectors:
    """A vector engine in a dict, for unit tests of the index's bookkeeping only (the real one,
    PostgreSQL with pgvector, is tested in tests/integration/kb/test_vector_store.py)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int], np.ndarray] = {}

    def write(self, tenant, first, vectors):
        for i, vector in enumerate(vectors):
            self.rows[tenant, first + i] = vector

    def delete(self, tenant, first, stop):
        for cid in range(first, stop):
            self.rows.pop((tenant, cid), None)

    def nearest(self, tenant, query, limit):
        scored = [(cid, float(v @ query)) for (t, cid), v in self.rows.items() if t == tenant]
        return sorted(scored, key=lambda pair: -pair[1])[:limit]

    def close(self):
        pass


def put(
    redis, document_id, texts, version=1, tenant="default", vectors=None, places=None, store=None
):
    """Index one document as a finished task does; True when it became the indexed version."""
    return index.write(
        redis,
        IndexedDocument(
            tenant,
            document_id,
            f"{document_id}.txt",
            f"{version:032d}",
            version,
            texts,
            vectors,
            places or [],
        ),
        store,
    )


def search(redis, text, k=10, tenant="default", budget=None):
    retriever = Retriever(redis) if budget is None else Retriever(redis, budget)
    return retriever.lexical(tenant, TERMS.count_query(text), k)


def texts_of(redis, text, k=10, tenant="default"):
    return [h["text"] for h in search(redis, text, k, tenant).hits]


def test_documents_are_found_by_their_words(redis):
    put(redis, "notes", ["The zebrafox jumps over the fence.", "Nothing to see here."])
    put(redis, "docs", ["A quorblax lives in the docx.", "the the the"])
    found = search(redis, "zebrafox")
    assert found.exact
    assert [(h["document_id"], h["chunk"], h["filename"], h["task_id"]) for h in found.hits] == [
        ("notes", 0, "notes.txt", f"{1:032d}")
    ]
    assert texts_of(redis, "quorblax", 1) == ["A quorblax lives in the docx."]
    assert texts_of(redis, "unheardofword") == []
    assert texts_of(redis, "") == [], "a query without words finds nothing"
    assert texts_of(redis, "the") == [], "a stop word alone finds nothing"
    put(redis, "more", ["a zebrafox, zebrafoxes and zebrafox", "zebrafox fences"])
    ranked = search(redis, "zebrafoxes jumped").hits
    assert ranked[0]["text"] == "The zebrafox jumps over the fence.", "both words, stemmed"
    assert ranked[1]["text"] == "a zebrafox, zebrafoxes and zebrafox", "three times"
    assert len(ranked) == 3 and all(h["score"] > 0 for h in ranked)
    stored = redis.hgetall(keys.kb_document("default", "notes"))
    assert stored[b"format"] == b"sparse" and int(stored[b"dim"]) == 2**32
    assert b"texts" not in stored, "a document hash holds no chunk data any more"


def test_scores_are_bm25l_as_bm25s_computes_it(redis):
    import bm25s
    import Stemmer

    texts = [
        "Alpha beta gamma, the inspection of valves.",
        "alpha alpha delta valve",
        "Inspected: a valve, a pump and a pipe with a long description of its parts",
        "nothing in common",
        "gamma rays and delta waves inspected twice, inspected",
    ]
    put(redis, "d", texts)
    query = "inspection of alpha valves"
    stemmer = Stemmer.Stemmer("english")
    model = bm25s.BM25(k1=1.5, b=0.75, delta=0.5, method="bm25l")
    model.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    expected = model.get_scores(
        bm25s.tokenize(
            query, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )[0]
    )
    # bm25s gives every chunk what the query's words weigh when absent (f(0)); Intake leaves
    # that constant out, so a chunk without any of the words scores 0 (chunk 3 here).
    absent = float(expected[3])
    got = {h["chunk"]: h["score"] for h in search(redis, query).hits}
    assert got == {
        n: pytest.approx(float(score) - absent, rel=1e-4)
        for n, score in enumerate(expected)
        if n != 3
    }
    assert set(got) == {0, 1, 2, 4}


def test_weights_follow_the_collection_as_documents_come_and_go(redis):
    put(redis, "a", ["rare common words", "common words"])
    alone = search(redis, "common").hits[0]["score"]
    put(redis, "b", [f"common chunk {n}" for n in range(20)])
    crowded = search(redis, "common").hits[0]["score"]
    assert crowded < alone, "a word in every chunk weighs less"
    index.remove_document(redis, "default", "b")
    assert search(redis, "common").hits[0]["score"] == pytest.approx(alone, rel=1e-6)
    stats = redis.hgetall(keys.kb_lexical_stats("default"))
    assert int(stats[b"chunks"]) == 2 and int(stats[b"length"]) == 5


def test_ties_go_to_the_earlier_chunk_and_k_limits(redis):
    put(redis, "a", ["same words", "other", "same words", "same words"])
    assert [h["chunk"] for h in search(redis, "same words", 2).hits] == [0, 2]


def test_the_search_is_exact_on_a_corpus_where_it_stops_early(redis):
    rng = random.Random(7)
    vocabulary = [f"w{n}" for n in range(300)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    texts = [" ".join(rng.choices(vocabulary, weights=weights, k=40)) for _ in range(1500)]
    for n in range(0, len(texts), 100):
        put(redis, f"doc{n}", texts[n : n + 100])
    reference = InvertedIndex(TERMS.count(texts))
    for words in ("w3 w120", "w0", "w250 w1 w17", "w42"):
        found = search(redis, words, k=10)
        expected = reference.scores(TERMS.count([words]))
        best = [float(expected[i]) for i in top_k(expected, 10)]
        assert found.exact, words
        assert [h["score"] for h in found.hits] == pytest.approx(best, abs=2e-4), words
        assert found.scored < len(texts), f"{words}: it read every chunk"


def test_a_search_past_its_budget_answers_from_the_highest_impacts(redis, monkeypatch):
    from jobs.kb import retrieval

    monkeypatch.setattr(retrieval, "WORK_PER_HIT", 1)
    texts = [
        ("common " * (1 + n % 5)) + " ".join(f"filler{n}x{j}" for j in range(n % 7))
        for n in range(600)
    ]
    put(redis, "many", texts)
    whole = search(redis, "common", k=20)
    found = search(redis, "common", k=20, budget=64)
    assert whole.exact and len(whole.hits) == 20
    assert not found.exact
    assert found.work <= 64 + 8, "past its budget by a row or so at most"
    assert found.scored < whole.scored
    assert found.hits, "the best found so far"
    assert all(h["text"].count("common") == 5 for h in found.hits), "the highest impacts first"


def test_a_staged_document_is_invisible_until_its_flip(redis):
    doc = IndexedDocument("default", "d", "d.txt", "t1", 1, ["zebrafox"], None)
    staged = index.stage(redis, doc)
    assert texts_of(redis, "zebrafox") == []
    pipe = redis.pipeline()
    index.queue_flip(pipe, staged)
    assert pipe.execute() == [1]
    assert texts_of(redis, "zebrafox") == ["zebrafox"]
    pipe = redis.pipeline()
    index.queue_flip(pipe, staged)
    assert pipe.execute() == [1], "the same flip sent again changes nothing"
    index.discard(redis, staged)
    index.collect_garbage(redis, "default")
    assert texts_of(redis, "zebrafox") == ["zebrafox"], "discarding a flipped version is a no-op"
    assert int(redis.get(keys.tenant_chunks("default"))) == 1


def test_an_older_version_never_replaces_a_newer_one(redis):
    assert put(redis, "doc", ["newer zebrafox"], version=5)
    assert not put(redis, "doc", ["older quorblax"], version=4)
    assert texts_of(redis, "zebrafox") == ["newer zebrafox"]
    assert texts_of(redis, "quorblax") == []
    assert put(redis, "doc", ["newest quorblax"], version=6)
    assert texts_of(redis, "zebrafox") == []
    assert texts_of(redis, "quorblax") == ["newest quorblax"]
    assert redis.hlen(keys.kb_texts("default")) == 1, "the refused and the replaced are deleted"
    assert redis.llen(keys.kb_garbage("default")) == 0


def test_replacing_a_document_again_and_again_keeps_its_postings_compact(redis):
    texts = [f"stable words here number{n}" for n in range(40)]
    for version in range(1, 30):
        put(redis, "doc", texts, version=version)
    sizes = [redis.strlen(k) // 4 for k in redis.scan_iter(match=keys.kb_prefix("default") + "i:*")]
    # 29 versions wrote 29 × 40 ids under "stable"; compaction keeps under 4/3 of the live ones.
    assert max(sizes) <= 40 * 4 // 3 + 1, f"dead ids pile up: {max(sizes)} postings"
    assert redis.hlen(keys.kb_rows("default")) == 40
    assert len(search(redis, "stable", k=50).hits) == 40


def test_removal_takes_a_document_out_of_search_and_deletes_its_entries(redis):
    put(redis, "doc", ["zebrafox"])
    put(redis, "other", ["quorblax"])
    assert texts_of(redis, "zebrafox")
    assert index.remove_document(redis, "default", "doc") is True
    assert texts_of(redis, "zebrafox") == []
    assert index.remove_document(redis, "default", "doc") is False
    assert redis.hlen(keys.kb_rows("default")) == 1 and redis.hlen(keys.kb_texts("default")) == 1
    assert int(redis.get(keys.tenant_chunks("default"))) == 1
    assert texts_of(redis, "quorblax") == ["quorblax"]


def test_tenants_never_see_each_other(redis):
    put(redis, "doc", ["zebrafox"], tenant="acme")
    assert texts_of(redis, "zebrafox", tenant="acme") == ["zebrafox"]
    assert texts_of(redis, "zebrafox", tenant="globex") == []


def test_a_run_staged_by_a_worker_that_died_is_collected(redis, monkeypatch):
    doc = IndexedDocument("default", "d", "d.txt", "t1", 1, ["zebrafox"], None)
    index.stage(redis, doc)
    assert redis.hlen(keys.kb_rows("default")) == 1
    index.collect_garbage(redis, "default")
    assert redis.hlen(keys.kb_rows("default")) == 1, "a run being staged is left alone"
    monkeypatch.setattr(index, "STAGED_TTL_SECONDS", -1)
    index.collect_garbage(redis, "default")
    assert redis.hlen(keys.kb_rows("default")) == 0
    assert texts_of(redis, "zebrafox") == []


def test_dense_documents_go_to_the_vector_engine_and_keep_their_words(redis):
    store = MemoryVectors()
    east, north = np.eye(4, dtype=np.float32)[:2]
    put(redis, "a", ["east wind", "north wind"], vectors=np.stack([east, north]), store=store)
    assert len(store.rows) == 2
    stored = redis.hgetall(keys.kb_document("default", "a"))
    assert (stored[b"format"], stored[b"dim"], stored[b"vector_store"]) == (
        b"dense",
        b"4",
        b"store",
    )
    retriever = Retriever(redis)
    hits = retriever.hydrate("default", store.nearest("default", east, 5), 5)
    assert [h["text"] for h in hits] == ["east wind", "north wind"]
    assert texts_of(redis, "north") == ["north wind"], "the words are searchable too"
    put(redis, "a", ["only west"], vectors=np.stack([east]), version=2, store=store)
    assert len(store.rows) == 1, "the old version's vectors are deleted"
    assert [h["text"] for h in retriever.hydrate("default", [(0, 0.9), (8, 0.5)], 5)] == [
        "only west"
    ], "a dead chunk the engine still answers is skipped"
    index.remove_document(redis, "default", "a", store)
    assert store.rows == {}


class _Down:
    model, dimension, batch_size = "m", 4, 8

    def embed(self, texts):
        from jobs.core.failures import TransientError

        raise TransientError("timed out after 2 s")


def test_search_by_meaning_falls_back_to_words_and_says_so(redis):
    store = MemoryVectors()
    put(redis, "a", ["east wind"], vectors=np.eye(4, dtype=np.float32)[:1], store=store)
    searcher = Searcher(redis, _Down(), breaker_seconds=30, vectors=store)
    answer = searcher.search("default", "east", 5)
    assert answer.mode == "lexical" and "timed out" in answer.notice
    assert [h["text"] for h in answer.results] == ["east wind"]
    assert 0 < redis.ttl(keys.search_breaker()) <= 30
    assert "match your words only" in searcher.search("default", "east", 5).notice


def test_search_hits_and_the_chunk_pages_carry_each_chunk_s_location(redis):
    texts = ["the cover", "refund terms apply", "delivery schedule"]
    places = [{"page": 1}, {"page": 2, "heading": "Terms"}, {}]
    index.write(
        redis, IndexedDocument("default", "contract", "contract.pdf", "t1", 1, texts, None, places)
    )
    (hit,) = search(redis, "refund").hits
    assert (hit["chunk"], hit["location"]) == (1, {"page": 2, "heading": "Terms"})
    total, page = index.document_chunks(redis, "default", "contract", "t1", 1, 5)
    assert total == 3
    assert page == [
        {"chunk": 1, "text": "refund terms apply", "location": places[1]},
        {"chunk": 2, "text": "delivery schedule", "location": {}},
    ]
    assert index.document_chunks(redis, "default", "contract", "t1", 3, 5) == (3, [])
    assert index.document_chunks(redis, "default", "contract", "an older task", 0, 5) is None
    assert index.document_chunks(redis, "other", "contract", "t1", 0, 5) is None


def test_documents_of_the_old_layout_are_migrated_and_stay_searchable(redis):
    texts = ["legacy zebrafox", "second chunk"]
    rows = TERMS.count(texts)
    indptr, indices, values = rows.to_bytes()
    key = keys.kb_document("default", "old")
    redis.hset(
        key,
        mapping={
            "version": 3,
            "task_id": "t",
            "document_id": "old",
            "filename": "old.txt",
            "texts": json.dumps(texts),
            "locations": json.dumps([{"page": 1}, {"page": 2}]),
            "format": "sparse",
            "dim": 2**32,
            "indptr": indptr,
            "indices": indices,
            "values": values,
        },
    )
    redis.sadd(keys.kb_documents("default"), key)
    dense_key = keys.kb_document("default", "older")
    redis.hset(
        dense_key,
        mapping={
            "version": 1,
            "task_id": "u",
            "document_id": "older",
            "filename": "older.txt",
            "texts": '["dense quorblax"]',
            "vectors": np.eye(2, dtype=np.float32)[0].tobytes(),
            "dim": 2,
        },
    )
    redis.sadd(keys.kb_documents("default"), dense_key)
    redis.set(keys.tenant_chunks("default"), 3)
    store = MemoryVectors()
    assert kb_migration.migrate(redis, store) == 2
    assert kb_migration.migrate(redis, store) == 0, "once"
    (hit,) = search(redis, "zebrafox").hits
    assert (hit["document_id"], hit["task_id"], hit["location"]) == ("old", "t", {"page": 1})
    assert texts_of(redis, "quorblax") == ["dense quorblax"]
    assert len(store.rows) == 1
    assert int(redis.get(keys.tenant_chunks("default"))) == 3, "the count is unchanged"
    assert b"texts" in redis.hgetall(key), "the previous release's web still reads the old fields"
    kb_migration.drop_legacy_fields(redis)
    assert b"texts" not in redis.hgetall(key) and b"indptr" not in redis.hgetall(key)
    assert texts_of(redis, "zebrafox") == ["legacy zebrafox"]


def test_the_old_fields_go_once_their_grace_is_over(redis, monkeypatch):
    texts = ["legacy words"]
    indptr, indices, values = TERMS.count(texts).to_bytes()
    key = keys.kb_document("default", "old")
    redis.hset(
        key,
        mapping={
            "version": 1,
            "task_id": "t",
            "document_id": "old",
            "filename": "old.txt",
            "texts": json.dumps(texts),
            "format": "sparse",
            "dim": 2**32,
            "indptr": indptr,
            "indices": indices,
            "values": values,
        },
    )
    redis.sadd(keys.kb_documents("default"), key)
    assert kb_migration.migrate(redis) == 1
    kb_migration.migrate(redis)
    assert redis.hexists(key, "texts"), "within the grace"
    monkeypatch.setattr(kb_migration, "LEGACY_GRACE_SECONDS", -1)
    kb_migration.migrate(redis)
    assert not redis.hexists(key, "texts") and redis.get(keys.kb_layout_migrated()) == b"clean"
    assert texts_of(redis, "legacy") == ["legacy words"]


def test_mismatched_vectors_or_locations_are_refused(redis):
    with pytest.raises(ValueError):
        put(redis, "doc", ["one", "two"], vectors=np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError):
        put(redis, "doc", ["one"], vectors=np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError):
        put(redis, "doc", ["a", "b"], places=[{"page": 1}])
    with pytest.raises(ValueError):
        Retriever(redis).lexical("default", TERMS.count(["a", "b"]), 5)


def test_a_query_of_many_words_reads_only_its_most_repeated_terms():
    row = TERMS.count_query(" ".join(f"word{n}" for n in range(100)) + " word1 word1")
    terms = postings.query_terms(row, limit=32)
    assert len(terms) == 32
    assert terms[0][1] == 3 == max(count for _, count in terms), "the most repeated first"


def test_a_staging_that_fails_midway_leaves_nothing_behind(redis):
    from jobs.core.failures import TransientError

    class Down(MemoryVectors):
        def write(self, tenant, first, vectors):
            raise TransientError("the vector database is unreachable")

    with pytest.raises(TransientError):
        put(redis, "a", ["east wind"], vectors=np.eye(4, dtype=np.float32)[:1], store=Down())
    index.collect_garbage(redis, "default")
    assert redis.hlen(keys.kb_rows("default")) == 0 and redis.zcard(keys.kb_staged("default")) == 0
    assert texts_of(redis, "east") == []


def _counts(redis, *tenants):
    return [int(redis.get(keys.tenant_chunks(t)) or 0) for t in tenants], int(
        redis.get(keys.kb_total_chunks())
    )


def test_the_total_of_all_tenants_moves_with_every_flip_and_removal(redis):
    index.ensure_chunk_counts(redis)  # a fresh deployment: counted at 0 by the housekeeping
    assert int(redis.get(keys.kb_total_chunks())) == 0
    put(redis, "a", ["one zebrafox", "two zebrafox"], tenant="acme")
    put(redis, "b", ["one quorblax", "two quorblax", "three quorblax"], tenant="globex")
    assert _counts(redis, "acme", "globex") == ([2, 3], 5)
    put(redis, "a", ["only zebrafox"], version=2, tenant="acme")  # replaced: the difference
    assert _counts(redis, "acme", "globex") == ([1, 3], 4)
    assert not put(redis, "a", ["older"] * 9, version=1, tenant="acme"), "an older version"
    assert index.remove_document(redis, "globex", "b")
    assert not index.remove_document(redis, "globex", "b"), "removed once"
    assert _counts(redis, "acme", "globex") == ([1, 0], 1)


def test_a_knowledge_base_indexed_before_the_total_was_kept_is_counted_once(redis):
    put(redis, "a", ["one zebrafox", "two zebrafox"], tenant="acme")
    put(redis, "b", ["one quorblax", "two quorblax", "three quorblax"], tenant="globex")
    assert not redis.exists(keys.kb_total_chunks()), "flips move the total once it is counted"
    redis.delete(keys.tenant_chunks("globex"))  # indexed by a release before tenants' counts
    index.ensure_chunk_counts(redis)
    assert _counts(redis, "acme", "globex") == ([2, 3], 5)
    index.ensure_chunk_counts(redis)
    assert _counts(redis, "acme", "globex") == ([2, 3], 5), "counted once"
    put(redis, "c", ["another"], tenant="initech")
    assert _counts(redis, "acme", "globex", "initech") == ([2, 3, 1], 6)


def test_a_tenant_counted_late_adds_what_it_holds_to_the_total(redis):
    index.ensure_chunk_counts(redis)
    put(redis, "a", ["one zebrafox", "two zebrafox"], tenant="acme")
    redis.delete(keys.tenant_chunks("acme"))  # indexed by a release before its count
    redis.set(keys.kb_total_chunks(), 0)
    index.ensure_chunk_counts(redis)
    assert _counts(redis, "acme") == ([2], 2)


def test_the_chunk_limit_of_all_tenants_refuses_readably_at_indexing(redis):
    index.ensure_chunk_counts(redis)
    put(redis, "a", ["one", "two", "three"], tenant="acme")
    put(redis, "b", ["one"], tenant="globex")
    assert index.check_chunk_limit(redis, "globex", "c", 1, limit=100, total_limit=5) == 0
    with pytest.raises(index.PermanentError) as refused:
        index.check_chunk_limit(redis, "globex", "c", 2, limit=100, total_limit=5)
    error = refused.value
    assert (error.code, error.step, error.retryable) == ("knowledge_base_full", "indexing", True)
    assert "service's knowledge base is full" in error.message and "4 of its 5" in error.message
    assert index.check_chunk_limit(redis, "globex", "b", 2, limit=100, total_limit=5) == 1, (
        "a document's own indexed version is replaced: only the difference counts"
    )
    assert set(index.quota_keys("globex", "c")) >= {keys.kb_total_chunks()}, (
        "the total is watched until the write"
    )


def test_a_one_character_cjk_query_finds_the_character_inside_words(redis):
    put(redis, "zh", ["消息失败三次以后会被转入死信队列。", "今天天气很好，我们去公园散步吧。"])
    assert texts_of(redis, "死") == ["消息失败三次以后会被转入死信队列。"]
    assert texts_of(redis, "死信队列") == ["消息失败三次以后会被转入死信队列。"]
    assert texts_of(redis, "公园") == ["今天天气很好，我们去公园散步吧。"]


def _as_indexed_with_cosine_weights(redis, tenant="default"):
    """Make the knowledge base look as the release before BM25 left it: no BM25 entries, the
    documents unmarked, and the cosine index's keys in place."""
    prefix = keys.kb_prefix(tenant)
    for pattern in ("i:*", "m:*"):
        for key in redis.scan_iter(match=prefix + pattern):
            redis.delete(key)
    redis.delete(keys.kb_rows(tenant), keys.kb_term_chunks(tenant), keys.kb_lexical_stats(tenant))
    for member in redis.smembers(keys.kb_documents(tenant)):
        redis.hdel(member, "lexical")
    redis.hset(prefix + "rows", "0", b"\0" * 6)
    redis.set(prefix + "p:0000abcd:200", b"\0" * 4)
    redis.set(prefix + "l:0000abcd", b"\1")


def test_documents_indexed_with_cosine_weights_are_indexed_again_for_bm25(redis):
    put(redis, "a", ["The zebrafox inspection report", "valves and pumps"])
    put(redis, "b", ["quorblax inspected"])
    before = {h["chunk"]: h["score"] for h in search(redis, "inspection").hits}
    _as_indexed_with_cosine_weights(redis)
    assert texts_of(redis, "inspection") == [], "nothing to find by words until it is done"
    assert kb_migration.to_bm25(redis) == 2
    assert {h["chunk"]: h["score"] for h in search(redis, "inspection").hits} == before
    assert not list(redis.scan_iter(match=keys.kb_prefix("default") + "p:*"))
    assert not redis.exists(keys.kb_prefix("default") + "rows")
    assert int(redis.hget(keys.kb_lexical_stats("default"), "chunks")) == 3
    assert kb_migration.to_bm25(redis) == 0, "once done, done"
    put(redis, "a", ["replaced"], version=2)
    assert int(redis.hget(keys.kb_lexical_stats("default"), "chunks")) == 2
    assert texts_of(redis, "inspection") == ["quorblax inspected"]


def test_one_collector_at_a_time_takes_a_run_out_of_the_statistics(redis):
    put(redis, "a", ["alpha beta", "gamma"])
    put(redis, "b", ["alpha"])
    redis.set(keys.kb_collector("default"), "someone-else")
    index.remove_document(redis, "default", "a")
    assert redis.llen(keys.kb_garbage("default")) == 1, "left to the collector at work"
    assert int(redis.hget(keys.kb_lexical_stats("default"), "chunks")) == 3
    redis.delete(keys.kb_collector("default"))
    assert index.collect_garbage(redis, "default") == 1
    assert index.collect_garbage(redis, "default") == 0
    stats = redis.hgetall(keys.kb_lexical_stats("default"))
    assert (int(stats[b"chunks"]), int(stats[b"length"])) == (1, 1)
    assert redis.hgetall(keys.kb_term_chunks("default")) == {
        postings.bucket_name(TERMS.count(["alpha"]).indices[0]).encode(): b"1"
    }


def test_a_search_goes_on_across_script_calls_to_the_same_exact_answer(redis, monkeypatch):
    from jobs.kb import retrieval

    rng = random.Random(11)
    vocabulary = [f"w{n}" for n in range(200)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    texts = [" ".join(rng.choices(vocabulary, weights=weights, k=30)) for _ in range(800)]
    put(redis, "corpus", texts)
    whole = {q: search(redis, q, k=20) for q in ("w0 w1 w2", "w5 w40", "w1")}
    calls = []
    monkeypatch.setattr(retrieval, "WORK_PER_CALL", 16)
    original = Retriever.__init__

    def counting(self, connection, budget=retrieval.SEARCH_WORK):
        original(self, connection, budget)
        script = self._lexical
        self._lexical = lambda client, **given: (
            calls.append(given["args"]["last_call"]) or script(client, **given)
        )

    monkeypatch.setattr(Retriever, "__init__", counting)
    for query, expected in whole.items():
        found = search(redis, query, k=20)
        assert found.exact and expected.exact
        assert [(h["chunk"], h["score"]) for h in found.hits] == [
            (h["chunk"], pytest.approx(h["score"], rel=1e-12)) for h in expected.hits
        ], query
    assert len(calls) > len(whole) and any(calls), "it went on from where a call stopped"
