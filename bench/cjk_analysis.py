"""How Intake should cut text written without spaces (Chinese above all) into search terms: each
option's quality and cost, measured the same way (`python -m bench.cjk_analysis [--options
A,B] [--queries N] [--no-quality] [--no-cost]`, not in `make bench`: ~15–35 minutes for the
costs and ~15 for the quality with `--queries 2000` on 2 shared cores; docs/benchmarks.md,
"Chinese analysis", has the figures and the choice).

The options (`OPTIONS`) change only what a spaceless run becomes, for chunks and for queries;
words of spaced scripts stay as jobs.text.tokens makes them. Each option is swapped in where
the index step and the search count terms (jobs.text.terms), then:

* quality: `bench.search_quality_zh`'s measurement (KUAKE-QTR, a development set: measured
  with, never tuned to; all queries, or a seeded sample): every title indexed by
  `jobs.kb.index.write` into a redis-server, every query through `jobs.kb.search.Searcher`;
  and the same with the titles put together in chunks of ~200 and ~1,000 characters (GROUPED;
  a chunk's gain is its best title's label), where a query matches a small part of a chunk, as
  in a document. bm25s on the collection's character bigrams beside each, and on jieba's
  search-mode words on the titles where jieba is installed.
* cost per chunk, at the default chunk size: chunks of ~1,000 characters made of whole titles
  (seeded draws, one title a line; the titles used as questions below are left out), 100 chunks
  a document: distinct terms a chunk (its postings: one 4-byte chunk id in one posting string
  each), its row's bytes (4 + 7 a distinct term, jobs.kb.postings), Redis's `used_memory`
  growth per chunk written, the counting's and the whole index step's time a chunk
  (`jobs.kb.index.write`).
* cost per query: questions of 20–60 characters, timed at 2,000 chunks (CISI's size) and at
  10,000: the call of the search script (`jobs.kb.retrieval.Retriever.lexical`, k = 10, the
  query row counted before the clock), one unmeasured pass, then the best of 3, the English
  questions and each option's in turn within a pass. The Chinese questions are held-out titles,
  two for each English question of the same length (the nearest length where titles run out);
  the English ones are the sentences of 20–60 characters of CISI's queries, searched over
  chunks made the same way from CISI's abstracts' sentences (English analysis is the same for
  every option). Beside the time: the query's terms (distinct buckets read), the chunks the
  script scored, and whether it was exact: the script is being rewritten, and these drive its
  cost.

Prints progress on stderr and one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import redis

from bench import search_quality, search_quality_zh
from bench.servers import redis_server
from jobs.core.settings import Settings
from jobs.kb import retrieval
from jobs.text import terms as terms_module
from jobs.text import tokens
from jobs.text.chunking import chunk_text
from jobs.text.terms import TERMS, SparseRows

SEED = 40
SCALES = (2_000, 10_000)
CHUNKS_PER_DOCUMENT = 100
QUESTION_CHARS = (20, 60)
ZH_PER_EN_QUESTION = 2
REPEATS = 3
K = 10
#: Chunk sizes (characters) the titles are also put together in, to see an option in chunks
#: longer than a title, where a query matches a small part of its chunk.
GROUPED = (200, 1000)
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


def _jieba_search(run: str) -> list[str]:
    import jieba

    return jieba.lcut_for_search(run) if _HAN.search(run) else tokens.pairs(run)


def _characters(run: str) -> list[str]:
    return list(run)


@dataclass(frozen=True)
class Option:
    """What a spaceless run becomes in a chunk and in a query."""

    name: str
    says: str
    document: Callable[[str], list[str]]
    query: Callable[[str], list[str]]
    needs: str = ""  # a module that must be importable

    def document_terms(self, text: str) -> list[str]:
        return tokens.analysed(text, self.document)

    def query_terms(self, text: str) -> list[str]:
        return tokens.analysed(text, self.query)


OPTIONS = {
    o.name: o
    for o in (
        Option(
            "bigrams+chars/bigrams",
            "chunks: pairs and characters; queries: pairs (Intake until issue 40)",
            tokens.pairs_and_characters,
            tokens.pairs,
        ),
        Option(
            "bigrams", "pairs on both sides (a lone character stays)", tokens.pairs, tokens.pairs
        ),
        Option(
            "bigrams+chars",
            "pairs and characters on both sides (Lucene's CJKBigramFilter with unigrams; "
            "Intake since issue 40)",
            tokens.pairs_and_characters,
            tokens.pairs_and_characters,
        ),
        Option("chars", "characters alone on both sides", _characters, _characters),
        Option(
            "jieba",
            "jieba 0.42.1's search mode on both sides (Han runs; others by pairs)",
            _jieba_search,
            _jieba_search,
            needs="jieba",
        ),
    )
}


@contextlib.contextmanager
def analysing(option: Option) -> Iterator[None]:
    """The index step and the search count terms by `option` meanwhile."""
    saved = terms_module.document_terms, terms_module.query_terms
    terms_module.document_terms, terms_module.query_terms = (
        option.document_terms,
        option.query_terms,
    )
    try:
        yield
    finally:
        terms_module.document_terms, terms_module.query_terms = saved


def available(option: Option) -> bool:
    if not option.needs:
        return True
    try:
        __import__(option.needs)
    except ImportError:
        return False
    return True


_JIEBA_PROBE = """
import sys, time
def rss():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024
before, started = rss(), time.perf_counter()
import jieba
jieba.setLogLevel(60)
jieba.dt.tmp_dir = sys.argv[1]
jieba.initialize()
jieba.lcut_for_search("消息失败三次以后会被转入死信队列")
print(time.perf_counter() - started, rss() - before)
"""


def jieba_load() -> dict[str, float] | None:
    """What importing jieba and loading its dictionary cost a fresh process: seconds and
    resident MiB, with its cache file absent (its first run on a machine) and present."""
    if not available(OPTIONS["jieba"]):
        return None
    found: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="jieba-") as cache:
        for when in ("no_cache", "cached"):
            out = subprocess.run(
                [sys.executable, "-c", _JIEBA_PROBE, cache],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            found[f"{when}_s"] = round(float(out[0]), 2)
            found[f"{when}_rss_mib"] = round(float(out[1]), 1)
    return found


# --- the texts --------------------------------------------------------------------------------


def english_units() -> tuple[list[str], list[str]]:
    """(CISI's abstracts' sentences, CISI's queries' sentences of 20–60 characters)."""
    folder = search_quality.collection_dir()
    documents, _queries, _relevant = search_quality.load(folder)
    split = re.compile(r"(?<=[.?!])\s+")
    units = [s for d in documents.values() for s in split.split(" ".join(d.split())) if s]
    asked = search_quality._records(folder / "CISI.QRY").values()
    sentences = [s for r in asked for s in split.split(" ".join(r.get("W", "").split()))]
    low, high = QUESTION_CHARS
    return units, [s for s in sentences if low <= len(s) <= high]


def chinese_units(english: list[str], rng: random.Random) -> tuple[list[str], list[str]]:
    """(the titles left for chunks, ZH_PER_EN_QUESTION held-out titles per English question of
    its length, or the nearest length that has titles left)."""
    titles, _queries, _judged = search_quality_zh.load(search_quality_zh.collection_dir())
    low, high = QUESTION_CHARS
    by_length: dict[int, list[str]] = {}
    for title in titles.values():
        if low <= len(title) <= high:
            by_length.setdefault(len(title), []).append(title)
    for group in by_length.values():
        rng.shuffle(group)
    asked: list[str] = []
    for question in english:
        for _ in range(ZH_PER_EN_QUESTION):
            length = min(
                (n for n in by_length if by_length[n]), key=lambda n: abs(n - len(question))
            )
            asked.append(by_length[length].pop())
    held = set(asked)
    return [t for t in titles.values() if t not in held], asked


def documents(units: list[str], count: int, settings: Settings, seed: int) -> list[list[str]]:
    """`count` chunks in documents of CHUNKS_PER_DOCUMENT, each document a line of drawn units
    after another, chunked with the default settings."""
    rng = random.Random(seed)
    made: list[list[str]] = []
    step = settings.chunk_size - settings.chunk_overlap
    wanted, total = CHUNKS_PER_DOCUMENT * step + settings.chunk_size, 0
    while total < count:
        lines, size = [], 0
        while size < wanted:
            lines.append(rng.choice(units))
            size += len(lines[-1]) + 1
        chunks = chunk_text("\n".join(lines), settings.chunk_size, settings.chunk_overlap)
        made.append(chunks[: min(CHUNKS_PER_DOCUMENT, count - total)])
        total += len(made[-1])
    return made


# --- the measurements -------------------------------------------------------------------------


def per_chunk(chunks: list[str]) -> dict[str, float]:
    """Means per chunk: characters, terms, distinct terms (= postings), row bytes, and the
    milliseconds of counting them."""
    started = time.perf_counter()
    rows = TERMS.count(chunks)
    seconds = time.perf_counter() - started
    distinct = np.diff(rows.indptr)
    return {
        "characters": round(float(np.mean([len(c) for c in chunks])), 1),
        "terms": round(float(rows.values.sum()) / len(chunks), 1),
        "distinct_terms": round(float(distinct.mean()), 1),
        "row_bytes": round(float(4 + 7 * distinct.mean())),
        "count_ms": round(1000 * seconds / len(chunks), 3),
    }


@dataclass
class Index:
    """One tenant's chunks, written a document at a time as the scales ask."""

    tenant: str
    documents: list[list[str]]
    option: Option | None = None  # None: the analysis as it is (English)
    written: int = 0
    seconds: float = 0.0
    memory: int = 0
    number: int = 0

    def grow(self, connection: redis.Redis, chunks: int) -> None:
        with analysing(self.option) if self.option else contextlib.nullcontext():
            while self.written < chunks:
                texts = self.documents[self.number]
                before = int(connection.info("memory")["used_memory"])
                started = time.perf_counter()
                search_quality.index_document(connection, self.number, texts, self.tenant)
                self.seconds += time.perf_counter() - started
                self.memory += int(connection.info("memory")["used_memory"]) - before
                self.written += len(texts)
                self.number += 1

    def rows(self, questions: list[str]) -> list[SparseRows]:
        with analysing(self.option) if self.option else contextlib.nullcontext():
            return [TERMS.count_query(q) for q in questions]


