"""Search modes on fakeredis (docs/architecture.md §12): reciprocal rank fusion of the lexical and
the dense rankings, the `mode` a search asks for and the one that answered, each hit's `scores`,
and the answer by words, with a notice, where meaning was asked for and cannot be served.

The lexical ranking is taken as it comes (its scoring is jobs.kb.retrieval's business): what is
checked here is what the fusion makes of its ranks. The dense side is a dict-backed vector
engine and a query embedder answering fixed vectors, so every dense rank is known."""

from __future__ import annotations

import numpy as np
import pytest

from jobs.core import keys
from jobs.core.failures import TransientError
from jobs.embedding.embedders import LocalEmbedder
from jobs.kb.search import MAX_SEARCH_K, RRF_K, SEARCH_MODES, Searcher, candidates, fuse, scored_by
from tests.unit.kb.test_index import MemoryVectors, put

AXES = np.eye(4, dtype=np.float32)


def hit(task_id: str, chunk: int, score: float) -> dict:
    return {
        "document_id": f"{task_id}.txt",
        "task_id": task_id,
        "chunk": chunk,
        "score": score,
        "text": f"{task_id}/{chunk}",
    }


def rrf(*ranks: int) -> float:
    return sum(1 / (RRF_K + rank) for rank in ranks)


# -- fusion on constructed lists ---------------------------------------------------------------


def test_fusion_sums_reciprocal_ranks_and_keeps_each_list_s_own_score():
    lexical = [hit("a", 0, 0.9), hit("b", 0, 0.5), hit("c", 0, 0.1)]
    dense = [hit("c", 0, 0.95), hit("a", 0, 0.8), hit("d", 0, 0.7)]
    fused = fuse({"lexical": lexical, "dense": dense}, 10)
    assert [h["task_id"] for h in fused] == ["a", "c", "b", "d"]
    assert [h["score"] for h in fused] == pytest.approx(
        [rrf(1, 2), rrf(3, 1), rrf(2), rrf(3)], abs=1e-6
    )
    assert [h["scores"] for h in fused] == [
        {"lexical": 0.9, "dense": 0.8},
        {"lexical": 0.1, "dense": 0.95},
        {"lexical": 0.5},
        {"dense": 0.7},
    ]
    assert fused[0]["text"] == "a/0", "the hit itself is kept"
    assert lexical[0] == hit("a", 0, 0.9), "the lists given are left as they were"


def test_fusion_keeps_the_top_k_and_tells_chunks_of_one_document_apart():
    lexical = [hit("a", 0, 0.9), hit("a", 1, 0.8)]
    dense = [hit("a", 1, 0.7), hit("b", 3, 0.6)]
    fused = fuse({"lexical": lexical, "dense": dense}, 2)
    assert [(h["task_id"], h["chunk"]) for h in fused] == [("a", 1), ("a", 0)]
    assert fuse({"lexical": [], "dense": []}, 5) == []


def test_equal_fused_scores_go_to_the_better_single_rank_then_to_the_first_named_list():
    only_words, only_meaning = hit("w", 0, 0.3), hit("m", 0, 0.9)
    fused = fuse({"lexical": [only_words], "dense": [only_meaning]}, 5)
    assert [h["task_id"] for h in fused] == ["w", "m"]
    assert fused[0]["score"] == fused[1]["score"] == pytest.approx(rrf(1), abs=1e-6)
    fused = fuse({"dense": [only_meaning], "lexical": [only_words]}, 5)
    assert [h["task_id"] for h in fused] == ["m", "w"]


def test_each_list_is_read_deeper_than_k():
    assert candidates(1) == 50 and candidates(25) == 50 and candidates(26) == 52
    assert candidates(MAX_SEARCH_K) == 2 * MAX_SEARCH_K
    assert scored_by("dense", [hit("a", 0, 0.4)])[0]["scores"] == {"dense": 0.4}


# -- a searcher over a knowledge base with dense vectors ---------------------------------------


class QueryEmbedder:
    """An embedding service answering each query's vector from a table, counting its calls."""

    model, dimension, batch_size = "toy", 4, 8

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table, self.calls = table, 0

    def embed(self, texts):
        self.calls += 1
        return np.stack([self.table[text] for text in texts])


class Spied(MemoryVectors):
    def __init__(self) -> None:
        super().__init__()
        self.limits: list[int] = []

    def nearest(self, tenant, query, limit):
        self.limits.append(limit)
        return super().nearest(tenant, query, limit)


@pytest.fixture
def store():
    return Spied()


@pytest.fixture
def searcher(redis, store):
    """Four documents, one chunk each: "both" matches the query `ledger` by its words and by its
    vector, "words" by its words only (an orthogonal vector), "meaning" by its vector only (no
    word in common), "neither" by nothing."""
    between = (AXES[0] + AXES[1]) / np.sqrt(2)
    for name, text, vector in (
        ("both", "ledger entries", AXES[0]),
        ("words", "ledger notes kept elsewhere", AXES[1]),
        ("meaning", "bookkeeping", between),
        ("neither", "river water", AXES[2]),
    ):
        put(redis, name, [text], vectors=np.stack([vector]), store=store)
    return Searcher(redis, QueryEmbedder({"ledger": AXES[0]}), vectors=store)


def by_document(answer) -> dict[str, dict]:
    return {h["document_id"]: h for h in answer.results}


