"""Other engines for the knowledge base's lexical index, measured on the data Intake's own
benches use, so that a maintainer can weigh them against Redis (docs/architecture.md):
`python -m bench.engines.tantivy_engine`, `python -m bench.engines.postgres_fts`.

Not part of `make bench` nor of the tests; each script skips, saying so, when its package is
missing. Shared here: the CISI collection chunked as bench.search_quality chunks it, the
million chunks bench.corpus.build writes (document n from the seed and n), and
the latency summary.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from bench import corpus, search_quality
from bench.knowledge_base import exact_queries
from jobs.core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
MILLION = 1_000_000
PER_DOCUMENT = 1000
SEED = 11  # bench.corpus.build's default (bench.corpus.Corpus)


def cisi() -> tuple[list[tuple[int, str]], list[tuple[int, str]], dict[int, set[int]]] | None:
    """(chunks as (document, text), judged queries, relevant documents), or None if absent."""
    if not (search_quality.collection_dir() / "CISI.ALL").exists():
        return None
    documents, queries, relevant = search_quality.load(search_quality.collection_dir())
    return search_quality.chunks_of(documents, Settings()), queries, relevant


def million(chunks: int = MILLION) -> Iterator[tuple[int, list[str]]]:
    """(document number, its chunk texts): what bench.corpus.build(chunks) writes."""
    spec = corpus.Corpus(seed=SEED, per_document=PER_DOCUMENT)
    for n in range(spec.count(chunks)):
        yield n, spec.texts(n, spec.size(n, chunks))


def two_word_query() -> str:
    """bench.knowledge_base's growth query: one word in ~60 % of the chunks, one in ~7 %."""
    return f"{corpus.WORDS[10]} {corpus.WORDS[150]}"


def queries() -> list[str]:
    """bench.knowledge_base.exact_queries(): 200 queries of 1–4 words."""
    return exact_queries()


def words_only(text: str) -> str:
    """Lower case, punctuation out: a query that no engine's query syntax can misread."""
    return re.sub(r"[^\w]+", " ", text.lower()).strip()


def timed(search: Callable[[str], object], asked: list[str]) -> list[float]:
    seconds = []
    for query in asked:
        started = time.perf_counter()
        search(query)
        seconds.append(time.perf_counter() - started)
    return seconds


def summary(seconds: list[float]) -> dict[str, float]:
    ms = 1000 * np.asarray(seconds)
    return {
        "median_ms": round(float(np.median(ms)), 2),
        "p95_ms": round(float(np.percentile(ms, 95)), 2),
        "max_ms": round(float(ms.max()), 2),
    }


def rss_mb(pid: int | str = "self") -> dict[str, float]:
    """Resident memory of a process from /proc: total, anonymous, file-backed (mmap'ed index)."""
    found = {}
    for line in open(f"/proc/{pid}/status").read().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            found[key] = round(int(value.split()[0]) / 1024, 1)
    return found
