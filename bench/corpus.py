"""A large synthetic knowledge base, built fast: chunk texts made with numpy, written with
`jobs.kb.index.write` (the staging and flip of the pipeline's last step) from 2 processes.

English chunks are words drawn from bench.search's Zipf-like vocabulary (so the query shape of
bench.search, one word in ~60 % of the chunks and one in ~7 %, is the same at every size);
Chinese chunks come from jieba's dictionary (bench.chinese). Document ``n`` of a corpus is made
from the seed and ``n`` alone, so the same chunks come out whichever process makes them, and a
second engine (bench.search_scale's tantivy) can be given exactly the texts Intake indexed.

Why the build counts terms itself: the index step counts every chunk's terms from its text
(`jobs.kb.index.stage` calls `jobs.text.terms.TERMS.count`), in Python, a word or a character
pair at a time: ~0.35 ms a chunk of 110 English words, ~1.5 ms a Chinese chunk of 1,000
characters, which made the million-chunk build twice as slow as it was when the bench handed the
rows in (issue 39 took that input away). The rows of a whole document are computed here in
bulk with numpy instead (from word ids; from code points), in seconds for a million chunks, and
the index's own call to `TERMS.count` is answered with them while that document is written
(`unittest.mock.patch.object`, only for that very list of texts: any other call is counted as
usual). Nothing of the index's layout is known here: it is written by `index.write` alone. The
bulk rows are checked against `TERMS.count` on a sample first; where they differ (the analysis
changed), the build says so and lets the index count, slowly but right.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from unittest import mock

import numpy as np

from bench.search import VOCABULARY, WORDS_PER_CHUNK, vocabulary
from jobs.text.terms import TERMS, SparseRows, TermCounter
from jobs.text.tokens import document_terms

WORDS = vocabulary(VOCABULARY)
# A word's bucket is its indexed term's (stemmed); a word the index drops (a stop word, one
# character) gets -1 and is left out of the rows.
_TERMS = [document_terms(w) for w in WORDS]
_BUCKETS = np.array([zlib.crc32(t[0].encode("utf-8")) if t else -1 for t in _TERMS], dtype=np.int64)
_CUMULATIVE = np.cumsum(1.0 / np.arange(1, VOCABULARY + 1))
_CUMULATIVE /= _CUMULATIVE[-1]
_ARRAY = np.array(WORDS, dtype=object)

#: English words a chunk of ~1,000 characters holds (INTAKE_CHUNK_SIZE's default): the
#: vocabulary's words average 5.9 characters with their space.
WORDS_PER_1000_CHARACTERS = 170


def word_ids(rng: np.random.Generator, chunks: int, words: int = WORDS_PER_CHUNK) -> np.ndarray:
    """(chunks, words) word ranks drawn with weight 1 / (rank + 1)."""
    return np.searchsorted(_CUMULATIVE, rng.random((chunks, words)), side="right")


def texts_of(ids: np.ndarray) -> list[str]:
    return [" ".join(row).capitalize() + "." for row in _ARRAY[ids]]


def rows_of(ids: np.ndarray) -> SparseRows:
    """What TERMS.count(texts_of(ids)) returns, computed from the ids."""
    n = len(ids)
    rows = np.repeat(np.arange(n, dtype=np.int64), ids.shape[1])
    buckets = _BUCKETS[ids.ravel()]
    kept = buckets >= 0
    return counted_rows(rows[kept], buckets[kept], n)


def counted_rows(rows: np.ndarray, buckets: np.ndarray, n: int) -> SparseRows:
    """`n` rows of term counts from one (row, bucket) pair per occurrence, as TERMS.count
    makes them (sorted by row, then bucket)."""
    cells, counts = np.unique(rows.astype(np.int64) << 32 | buckets, return_counts=True)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(cells >> 32, minlength=n), out=indptr[1:])
    return SparseRows(
        indptr, (cells & 0xFFFFFFFF).astype(np.uint32), counts.astype(np.float32), 2**32
    )


def check_rows(seed: int = 3) -> None:
    """Raise unless `rows_of` agrees with the embedder itself."""
    ids = word_ids(np.random.default_rng(seed), 200)
    mine, real = rows_of(ids), TERMS.count(texts_of(ids))
    if mine.to_bytes() != real.to_bytes():
        raise RuntimeError("bench.corpus rows differ from TERMS.count's")


def log_uniform_queries(words: Any, seed: int, count: int) -> list[str]:
    """`count` queries of 1–4 of `words` (most frequent first) whose ranks are drawn
    log-uniformly: as many from ranks 10–100 as from ranks 1,000–10,000."""
    rng = np.random.default_rng(seed)
    queries = []
    for _ in range(count):
        ranks = np.exp(rng.uniform(0, np.log(len(words)), int(rng.integers(1, 5))))
        queries.append(" ".join(words[int(r)] for r in ranks))
    return queries


def short_queries(seed: int, count: int) -> list[str]:
    """English queries of 1–4 words, ranks log-uniform (bench.knowledge_base.exact_queries)."""
    return log_uniform_queries(WORDS, seed, count)


def questions(seed: int, count: int, shortest: int = 8, longest: int = 20) -> list[str]:
    """`count` sentences of `shortest`–`longest` words drawn by frequency, as a chunk's are."""
    rng = np.random.default_rng(seed)
    return [
        " ".join(_ARRAY[word_ids(rng, 1, int(rng.integers(shortest, longest + 1)))[0]]).capitalize()
        + "?"
        for _ in range(count)
    ]


