"""The knowledge base on fakeredis: dense and sparse documents, versions, removal, the cache."""
from __future__ import annotations

import numpy as np
import pytest

from jobs import index, keys
from jobs.embedding import LocalEmbedder, SparseRows
from jobs.index import IndexedDocument, SearchIndex, queue_upsert, remove_document

EMBEDDER = LocalEmbedder()


def put(redis, document_id, texts, vectors, version=1, tenant="default"):
    """Index one document the way the pipeline does; returns the script's reply (1 or 0)."""
    pipe = redis.pipeline()
    queue_upsert(pipe, IndexedDocument(tenant, document_id, f"{document_id}.txt",
                                       f"{version:032d}", version, texts, vectors))
    return pipe.execute()[0]


def put_text(redis, document_id, texts, version=1, tenant="default"):
    return put(redis, document_id, texts, EMBEDDER.embed(texts), version, tenant)


def query(text):
    return EMBEDDER.embed([text])


def unit(*values):
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_dense_documents_are_ranked_by_cosine(redis):
    put(redis, "a", ["east", "north"], np.stack([unit(1, 0, 0, 0), unit(0, 1, 0, 0)]))
    put(redis, "b", ["north-east"], np.stack([unit(1, 1, 0, 0)]))
    hits = SearchIndex(redis).search("default", unit(1, 0.1, 0, 0), 5)
    assert [h["text"] for h in hits] == ["east", "north-east", "north"]
    assert hits[0] == {"text": "east", "score": pytest.approx(0.995037, abs=1e-6),
                       "task_id": f"{1:032d}", "document_id": "a", "filename": "a.txt",
                       "chunk": 0, "location": {}}
    assert SearchIndex(redis).search("default", unit(0, 0, 1, 0), 5) == [], "no positive score"
    assert redis.hget(keys.kb_document("default", "a"), "format") == b"dense"


def test_sparse_documents_find_their_words(redis):
    put_text(redis, "notes", ["The zebrafox jumps over the fence.", "Nothing to see here."])
    put_text(redis, "docs", ["A quorblax lives in the docx.", "the the the"])
    search = SearchIndex(redis)
    hits = search.search("default", query("zebrafox"), 10)
    assert [(h["document_id"], h["chunk"]) for h in hits] == [("notes", 0)]
    assert [h["text"] for h in search.search("default", query("quorblax"), 1)] == [
        "A quorblax lives in the docx."]
    assert search.search("default", query("unheardofword"), 10) == []
    assert search.search("default", query(""), 10) == [], "a query without words finds nothing"
    ranked = search.search("default", query("the"), 10)
    assert ranked[0]["text"] == "the the the", "only 'the' in it: the highest weight"
    assert len(ranked) == 3 and all(h["score"] > 0 for h in ranked)
    stored = redis.hgetall(keys.kb_document("default", "notes"))
    assert stored[b"format"] == b"sparse" and int(stored[b"dim"]) == 2 ** 32
    assert b"vectors" not in stored


def test_ties_go_to_the_earlier_chunk_and_k_limits(redis):
    put_text(redis, "a", ["same words", "other", "same words", "same words"])
    hits = SearchIndex(redis).search("default", query("same words"), 2)
    assert [h["chunk"] for h in hits] == [0, 2]


def test_an_older_version_never_replaces_a_newer_one(redis):
    assert put_text(redis, "doc", ["newer zebrafox"], version=5) == 1
    assert put_text(redis, "doc", ["older quorblax"], version=4) == 0
    search = SearchIndex(redis)
    assert [h["text"] for h in search.search("default", query("zebrafox"), 5)] == ["newer zebrafox"]
    assert search.search("default", query("quorblax"), 5) == []
    assert put_text(redis, "doc", ["newest quorblax"], version=6) == 1
    assert search.search("default", query("zebrafox"), 5) == []
    assert [h["text"] for h in search.search("default", query("quorblax"), 5)] == [
        "newest quorblax"]


def test_a_new_version_replaces_every_field(redis):
    put_text(redis, "doc", ["sparse first"], version=1)
    put(redis, "doc", ["dense now"], np.stack([unit(1, 0)]), version=2)
    stored = redis.hgetall(keys.kb_document("default", "doc"))
    assert stored[b"format"] == b"dense"
    assert not {b"indptr", b"indices", b"values"} & set(stored), "DEL before HSET"


def test_removal(redis):
    put_text(redis, "doc", ["zebrafox"])
    search = SearchIndex(redis)
    assert search.search("default", query("zebrafox"), 5)
    assert remove_document(redis, "default", "doc") is True
    assert search.search("default", query("zebrafox"), 5) == []
    assert remove_document(redis, "default", "doc") is False


