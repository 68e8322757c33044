"""What a search may cost (jobs/kb/retrieval.py): every script call stops at its work, terms no
chunk holds cost nothing, a long query is scored by its rarest terms, and a search past its
budget says it is not exact. Work is counted by the script itself, so these hold on any machine;
tests/integration/kb/test_search_cost.py times the calls on a real Redis."""

from __future__ import annotations

import random

import pytest

from jobs.kb import index, retrieval
from jobs.kb.index import IndexedDocument
from jobs.kb.retrieval import Retriever
from jobs.text.terms import TERMS


def put(redis, document_id: str, texts: list[str]) -> None:
    document = IndexedDocument("t", document_id, f"{document_id}.txt", "1" * 32, 1, texts, None)
    assert index.write(redis, document)


def calls_of(retriever: Retriever) -> list[tuple[int, int]]:
    """(work asked, work done) of each script call the retriever makes from now on."""
    seen: list[tuple[int, int]] = []
    script = retriever._lexical

    def counting(client, **given):
        reply = script(client, **given)
        seen.append((int(given["args"]["work_budget"]), int(reply[2])))
        return reply

    retriever._lexical = counting
    return seen


@pytest.fixture
def corpus(redis):
    rng = random.Random(5)
    vocabulary = [f"w{n}" for n in range(300)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    for d in range(8):
        put(redis, f"d{d}", [" ".join(rng.choices(vocabulary, weights, k=60)) for _ in range(100)])
    return redis


def test_no_call_does_more_than_its_work(corpus, monkeypatch):
    monkeypatch.setattr(retrieval, "WORK_PER_CALL", 300)
    retriever = Retriever(corpus)
    calls = calls_of(retriever)
    query = " ".join(f"w{n}" for n in range(0, 120, 2))  # 60 words, most in most chunks
    found = retriever.lexical("t", TERMS.count_query(query), 10)
    assert len(calls) > 3, "the search went on over several calls"
    # One row more, or one term's levels read (at most 256 of them), past the work asked.
    assert all(done <= asked + 256 for asked, done in calls), calls
    assert found.hits


def test_terms_no_chunk_holds_cost_nothing(corpus):
    alone = Retriever(corpus).lexical("t", TERMS.count_query("w7 w40"), 10)
    absent = " ".join(f"nowhere{n}" for n in range(100))
    padded = Retriever(corpus).lexical("t", TERMS.count_query(f"{absent} w7 w40"), 10)
    assert padded.exact and alone.exact
    assert [h["text"] for h in padded.hits] == [h["text"] for h in alone.hits]
    # What the padding costs is reading 100 document frequencies in one HMGET: a unit each.
    assert padded.work <= alone.work + 100


def test_a_long_query_is_scored_by_its_rarest_terms(redis, monkeypatch):
    monkeypatch.setattr(retrieval, "TERM_LIMIT", 1)
    put(redis, "common", [f"everywhere filler{n}" for n in range(40)])
    put(redis, "rare", ["everywhere zebrafox"])
    found = Retriever(redis).lexical("t", TERMS.count_query("everywhere zebrafox"), 3)
    assert [h["text"] for h in found.hits] == ["everywhere zebrafox"], "the rare word decides"
    assert not found.exact, "a term was left out, so the answer says it may not be the top k"


def test_a_search_past_its_budget_is_not_exact_and_keeps_its_best(corpus):
    query = " ".join(f"w{n}" for n in range(40))
    whole = Retriever(corpus, budget=10**9).lexical("t", TERMS.count_query(query), 50)
    cut = Retriever(corpus, budget=2_000)
    cut_calls = calls_of(cut)
    found = cut.lexical("t", TERMS.count_query(query), 1)
    assert whole.exact
    assert not found.exact and found.hits
    assert sum(done for _, done in cut_calls) <= 2_000 + 256
    best = {h["text"] for h in whole.hits}
    assert found.hits[0]["text"] in best, "the best found so far is among the true top 50"
