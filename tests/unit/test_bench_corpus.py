"""The bench's synthetic corpora (bench.corpus, bench.chinese) and the scale bench's arithmetic
(bench.search_scale): the bulk term rows are what a plain count of the same terms gives, the
same chunks come out for the same document whoever makes them, and writing with bulk rows
indexes what the index's own count does."""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np
import pytest

from bench import chinese, corpus, search_scale
from jobs.kb.retrieval import Retriever
from jobs.text.terms import TERMS

pytest.importorskip("jieba")


def plain_terms(text: str) -> list[str]:
    """Each ideograph, and each pair of neighbouring ideographs between two marks."""
    runs = "".join(ch if chinese.FIRST <= ord(ch) <= chinese.LAST else " " for ch in text)
    found: list[str] = []
    for run in runs.split():
        found += list(run) + [run[i : i + 2] for i in range(len(run) - 1)]
    return found


def test_chinese_bulk_rows_count_each_character_and_pair_by_its_crc32() -> None:
    texts = chinese.chunk_texts(np.random.default_rng(1), 20)
    rows = chinese.rows_of(texts)
    for n, text in enumerate(texts):
        expected = Counter(zlib.crc32(term.encode("utf-8")) for term in plain_terms(text))
        start, stop = rows.indptr[n], rows.indptr[n + 1]
        got = dict(zip(rows.indices[start:stop].tolist(), rows.values[start:stop].tolist()))
        assert got == expected
        assert rows.indices[start:stop].tolist() == sorted(expected)


def test_chinese_rows_refuse_what_they_cannot_count() -> None:
    with pytest.raises(ValueError):
        chinese.rows_of(["死信队列 retry"])


def test_chinese_indexed_terms_are_the_same_terms_space_separated() -> None:
    texts = chinese.chunk_texts(np.random.default_rng(2), 5)
    for text, terms in zip(texts, chinese.indexed_terms(texts)):
        assert sorted(terms.split(" ")) == sorted(plain_terms(text))


def test_chinese_query_pairs() -> None:
    assert chinese.query_pairs("死信队列 重试？") == "死信 信队 队列 重试"
    assert chinese.query_pairs("死，信队") == "死 信队"


def test_chunks_are_about_a_thousand_characters() -> None:
    zh = corpus.Corpus("zh").texts(0, 50)
    en = corpus.Corpus("en", words=corpus.WORDS_PER_1000_CHARACTERS).texts(0, 50)
    for texts in (zh, en):
        assert 900 <= np.mean([len(t) for t in texts]) <= 1100
    assert all(t.endswith("。") for t in zh)


def test_questions_and_long_queries_have_their_lengths() -> None:
    assert all(20 <= chinese.ideographs(q) <= 60 for q in chinese.questions(3, 50))
    assert all(chinese.ideographs(q) == 128 for q in chinese.long_queries(3, 5))
    assert all(8 <= len(q.split()) <= 20 for q in corpus.questions(3, 50))
    assert all(1 <= len(q.split()) <= 4 for q in chinese.short_queries(3, 50))


def test_a_document_is_made_from_the_seed_and_its_number_alone() -> None:
    spec = corpus.Corpus("zh", seed=5, per_document=10)
    later = spec.document(3, 10)
    assert spec.texts(3, 10) == later[0] == spec.document(3, 10)[0]
    assert spec.texts(2, 10) != later[0]
    assert corpus.Corpus("en", seed=5).texts(3, 4) == corpus.Corpus("en", seed=5).texts(3, 4)


def test_english_bulk_rows_are_the_counters() -> None:
    corpus.check_rows()
    assert corpus.bulk_rows_agree(corpus.Corpus("en", words=20), chunks=20)


def test_the_stand_in_counts_only_the_texts_it_was_given() -> None:
    texts = ["alpha beta", "gamma"]
    rows, used = TERMS.count(["unrelated words"]), [0]
    count = corpus.answering(texts, rows, used)
    assert count(texts) is rows and used == [1]
    other = count(["delta"])
    assert other.to_bytes() == TERMS.count(["delta"]).to_bytes() and used == [1]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_writing_with_bulk_rows_indexes_what_the_index_counts(redis, language) -> None:
    spec = corpus.Corpus(language, seed=3, per_document=30, words=40)
    texts, rows = spec.document(0, 30)
    assert corpus.write_document(redis, "bulk", 0, texts, rows)
    assert not corpus.write_document(redis, "counted", 0, texts, None)
    retriever = Retriever(redis)
    for query in (texts[0][:12], texts[7][5:30]):
        row = TERMS.count_query(query)
        bulk, counted = retriever.lexical("bulk", row, 5), retriever.lexical("counted", row, 5)
        assert bulk.hits
        assert [(h["chunk"], h["score"]) for h in bulk.hits] == [
            (h["chunk"], h["score"]) for h in counted.hits
        ]


def test_memory_projection_follows_a_power_law_through_the_steps() -> None:
    built = search_scale.Built("zh", 50_000)
    built.steps = [(n, int(1000 * n**0.9), 0) for n in (10_000, 20_000, 50_000)]
    power, linear = built.projected_gb(1_000_000)
    assert power == pytest.approx(1000 * 1_000_000**0.9 / 1e9, rel=1e-3)
    marginal = (built.steps[2][1] - built.steps[1][1]) / 30_000
    assert linear == pytest.approx((built.steps[2][1] + marginal * 950_000) / 1e9)
