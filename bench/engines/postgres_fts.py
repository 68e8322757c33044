"""`python -m bench.engines.postgres_fts`: PostgreSQL's full-text search as the knowledge base's
lexical index, on the data Intake's benches use. Prints one JSON line.

Why: Intake already starts a PostgreSQL (pgserver's, for pgvector); the chunks could live
there in a table beside the vectors, written in the same transaction as anything else.
PostgreSQL ranks with ts_rank / ts_rank_cd, not BM25 (no idf), and ranks every row that
matches before ORDER BY … LIMIT: no top-k pruning, so a common word costs a pass over most of
the table.

The table: (document, chunk, text, tsv tsvector GENERATED AS to_tsvector('english', text)
STORED) with a GIN index on tsv. A query is the OR of its terms: plainto_tsquery('english', q)
with its `&` turned into `|` (AND would match almost nothing for CISI's long queries).
- CISI (bench.search_quality's loader, chunking and metrics): nDCG@10 and Recall@50, a document
  ranked by its best chunk among the top 200, for ts_rank_cd and ts_rank, each with
  normalization 0 (none) and 1 (÷ 1 + log length).
- 1,000,000 chunks (bench.corpus, as bench.corpus.build writes them): COPY from one
  connection (tsvectors computed as rows arrive), the GIN index built after, ANALYZE; then
  10 documents of 1,000 chunks COPYed with the index in place (one transaction each), as the
  pipeline would add them; pg_total_relation_size; latency of bench.knowledge_base.
  exact_queries() (200 queries, ORDER BY ts_rank_cd DESC LIMIT 10, texts returned), and the
  two-word query's median (9 runs), with the server's default settings (pgserver's).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import engines, search_quality

try:
    import psycopg

    from runner.postgres_service import LocalPostgres

    if importlib.util.find_spec("pgserver") is None:
        raise ImportError("pgserver")
except ImportError:
    psycopg = None

TABLE = """CREATE TABLE {name} (id bigserial PRIMARY KEY, document bigint NOT NULL,
    chunk int NOT NULL, text text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED)"""
OR_QUERY = "(SELECT replace(plainto_tsquery('english', %(q)s)::text, '&', '|')::tsquery AS q)"
SEARCH = """SELECT document, chunk, text, {rank}(tsv, q{norm}) AS rank
    FROM {name}, {or_query} AS asked WHERE tsv @@ q ORDER BY rank DESC LIMIT %(k)s"""
TIMEOUT_S = 60


def log(message: str) -> None:
    print(f"[postgres-fts] {message}", file=sys.stderr, flush=True)


def load(connection, name: str, rows) -> float:
    started = time.perf_counter()
    with connection.cursor() as cursor:
        with cursor.copy(f"COPY {name} (document, chunk, text) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    return time.perf_counter() - started


def index(connection, name: str) -> float:
    started = time.perf_counter()
    connection.execute("SET maintenance_work_mem = '1GB'")
    connection.execute(f"CREATE INDEX {name}_tsv ON {name} USING gin (tsv)")
    connection.execute(f"ANALYZE {name}")
    return time.perf_counter() - started


def searcher(connection, name: str, rank: str = "ts_rank_cd", norm: int = 0, k: int = 10):
    sql = SEARCH.format(rank=rank, norm=f", {norm}" if norm else "", name=name, or_query=OR_QUERY)

    def search(query: str) -> list[tuple]:
        return connection.execute(sql, {"q": query, "k": k}).fetchall()

    return search


def quality(connection) -> dict[str, dict[str, float]]:
    chunks, queries, relevant = engines.cisi()
    connection.execute(TABLE.format(name="cisi"))
    load(connection, "cisi", ((d, n, text) for n, (d, text) in enumerate(chunks)))
    index(connection, "cisi")
    found = {}
    for rank in ("ts_rank_cd", "ts_rank"):
        for norm in (0, 1):
            search = searcher(connection, "cisi", rank, norm, search_quality.RANKED)
            scored = search_quality.score(  # calls the lambda here, with this `search`
                lambda q: search_quality.documents_of(r[0] for r in search(q)),  # noqa: B023
                queries,
                relevant,
            )
            found[f"{rank}/{norm}"] = {k: round(v, 4) for k, v in scored.items()}
    return found


def scale(connection, chunks: int, budget: float) -> dict[str, object]:
    connection.execute(TABLE.format(name="kb"))
    started = time.perf_counter()
    documents = list(engines.million(chunks))
    generated = time.perf_counter() - started
    rows = ((d, n, text) for d, texts in documents for n, text in enumerate(texts))
    copied = load(connection, "kb", rows)
    log(f"COPY {chunks:,} chunks: {copied:.0f} s")
    indexed = index(connection, "kb")
    log(f"GIN index + ANALYZE: {indexed:.0f} s")
    extra = engines.million(10 * engines.PER_DOCUMENT)
    started = time.perf_counter()
    for d, texts in extra:
        load(connection, "kb", ((10**6 + d, n, t) for n, t in enumerate(texts)))
    added = time.perf_counter() - started
    connection.execute("VACUUM ANALYZE kb")
    sizes = connection.execute(
        "SELECT pg_total_relation_size('kb'), pg_relation_size('kb'), "
        "pg_relation_size('kb_tsv'), (SELECT count(*) FROM kb), "
        "current_setting('shared_buffers'), current_setting('max_parallel_workers_per_gather')"
    ).fetchone()
    log(f"sizes {sizes}")
    connection.execute(f"SET statement_timeout = '{TIMEOUT_S}s'")
    search = searcher(connection, "kb")
    two = engines.two_word_query()
    engines.timed(search, [two])
    two_word = engines.timed(search, [two] * 9)
    log(f"two-word median {engines.summary(two_word)}")
    plan = connection.execute(
        "EXPLAIN (ANALYZE, BUFFERS) "
        + SEARCH.format(rank="ts_rank_cd", norm="", name="kb", or_query=OR_QUERY),
        {"q": two, "k": 10},
    ).fetchall()
    timeouts, seconds, begun = 0, [], time.perf_counter()
    for query in engines.queries():
        if time.perf_counter() - begun > budget:
            break
        started = time.perf_counter()
        try:
            search(query)
        except psycopg.errors.QueryCanceled:
            timeouts += 1
        seconds.append(time.perf_counter() - started)
    return {
        "chunks": chunks,
        "generate_s": round(generated, 1),
        "copy_s": round(copied, 1),
        "gin_and_analyze_s": round(indexed, 1),
        "bulk_chunks_per_s": round(chunks / (copied + indexed)),
        "incremental_chunks_per_s": round(10 * engines.PER_DOCUMENT / added),
        "total_mb": round(sizes[0] / 2**20),
        "heap_mb": round(sizes[1] / 2**20),
        "gin_mb": round(sizes[2] / 2**20),
        "rows": sizes[3],
        "shared_buffers": sizes[4],
        "max_parallel_workers_per_gather": sizes[5],
        "two_word_median_ms": engines.summary(two_word)["median_ms"],
        "queries": engines.summary(seconds),
        "queries_done": len(seconds),
        f"timeouts_{TIMEOUT_S}s": timeouts,
        "loadavg_after": os.getloadavg(),
        "two_word_plan": [r[0] for r in plan],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=engines.MILLION)
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument(
        "--budget",
        type=float,
        default=1500,
        help="seconds for the 200 queries; the rest are left out, said so",
    )
    parser.add_argument("--no-scale", action="store_true")
    args = parser.parse_args()
    if psycopg is None:
        print(json.dumps({"skipped": "psycopg or pgserver is not installed (requirements.txt)"}))
        return
    folder = Path(tempfile.mkdtemp(prefix="intake-pgfts-"))
    server = LocalPostgres(folder / "data", delete=True)
    try:
        server.start()
        figures: dict[str, object] = {"engine": "postgres-fts", "server": server.description}
        with psycopg.connect(server.url, autocommit=True) as connection:
            if not args.no_quality:
                figures["cisi"] = (
                    quality(connection)
                    if engines.cisi()
                    else f"skipped: no CISI at {search_quality.collection_dir()}"
                )
                log(f"{figures['cisi']}")
            if not args.no_scale:
                figures["scale"] = scale(connection, args.chunks, args.budget)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