def timed(
    connection: redis.Redis, asked: list[tuple[Index, list[SparseRows]]]
) -> list[dict[str, float]]:
    """Each index's questions through the search script (k = K): one unmeasured pass, then
    REPEATS passes, the indexes in turn within each pass, so that a busy moment of the machine
    falls on both; per question the best of its passes."""
    retriever = retrieval.Retriever(connection)
    best = [[float("inf")] * len(rows) for _, rows in asked]
    found: list[list[retrieval.Found]] = [[] for _ in asked]
    for attempt in range(REPEATS + 1):
        for i, (index, rows) in enumerate(asked):
            for j, row in enumerate(rows):
                started = time.perf_counter()
                answer = retriever.lexical(index.tenant, row, K)
                if attempt:
                    best[i][j] = min(best[i][j], time.perf_counter() - started)
                else:
                    found[i].append(answer)
    figures = []
    for (index, rows), seconds, answers in zip(asked, best, found):
        ms = sorted(1000 * s for s in seconds)
        figures.append(
            {
                "chunks": index.written,
                "redis_bytes_per_chunk": round(index.memory / index.written),
                "index_ms_per_chunk": round(1000 * index.seconds / index.written, 3),
                "median_ms": round(statistics.median(ms), 2),
                "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2),
                "mean_ms": round(statistics.fmean(ms), 2),
                "median_query_terms": statistics.median(
                    len(retrieval.query_terms(row)) for row in rows
                ),
                "median_chunks_scored": statistics.median(a.scored for a in answers),
                "exact_share": round(sum(a.exact for a in answers) / len(answers), 3),
            }
        )
    return figures


