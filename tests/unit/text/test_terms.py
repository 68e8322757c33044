"""A chunk's search terms and their counts (jobs.text.terms), the rows the lexical index
ranks by BM25."""

import hashlib
import os
import random
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from jobs.text.terms import SparseRows, TermCounter
from tests.unit.sparse_reference import InvertedIndex, top_k

ROOT = Path(__file__).resolve().parents[3]
CORPUS = [
    "The invoice for March is attached; payment is due in thirty days.",
    "Our cat sleeps on the warm windowsill every afternoon.",
    "Kubernetes schedules pods onto nodes according to resource requests.",
    "",
]


# -- TermCounter -------------------------------------------------------------------------------


def scores(rows: SparseRows, query: SparseRows) -> np.ndarray:
    """Dot product of the query's single row with every row (what search computes)."""
    return InvertedIndex(rows).scores(query)


def row_of(rows: SparseRows, i: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = rows.indptr[i], rows.indptr[i + 1]
    return rows.indices[lo:hi], rows.values[lo:hi]


def test_terms_rows_are_sparse_sorted_term_counts():
    counter = TermCounter()
    rows = counter.count(CORPUS)
    assert (counter.model, counter.dimension) == ("local-bm25-v1", 2**32)
    assert isinstance(rows, SparseRows) and len(rows) == 4 and rows.dimension == 2**32
    assert (rows.indptr.dtype, rows.indices.dtype, rows.values.dtype) == (
        np.int64,
        np.uint32,
        np.float32,
    )
    for i in range(3):
        indices, values = row_of(rows, i)
        assert np.all(np.diff(indices.astype(np.int64)) > 0), "sorted and unique"
        assert np.all(indices < 2**32) and np.all(values >= 1) and np.all(values % 1 == 0)
    assert rows.indptr[3] == rows.indptr[4], "a text without words is an empty row"


def test_terms_empty_input():
    rows = TermCounter().count([])
    assert len(rows) == 0 and rows.indptr.tolist() == [0] and rows.indices.size == 0


def test_terms_same_text_same_row_regardless_of_batch():
    counter = TermCounter()
    alone = counter.count([CORPUS[1]])
    in_batch = counter.count(CORPUS)
    for a, b in zip(row_of(alone, 0), row_of(in_batch, 1)):
        assert a.tobytes() == b.tobytes()
    assert counter.count(["Cat, CAT! cat"]).to_bytes() == counter.count(["cat cat cat"]).to_bytes()


def test_terms_rows_count_stemmed_words_without_stop_words():
    indices, values = row_of(TermCounter().count(["Cats, cat and the CAT's cat dog"]), 0)
    by_bucket = dict(zip(indices.tolist(), values.tolist()))
    cat, dog = (zlib.crc32(w.encode()) % 2**32 for w in ("cat", "dog"))
    # "cats" and "cat" stem alike; "and", "the" and the one-letter "s" are not indexed.
    assert by_bucket == {cat: 4.0, dog: 1.0}


@pytest.mark.parametrize(
    "query, expected",
    [
        ("invoice", 0),
        ("When is payment due?", 0),
        ("cat", 1),
        ("windowsill", 1),
        ("pods and nodes", 2),
        ("invoice for March attached", 0),
        ("cat sleeps on the windowsill", 1),
        ("schedules pods onto nodes", 2),
    ],
)
def test_terms_query_finds_the_chunk_with_its_words(query, expected):
    counter = TermCounter()
    found = scores(counter.count(CORPUS), counter.count_query(query))
    assert int(np.argmax(found)) == expected
    assert found[expected] > 0.2


def test_terms_unicode_words():
    counter = TermCounter()
    rows = counter.count(["Ein Café in München", "cafe\u0301 MÜNCHEN"])
    found = scores(rows, counter.count_query("cafe\u0301 MÜNCHEN"))
    assert found[0] > 0 and found[1] > found[0], "NFKC and case folded alike; the shorter first"


def _zipf_corpus(rng: random.Random, chunks: int, words_per_chunk: int, vocabulary: int):
    """Chunks of common words (Zipf-like frequencies), each with one unique rare word."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    common: set[str] = set()
    while len(common) < vocabulary:
        common.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    common_words = sorted(common)
    rng.shuffle(common_words)
    weights = [1 / rank for rank in range(1, vocabulary + 1)]
    rare: list[str] = []
    while len(rare) < chunks:
        word = "".join(rng.choice(letters) for _ in range(12))
        if word not in common:
            rare.append(word)
    texts = []
    for word in rare:
        words = rng.choices(common_words, weights=weights, k=words_per_chunk)
        words.insert(rng.randrange(len(words) + 1), word)
        texts.append(" ".join(words))
    return texts, rare


def test_terms_a_rare_word_ranks_its_chunk_first_in_a_large_corpus():
    # At 384 dense buckets this found the right chunk first ~5% of the time: every bucket was
    # shared by dozens of common words. With 2**32 buckets a rare word has its bucket to itself.
    rng = random.Random(20240607)
    texts, rare = _zipf_corpus(rng, chunks=2000, words_per_chunk=150, vocabulary=4000)
    counter = TermCounter()
    index = InvertedIndex(counter.count(texts))
    for chunk in rng.sample(range(len(texts)), 50):
        found = index.scores(counter.count_query(rare[chunk]))
        assert list(top_k(found, 3))[:1] == [chunk], rare[chunk]


def test_terms_rows_are_stable_across_processes():
    script = (
        "import hashlib, sys; from jobs.text.terms import TermCounter; "
        "v = TermCounter().count(sys.argv[1:]); "
        "print(hashlib.sha256(b''.join(v.to_bytes())).hexdigest())"
    )
    expected = hashlib.sha256(b"".join(TermCounter().count(CORPUS).to_bytes())).hexdigest()
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # this process has another, random seed
    done = subprocess.run(
        [sys.executable, "-c", script, *CORPUS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == expected


def test_terms_is_fast_enough_for_a_batch():
    texts = [" ".join(f"token{(i * 31 + j) % 5000}" for j in range(100)) for i in range(1000)]
    started = time.perf_counter()
    rows = TermCounter().count(texts)
    assert len(rows) == 1000 and rows.indptr[-1] == 100_000
    assert time.perf_counter() - started < 2.0


# -- SparseRows --------------------------------------------------------------------------------


def test_sparse_rows_concatenate_and_bytes_round_trip():
    counter = TermCounter()
    whole = counter.count(CORPUS)
    parts = SparseRows.concatenate(
        [
            counter.count(CORPUS[:1]),
            counter.count(CORPUS[1:3]),
            SparseRows.empty(2**32),
            counter.count(CORPUS[3:]),
        ]
    )
    assert len(parts) == 4 and parts.to_bytes() == whole.to_bytes()
    again = SparseRows.from_bytes(*whole.to_bytes(), dimension=whole.dimension)
    assert again.to_bytes() == whole.to_bytes() and again.dimension == 2**32


def test_sparse_rows_refuse_inconsistent_arrays_and_mixed_dimensions():
    with pytest.raises(ValueError):
        SparseRows(np.array([0, 2]), np.array([1], np.uint32), np.array([1.0], np.float32), 8)
    with pytest.raises(ValueError):
        SparseRows.concatenate([SparseRows.empty(8), SparseRows.empty(16)])
    with pytest.raises(ValueError):
        SparseRows.concatenate([])