def paragraphs(seed: int, count: int) -> list[str]:
    """`count` pasted paragraphs of ~1,000 characters (a chunk's text of WORDS_PER_1000_CHARACTERS
    words)."""
    return texts_of(word_ids(np.random.default_rng(seed), count, WORDS_PER_1000_CHARACTERS))


def documents(
    seed: int, chunks: int, per_document: int, words: int = WORDS_PER_CHUNK
) -> list[tuple[list[str], SparseRows]]:
    """`chunks` English chunks in documents of `per_document`: (texts, rows) per document."""
    spec = Corpus("en", seed, per_document, words)
    return [spec.document(n, spec.size(n, chunks)) for n in range(spec.count(chunks))]


@dataclass(frozen=True)
class Corpus:
    """Which chunks: a language (``en``: bench.search's vocabulary, `words` a chunk; ``zh``:
    bench.chinese, ~1,000 characters a chunk), a seed and the size of a document."""

    language: str = "en"
    seed: int = 11
    per_document: int = 1000
    words: int = WORDS_PER_CHUNK

    def count(self, chunks: int) -> int:
        """How many documents hold `chunks` chunks."""
        return -(-chunks // self.per_document)

    def size(self, number: int, chunks: int) -> int:
        """How many chunks document `number` holds (the last one may be short)."""
        return min(self.per_document, chunks - number * self.per_document)

    def document(self, number: int, size: int) -> tuple[list[str], SparseRows]:
        """Document `number`'s chunk texts and their rows (what TERMS.count makes of them)."""
        if self.language == "en":
            ids = word_ids(self._rng(number), size, self.words)
            return texts_of(ids), rows_of(ids)
        from bench import chinese

        texts = self.texts(number, size)
        return texts, chinese.rows_of(texts)

    def texts(self, number: int, size: int) -> list[str]:
        """Document `number`'s chunk texts alone."""
        if self.language == "en":
            return texts_of(word_ids(self._rng(number), size, self.words))
        if self.language == "zh":
            from bench import chinese

            return chinese.chunk_texts(self._rng(number), size)
        raise ValueError(f"no corpus of language {self.language!r}")

    def _rng(self, number: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, number])


def bulk_rows_agree(spec: Corpus, chunks: int = 200) -> bool:
    """Whether the rows made in bulk are TERMS.count's, on a sample of `spec`'s chunks."""
    texts, rows = Corpus(spec.language, spec.seed + 7919, chunks, spec.words).document(0, chunks)
    return rows.to_bytes() == TermCounter.count(TERMS, texts).to_bytes()


def answering(texts: list[str], rows: SparseRows, used: list[int]) -> Callable[..., SparseRows]:
    """A stand-in for TERMS.count that answers `rows` for exactly `texts` (counting the times
    in `used`) and counts anything else as TERMS.count does."""

    def count(asked: Any) -> SparseRows:
        if asked is texts or list(asked) == texts:
            used[0] += 1
            return rows
        return TermCounter.count(TERMS, asked)

    return count