def test_a_default_search_fuses_words_and_meaning(searcher):
    words = searcher.search("default", "ledger", 10, "lexical").results
    meaning = searcher.search("default", "ledger", 10, "dense").results
    answer = searcher.search("default", "ledger", 10)
    assert answer.mode == "hybrid" and answer.notice == "" and answer.exact
    found = by_document(answer)
    assert set(found) == {"both", "words", "meaning"}
    lexical_rank = {h["document_id"]: n for n, h in enumerate(words, start=1)}
    dense_rank = {h["document_id"]: n for n, h in enumerate(meaning, start=1)}
    assert found["both"]["scores"] == {
        "lexical": words[lexical_rank["both"] - 1]["score"],
        "dense": pytest.approx(1.0, abs=1e-6),
    }
    assert found["both"]["score"] == pytest.approx(
        rrf(lexical_rank["both"], dense_rank["both"]), abs=1e-6
    )
    assert set(found["words"]["scores"]) == {"lexical"}
    assert found["words"]["score"] == pytest.approx(rrf(lexical_rank["words"]), abs=1e-6)
    assert found["meaning"]["scores"] == {"dense": pytest.approx(2**-0.5, abs=1e-5)}
    assert found["meaning"]["score"] == pytest.approx(rrf(dense_rank["meaning"]), abs=1e-6)
    assert answer.results[0]["document_id"] == "both", "found by both lists: first"
    scores = [h["score"] for h in answer.results]
    assert scores == sorted(scores, reverse=True)
    assert all(not key.startswith("_") for h in answer.results for key in h)


def test_hybrid_reads_both_lists_deeper_than_k(searcher, store, monkeypatch):
    asked = []
    lexical = searcher.retriever.lexical
    monkeypatch.setattr(
        searcher.retriever,
        "lexical",
        lambda tenant, row, k: asked.append(k) or lexical(tenant, row, k),
    )
    answer = searcher.search("default", "ledger", 1, "hybrid")
    assert asked == [candidates(1)] and store.limits[-1] >= candidates(1)
    (hit,) = answer.results
    assert hit["document_id"] == "both" and set(hit["scores"]) == {"lexical", "dense"}


def test_dense_and_lexical_each_answer_alone_with_their_own_scores(searcher):
    calls = searcher.embedder.calls
    words = searcher.search("default", "ledger", 10, "lexical")
    assert words.mode == "lexical" and words.notice == ""
    assert searcher.embedder.calls == calls, "by words only: the embedder is not asked"
    assert {h["document_id"] for h in words.results} == {"both", "words"}
    assert all(h["scores"] == {"lexical": h["score"]} for h in words.results)

    meaning = searcher.search("default", "ledger", 10, "dense")
    assert meaning.mode == "dense" and meaning.notice == "" and meaning.exact
    assert [h["document_id"] for h in meaning.results] == ["both", "meaning"]
    assert [h["score"] for h in meaning.results] == pytest.approx([1.0, 2**-0.5], abs=1e-5)
    assert all(h["scores"] == {"dense": h["score"]} for h in meaning.results)


def test_an_unknown_mode_is_refused_and_k_is_bounded(searcher):
    assert SEARCH_MODES == ("lexical", "dense", "hybrid")
    with pytest.raises(ValueError, match="semantic"):
        searcher.search("default", "ledger", 10, "semantic")
    assert len(searcher.search("default", "ledger", MAX_SEARCH_K + 50).results) == 3


def test_without_dense_vectors_words_answer_and_say_so_when_meaning_was_asked(redis):
    put(redis, "doc", ["ledger entries"])
    local = Searcher(redis, LocalEmbedder())
    for mode in (None, "lexical"):
        answer = local.search("default", "ledger", 5, mode)
        assert (answer.mode, answer.notice) == ("lexical", ""), mode
    for mode in ("dense", "hybrid"):
        answer = local.search("default", "ledger", 5, mode)
        assert answer.mode == "lexical", mode
        assert "Search by meaning needs an embedding service" in answer.notice
        assert "match your words only" in answer.notice
        assert [h["scores"] for h in answer.results] == [{"lexical": answer.results[0]["score"]}]
    unconfigured = Searcher(redis, QueryEmbedder({}), vectors=None)
    for mode in (None, "dense", "hybrid"):
        answer = unconfigured.search("default", "ledger", 5, mode)
        assert answer.mode == "lexical" and "INTAKE_VECTOR_DATABASE_URL" in answer.notice
    assert unconfigured.embedder.calls == 0


class _Down:
    model, dimension, batch_size = "m", 4, 8

    def embed(self, texts):
        raise TransientError("timed out after 2 s")


@pytest.mark.parametrize("mode", [None, "dense", "hybrid"])
def test_a_failing_service_makes_any_search_by_meaning_answer_by_words(redis, store, mode):
    put(redis, "doc", ["ledger entries"], vectors=AXES[:1], store=store)
    answer = Searcher(redis, _Down(), breaker_seconds=30, vectors=store).search(
        "default", "ledger", 5, mode
    )
    assert answer.mode == "lexical" and "timed out" in answer.notice
    assert [h["scores"] for h in answer.results] == [{"lexical": answer.results[0]["score"]}]
    assert 0 < redis.ttl(keys.search_breaker()) <= 30
    again = Searcher(redis, QueryEmbedder({}), vectors=store).search("default", "ledger", 5, mode)
    assert again.mode == "lexical" and "tried again in" in again.notice, "the breaker is open"