def costs(
    connection: redis.Redis,
    options: list[Option],
    english: tuple[list[list[str]], list[str]],
    chinese: tuple[list[list[str]], list[str]],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Per chunk and per query, English and each option, at each of SCALES; the English
    questions timed beside each option's Chinese ones."""
    en = Index("en", english[0])
    zh = [Index(f"zh{i}", chinese[0], option) for i, option in enumerate(options)]
    found: dict[str, Any] = {"en": {"per_chunk": per_chunk([c for d in en.documents for c in d])}}
    for index in zh:
        assert index.option is not None
        with analysing(index.option):
            found[index.option.name] = {
                "per_chunk": per_chunk([c for d in index.documents for c in d])
            }
    en_rows = en.rows(english[1])
    for scale in SCALES:
        log(f"cost: writing {scale:,} chunks of each")
        for index in (en, *zh):
            index.grow(connection, scale)
        for index in zh:
            assert index.option is not None
            log(f"cost: {index.option.name}, {scale:,} chunks: timing")
            english_figures, chinese_figures = timed(
                connection, [(en, en_rows), (index, index.rows(chinese[1]))]
            )
            found[index.option.name][str(scale)] = {
                **chinese_figures,
                "en_median_ms": english_figures["median_ms"],
                "zh_en_median_ratio": round(
                    chinese_figures["median_ms"] / english_figures["median_ms"], 2
                ),
            }
            found["en"].setdefault(str(scale), []).append(english_figures)
    return found


def grouped(
    titles: dict[int, str], judged: dict[str, dict[int, int]], size: int
) -> tuple[list[tuple[int, str]], dict[str, dict[int, int]]]:
    """The titles put together in chunks of ~`size` characters (a title a line, seeded order),
    and each query's gain for a chunk: the best label among its titles."""
    order = sorted(titles)
    random.Random(SEED).shuffle(order)
    chunks: list[tuple[int, str]] = []
    owner: dict[int, int] = {}
    lines: list[str] = []
    for title in order:
        owner[title] = len(chunks)
        lines.append(titles[title])
        if sum(map(len, lines)) + len(lines) >= size or title == order[-1]:
            chunks.append((len(chunks), "\n".join(lines)))
            lines = []
    gains: dict[str, dict[int, int]] = {}
    for qid, labels in judged.items():
        gains[qid] = {}
        for title, label in labels.items():
            chunk = owner[title]
            gains[qid][chunk] = max(gains[qid].get(chunk, 0), label)
    return chunks, gains


def quality(
    options: list[Option], queries: int | None, log: Callable[[str], None]
) -> dict[str, Any]:
    """Each option's figures on KUAKE-QTR through Intake's path (bench.search_quality_zh), with
    bm25s on the collection's bigrams (the ratios' baseline) and on jieba's words beside."""
    titles, asked, judged = search_quality_zh.load(search_quality_zh.collection_dir())
    if queries:
        asked = random.Random(SEED).sample(asked, queries)
    chunks = search_quality.chunks_of(titles, Settings())

    def by(gains: dict[str, dict[int, int]]) -> Callable[[Callable[[str], list[int]]], Any]:
        return lambda search: search_quality.score(
            search, asked, gains, search_quality_zh.RELEVANT_FROM
        )

    scored = by(judged)
    baseline = scored(search_quality_zh.bm25s_side(chunks))
    found: dict[str, Any] = {"queries": len(asked), "bm25s_bigrams": baseline}
    if available(OPTIONS["jieba"]):
        found["bm25s_jieba"] = scored(
            search_quality_zh.bm25s_side(chunks, search_quality_zh.jieba_words)
        )
    together = {size: grouped(titles, judged, size) for size in GROUPED}
    for size, (texts, gains) in together.items():
        found[f"bm25s_bigrams_in_{size}"] = by(gains)(search_quality_zh.bm25s_side(texts))
    for option in options:
        log(f"quality: {option.name}")
        with analysing(option):
            measured = search_quality.measured_intake(
                chunks, scored, search_quality_zh.TENANT, search_quality.RECALL_AT
            )
            found[option.name] = search_quality.against(measured, baseline)
            del found[option.name]["bm25s"]
            for size, (texts, gains) in together.items():
                found[option.name][f"in_{size}"] = search_quality.measured_intake(
                    texts, by(gains), search_quality_zh.TENANT, search_quality.RECALL_AT
                )["intake"]
        log(json.dumps(found[option.name]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--options", default=",".join(OPTIONS), help="comma-separated names")
    parser.add_argument("--queries", type=int, default=0, help="a seeded sample (0: all)")
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--no-cost", action="store_true")
    args = parser.parse_args(argv)
    # Stopped by a signal, the servers of this run are stopped too (their `finally`).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def log(message: str) -> None:
        print(f"[cjk] {message}", file=sys.stderr, flush=True)

    chosen = [OPTIONS[n] for n in args.options.split(",")]
    for option in chosen:
        if not available(option):
            log(f"{option.name}: {option.needs} is not installed: skipped")
    chosen = [o for o in chosen if available(o)]
    settings = Settings()
    rng = random.Random(SEED)
    english, english_questions = english_units()
    chinese, chinese_questions = chinese_units(english_questions, rng)
    en_docs = documents(english, SCALES[-1], settings, SEED)
    zh_docs = documents(chinese, SCALES[-1], settings, SEED)
    report: dict[str, Any] = {
        "questions": {
            "en": len(english_questions),
            "zh": len(chinese_questions),
            "en_median_chars": statistics.median(map(len, english_questions)),
            "zh_median_chars": statistics.median(map(len, chinese_questions)),
        },
        "options": {o.name: o.says for o in chosen},
        "jieba_load": jieba_load() if any(o.needs == "jieba" for o in chosen) else None,
    }
    if not args.no_cost:
        with tempfile.TemporaryDirectory(prefix="intake-cjk-") as workdir:
            with redis_server(Path(workdir)) as (url, _pid):
                connection = redis.Redis.from_url(url)
                report["cost"] = costs(
                    connection,
                    chosen,
                    (en_docs, english_questions),
                    (zh_docs, chinese_questions),
                    log,
                )
                connection.flushall()
                log(json.dumps(report["cost"]))
    if not args.no_quality:
        report["quality"] = quality(chosen, args.queries or None, log)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
