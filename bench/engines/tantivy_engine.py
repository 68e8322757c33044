"""`python -m bench.engines.tantivy_engine`: tantivy (the Rust engine's Python binding) as the
knowledge base's lexical index, on the data Intake's benches use. Prints one JSON line.

Why: tantivy is a library, not a service: BM25 (k1 1.2, b 0.75) over an on-disk, mmap'ed
index, top-k by block-max WAND, i.e. exact. Whether it would beat the Redis index on quality,
latency and memory is what these figures say.

- CISI (bench.search_quality's loader, chunking and metrics): nDCG@10 and Recall@50, a document
  ranked by its best chunk among the top 200, with the `en_stem` analyzer (lower case, Snowball
  English stemming, no stop words) and with stop words removed too (`en_stem_stop`). A query
  is the OR of its analyzed terms, each boosted by its count in the query, as BM25 and bm25s
  count them; `/parser` rows use tantivy's query parser instead, which keeps a term once (on
  CISI's long queries, where words repeat, that alone costs ~0.04 nDCG@10).
- 1,000,000 chunks (bench.corpus, as bench.corpus.build writes them): indexing seconds with one
  IndexWriter (its own threads: `--threads`, 0 = tantivy's choice), index size on disk; then, in
  a fresh process that opens the index as a reader would (`--search DIR`): latency of
  bench.knowledge_base.exact_queries() (200 queries, top 10, the stored hits fetched), a first
  pass and a warm one, the same without fetching the stored hits, the two-word query's median,
  queries a second from 1 and 2 threads, the process's resident memory (anonymous and
  mmap'ed file pages apart), and a check that the top 10 equals that of an unpruned search
  (limit = every chunk) on 20 queries.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import engines, search_quality

try:
    import tantivy
except ImportError:
    tantivy = None

HEAP = 1_000_000_000  # the writer's heap, split between its threads


def schema(analyzer: str):
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=True, tokenizer_name=analyzer, index_option="freq")
    builder.add_unsigned_field("document", stored=True)
    builder.add_unsigned_field("chunk", stored=True)
    return builder.build()


def analyzer(stop_words: bool):
    """`en_stem` as tantivy builds it (simple, remove_long 40, lowercase, English stemmer),
    optionally with tantivy's English stop words (Lucene's list) before stemming."""
    builder = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
    )
    if stop_words:
        builder = builder.filter(tantivy.Filter.stopword("english"))
    return builder.filter(tantivy.Filter.stemmer("english")).build()


ANALYZERS = {"en_stem": False, "en_stem_stop": True}


def open_index(name: str, path: str | None = None):
    index = tantivy.Index(schema(name), path=path) if path else tantivy.Index(schema(name))
    index.register_tokenizer("en_stem_stop", analyzer(True))
    return index


def searching(index, name: str, parser: bool = False):
    """A query's terms OR-ed, each weighted by how often it occurs in the query, as BM25 (and
    bm25s) weigh them; with `parser`, tantivy's query parser, which keeps each term once."""
    terms = analyzer(ANALYZERS[name])
    schema = index.schema

    def query(text: str):
        if parser:
            return index.parse_query(engines.words_only(text) or "nothingatall", ["text"])
        counts = collections.Counter(terms.analyze(text))
        if not counts:
            return tantivy.Query.empty_query()
        return tantivy.Query.boolean_query(
            [
                (
                    tantivy.Occur.Should,
                    tantivy.Query.boost_query(
                        tantivy.Query.term_query(schema, "text", term), float(count)
                    ),
                )
                for term, count in counts.items()
            ]
        )

    return query


def quality(name: str, parser: bool) -> dict[str, float]:
    chunks, queries, relevant = engines.cisi()
    index = open_index(name)
    query = searching(index, name, parser)
    writer = index.writer(HEAP)
    for n, (document, text) in enumerate(chunks):
        writer.add_document(tantivy.Document(text=text, document=document, chunk=n))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def search(text: str) -> list[int]:
        hits = searcher.search(query(text), search_quality.RANKED, count=False).hits
        return search_quality.documents_of(searcher.doc(a)["document"][0] for _, a in hits)

    found = search_quality.score(search, queries, relevant)
    return {k: round(v, 4) for k, v in found.items()}