def write_document(
    connection: Any, tenant: str, number: int, texts: list[str], rows: SparseRows | None
) -> bool:
    """Write one document with `index.write`; `rows`: its terms counted in bulk (None: the
    index counts them); True when its term count was answered in bulk."""
    from jobs.kb import index

    doc = index.IndexedDocument(
        tenant, f"{tenant}-{number}.txt", f"{tenant}-{number}.txt", f"{number:032x}", 1, texts, None
    )
    used = [0]
    if rows is None:
        written = index.write(connection, doc)
    else:
        with mock.patch.object(TERMS, "count", answering(texts, rows, used)):
            written = index.write(connection, doc)
    if not written:
        raise RuntimeError("an index write was refused")
    return used[0] > 0


@dataclass(frozen=True)
class _Part:
    redis_url: str
    tenant: str
    spec: Corpus
    chunks: int
    numbers: list[int]
    bulk: bool
    max_memory: int


def _build_part(part: _Part) -> tuple[float, list[int], bool, bool]:
    """Write `part`'s documents; (seconds, the numbers written, whether Redis's memory reached
    the cap first, whether every term count was answered in bulk)."""
    import redis

    start = time.perf_counter()
    # No socket timeout (redis-py's default is 5 s): a piece of 1,000 Chinese chunks is one
    # script that can hold Redis for seconds.
    connection = redis.Redis.from_url(part.redis_url, socket_timeout=None)
    written, full, bulk = [], False, part.bulk
    for number in part.numbers:
        if part.max_memory and connection.info("memory")["used_memory"] >= part.max_memory:
            full = True
            break
        texts, rows = part.spec.document(number, part.spec.size(number, part.chunks))
        used = write_document(connection, part.tenant, number, texts, rows if bulk else None)
        if bulk and not used:
            print(
                "[bench.corpus] the index did not ask TERMS.count for the texts: it counts "
                "them its own way now (slowly)",
                file=sys.stderr,
                flush=True,
            )
            bulk = False
        written.append(number)
    connection.close()
    return time.perf_counter() - start, written, full, bulk


@dataclass(frozen=True)
class Built:
    """What `build` wrote: its seconds, chunks and document numbers, whether it stopped at the
    memory cap, and whether terms were counted in bulk."""

    seconds: float
    chunks: int
    numbers: list[int]
    full: bool
    bulk: bool


def build(
    redis_url: str,
    tenant: str,
    chunks: int,
    *,
    spec: Corpus | None = None,
    processes: int = 2,
    max_memory: int = 0,
    start: int = 0,
) -> Built:
    """Write `chunks` chunks of `spec` (English of bench.search's shape, by default) into one
    tenant's knowledge base with `jobs.kb.index.write` (what the pipeline's last step does),
    from `processes` processes, document ``n`` from process ``n % processes``.

    `max_memory` (bytes, 0: none): each process stops before its next document once Redis's
    used_memory reached it, so a corpus too large for the machine ends at what fits (`full`).
    `start` (a multiple of the document size): the chunks before it were written already (by
    an earlier build of the same corpus), only the next ones are."""
    spec = spec or Corpus()
    bulk = bulk_rows_agree(spec)
    if not bulk:
        print(
            f"[bench.corpus] bulk rows of {spec.language!r} differ from TERMS.count's (the "
            "analysis changed?): the index counts the terms itself, slowly",
            file=sys.stderr,
            flush=True,
        )
    if start % spec.per_document:
        raise ValueError("a build starts at a document's first chunk")
    documents = list(range(start // spec.per_document, spec.count(chunks)))
    parts = [
        _Part(redis_url, tenant, spec, chunks, documents[p::processes], bulk, max_memory)
        for p in range(min(processes, len(documents)))
    ]
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(len(parts)) as pool:
        done = pool.map(_build_part, parts)
    numbers = sorted(n for _seconds, written, _full, _bulk in done for n in written)
    return Built(
        time.perf_counter() - start,
        sum(spec.size(n, chunks) for n in numbers),
        numbers,
        any(full for _seconds, _written, full, _bulk in done),
        all(bulk for _seconds, _written, _full, bulk in done),
    )
