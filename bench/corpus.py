"""A large synthetic knowledge base: the chunk texts made with numpy from word ids, and their
term rows (jobs.text.terms) computed the same way for checks.

The index step counts every chunk's terms from its text (jobs.kb.index.stage), so a build pays
the counter's regex and CRC-32 (minutes of one core for 1,000,000 chunks of 110 words); the
rows made from word ids (`rows_of`, checked against the counter on a sample, `check_rows`)
take seconds. Words are drawn from bench.search's Zipf-like vocabulary, so the
query shape (one word in ~60 % of the chunks, one in ~7 %) is the same at every size.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from bench.search import VOCABULARY, WORDS_PER_CHUNK, vocabulary
from jobs.text.terms import TERMS, SparseRows
from jobs.text.tokens import document_terms

WORDS = vocabulary(VOCABULARY)
# A word's bucket is its indexed term's (stemmed); a word the index drops (a stop word, one
# character) gets -1 and is left out of the rows.
_TERMS = [document_terms(w) for w in WORDS]
_BUCKETS = np.array([zlib.crc32(t[0].encode("utf-8")) if t else -1 for t in _TERMS], dtype=np.int64)
_CUMULATIVE = np.cumsum(1.0 / np.arange(1, VOCABULARY + 1))
_CUMULATIVE /= _CUMULATIVE[-1]
_ARRAY = np.array(WORDS, dtype=object)


def word_ids(rng: np.random.Generator, chunks: int) -> np.ndarray:
    """(chunks, WORDS_PER_CHUNK) word ranks drawn with weight 1 / (rank + 1)."""
    return np.searchsorted(_CUMULATIVE, rng.random((chunks, WORDS_PER_CHUNK)), side="right")


def texts_of(ids: np.ndarray) -> list[str]:
    return [" ".join(row).capitalize() + "." for row in _ARRAY[ids]]


def rows_of(ids: np.ndarray) -> SparseRows:
    """What TERMS.count(texts_of(ids)) returns, computed from the ids."""
    n = len(ids)
    rows = np.repeat(np.arange(n, dtype=np.int64), ids.shape[1])
    buckets = _BUCKETS[ids.ravel()]
    kept = buckets >= 0
    cells, counts = np.unique(rows[kept] << 32 | buckets[kept], return_counts=True)
    cell_rows = cells >> 32
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(cell_rows, minlength=n), out=indptr[1:])
    return SparseRows(
        indptr, (cells & 0xFFFFFFFF).astype(np.uint32), counts.astype(np.float32), 2**32
    )


def check_rows(seed: int = 3) -> None:
    """Raise unless `rows_of` agrees with the embedder itself."""
    ids = word_ids(np.random.default_rng(seed), 200)
    mine, real = rows_of(ids), TERMS.count(texts_of(ids))
    if mine.to_bytes() != real.to_bytes():
        raise RuntimeError("bench.corpus rows differ from TERMS.count's")


def documents(seed: int, chunks: int, per_document: int) -> Iterator[tuple[list[str], SparseRows]]:
    """`chunks` chunks in documents of `per_document`: (texts, rows) per document."""
    rng = np.random.default_rng(seed)
    for start in range(0, chunks, per_document):
        ids = word_ids(rng, min(per_document, chunks - start))
        yield texts_of(ids), rows_of(ids)


def _build_part(job: tuple[str, str, int, int, int, int]) -> float:
    import time

    import redis

    from jobs.kb import index

    redis_url, tenant, seed, chunks, per_document, offset = job
    start = time.perf_counter()
    connection = redis.Redis.from_url(redis_url)
    for n, (texts, _rows) in enumerate(documents(seed, chunks, per_document)):
        number = offset + n
        if not index.write(
            connection,
            index.IndexedDocument(
                tenant,
                f"{tenant}-{number}.txt",
                f"{tenant}-{number}.txt",
                f"{number:032x}",
                1,
                texts,
                None,
            ),
        ):  # the index counts the terms (rows: check_rows)
            raise RuntimeError("an index write was refused")
    connection.close()
    return time.perf_counter() - start


def build(
    redis_url: str,
    tenant: str,
    chunks: int,
    *,
    per_document: int = 1000,
    processes: int = 2,
    seed: int = 11,
) -> float:
    """Write `chunks` chunks into one tenant's knowledge base with `jobs.kb.index.write` (what the
    pipeline's last step does), from `processes` processes; returns the seconds it took."""
    import multiprocessing
    import time

    check_rows()
    share = -(-chunks // processes // per_document) * per_document
    jobs = [
        (
            redis_url,
            tenant,
            seed + p,
            min(share, chunks - p * share),
            per_document,
            p * share // per_document,
        )
        for p in range(processes)
        if chunks > p * share
    ]
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
        pool.map(_build_part, jobs)
    return time.perf_counter() - start