def build(folder: Path, chunks: int, threads: int) -> dict[str, float]:
    started = time.perf_counter()
    documents = list(engines.million(chunks))
    generated = time.perf_counter() - started
    index = open_index("en_stem", str(folder))
    started = time.perf_counter()
    writer = index.writer(HEAP, threads)
    n = 0
    for document, texts in documents:
        for text in texts:
            writer.add_document(tantivy.Document(text=text, document=document, chunk=n))
            n += 1
    writer.commit()
    committed = time.perf_counter() - started
    writer.wait_merging_threads()
    merged = time.perf_counter() - started
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return {
        "chunks": n,
        "generate_s": round(generated, 1),
        "index_s": round(committed, 1),
        "index_and_merge_s": round(merged, 1),
        "chunks_per_s": round(n / committed),
        "disk_mb": round(size / 2**20, 1),
        "writer_threads": threads,
        "writer_heap_mb": HEAP // 2**20,
    }


def search_side(folder: str) -> dict[str, object]:
    """In a process of its own: open the index, search, report latency and memory."""
    started = time.perf_counter()
    index = open_index("en_stem", folder)
    searcher = index.searcher()
    query = searching(index, "en_stem")
    opened = time.perf_counter() - started
    fresh = engines.rss_mb()

    def search(text: str) -> list[dict]:
        hits = searcher.search(query(text), 10, count=False).hits
        return [searcher.doc(a).to_dict() for _, a in hits]

    asked = engines.queries()
    first = engines.timed(search, asked)
    warm = engines.timed(search, asked)
    two = engines.two_word_query()
    engines.timed(search, [two] * 10)
    two_word = engines.timed(search, [two] * 100)
    memory = engines.rss_mb()
    bare = engines.timed(lambda t: searcher.search(query(t), 10, count=False), asked)
    bare_two = engines.timed(lambda t: searcher.search(query(t), 10, count=False), [two] * 100)
    rates = {}
    for threads in (1, 2):  # does searching release the GIL: queries a second, 1 vs 2 threads
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            started = time.perf_counter()
            list(pool.map(search, asked * 3))
            rates[threads] = round(3 * len(asked) / (time.perf_counter() - started))
    same = 0
    for text in asked[:20]:  # unpruned: a limit of every chunk leaves WAND no threshold
        top = [round(s, 4) for s, _ in searcher.search(query(text), 10, count=False).hits]
        every = searcher.search(query(text), searcher.num_docs, count=False).hits[:10]
        same += top == [round(s, 4) for s, _ in every]
    return {
        "open_s": round(opened, 3),
        "segments": searcher.num_segments,
        "queries_first_pass": engines.summary(first),
        "queries_warm": engines.summary(warm),
        "two_word_median_ms": engines.summary(two_word)["median_ms"],
        "queries_without_fetch": engines.summary(bare),
        "two_word_without_fetch_median_ms": engines.summary(bare_two)["median_ms"],
        "queries_per_s_by_threads": rates,
        "rss_mb_opened": fresh,
        "rss_mb_after_searches": memory,
        "top10_equal_unpruned": f"{same}/20",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=engines.MILLION)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--no-scale", action="store_true")
    parser.add_argument("--search", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if tantivy is None:
        print(json.dumps({"skipped": "the tantivy package is not installed (pip install tantivy)"}))
        return
    if args.search:
        print(json.dumps(search_side(args.search)))
        return
    figures: dict[str, object] = {"engine": "tantivy", "version": tantivy.__version__}
    if not args.no_quality:
        if engines.cisi() is None:
            figures["cisi"] = f"skipped: no CISI at {search_quality.collection_dir()}"
        else:
            figures["cisi"] = {
                f"{name}{'/parser' if parser else ''}": quality(name, parser)
                for name in ANALYZERS
                for parser in (False, True)
            }
        print(f"[tantivy] {figures['cisi']}", file=sys.stderr, flush=True)
    if not args.no_scale:
        folder = Path(tempfile.mkdtemp(prefix="intake-tantivy-"))
        try:
            figures["scale"] = build(folder, args.chunks, args.threads)
            print(f"[tantivy] {figures['scale']}", file=sys.stderr, flush=True)
            out = subprocess.run(
                [sys.executable, "-m", "bench.engines.tantivy_engine", "--search", str(folder)],
                check=True,
                capture_output=True,
                text=True,
                cwd=engines.ROOT,
            ).stdout
            figures["search"] = json.loads(out.strip().splitlines()[-1])
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