def test_the_cache_is_reused_until_the_generation_changes(redis, monkeypatch):
    loads = []
    real_load = index._load
    monkeypatch.setattr(index, "_load", lambda *args: loads.append(args[1:]) or real_load(*args))
    put_text(redis, "a", ["alpha zebrafox"])
    search = SearchIndex(redis)
    for _ in range(3):
        assert search.search("default", query("zebrafox"), 5)
    assert len(loads) == 1, "unchanged data is never reloaded"
    assert search.search("default", query("quorblax"), 5) == []
    put_text(redis, "b", ["beta quorblax"])
    assert [h["document_id"] for h in search.search("default", query("quorblax"), 5)] == ["b"]
    assert len(loads) == 2
    assert search.search("other-tenant", query("quorblax"), 5) == [], "tenants are separate"


def test_documents_of_another_kind_are_skipped(redis):
    put(redis, "four", ["four dims"], np.stack([unit(1, 1, 0, 0)]))
    put(redis, "eight", ["eight dims"], np.stack([unit(1, 1, 0, 0, 0, 0, 0, 0)]))
    put_text(redis, "words", ["dims as words"])
    search = SearchIndex(redis)
    assert [h["document_id"] for h in search.search("default", unit(1, 0, 0, 0), 5)] == ["four"]
    assert [h["document_id"] for h in search.search("default", unit(1, 0, 0, 0, 0, 0, 0, 0),
                                                    5)] == ["eight"]
    assert [h["document_id"] for h in search.search("default", query("dims"), 5)] == ["words"]
    other_space = LocalEmbedder(dimension=2 ** 16).embed(["dims"])
    assert search.search("default", other_space, 5) == []


def test_documents_indexed_before_the_format_field_read_as_dense(redis):
    key = keys.kb_document("default", "old")
    redis.hset(key, mapping={"version": 1, "task_id": "t", "document_id": "old",
                             "filename": "old.txt", "texts": '["legacy"]',
                             "vectors": unit(0, 1).tobytes(), "dim": 2})
    redis.sadd(keys.kb_documents("default"), key)
    hits = SearchIndex(redis).search("default", unit(0, 1), 5)
    assert [h["text"] for h in hits] == ["legacy"]


def test_upsert_refuses_a_vector_count_that_does_not_match_the_chunks(redis):
    with pytest.raises(ValueError):
        put(redis, "doc", ["one", "two"], EMBEDDER.embed(["one"]))
    with pytest.raises(ValueError):
        put(redis, "doc", ["one"], np.zeros((2, 4), np.float32))


def test_a_sparse_query_must_be_one_row(redis):
    put_text(redis, "doc", ["a b"])
    with pytest.raises(ValueError):
        SearchIndex(redis).search("default", EMBEDDER.embed(["a", "b"]), 5)
    with pytest.raises(ValueError):
        SearchIndex(redis).search("default", SparseRows.empty(2 ** 32), 5)


def test_search_hits_and_the_chunk_pages_carry_each_chunk_s_location(redis):
    texts = ["the cover", "refund terms apply", "delivery schedule"]
    places = [{"page": 1}, {"page": 2, "heading": "Terms"}, {}]
    pipe = redis.pipeline()
    queue_upsert(pipe, IndexedDocument("default", "contract", "contract.pdf", "t1", 1, texts,
                                       EMBEDDER.embed(texts), places))
    pipe.execute()
    hit, = SearchIndex(redis).search("default", query("refund"), 5)
    assert (hit["chunk"], hit["location"]) == (1, {"page": 2, "heading": "Terms"})

    total, page = index.document_chunks(redis, "default", "contract", "t1", 1, 5)
    assert total == 3
    assert page == [{"chunk": 1, "text": "refund terms apply", "location": places[1]},
                    {"chunk": 2, "text": "delivery schedule", "location": {}}]
    assert index.document_chunks(redis, "default", "contract", "t1", 3, 5) == (3, [])
    assert index.document_chunks(redis, "default", "contract", "an older task", 0, 5) is None
    assert index.document_chunks(redis, "other", "contract", "t1", 0, 5) is None


def test_a_location_count_that_does_not_match_the_chunks_is_refused(redis):
    with pytest.raises(ValueError):
        index.prepare_upsert(IndexedDocument("default", "d", "d.txt", "t", 1, ["a", "b"],
                                             EMBEDDER.embed(["a", "b"]), [{"page": 1}]))
