"""`python -m bench.knowledge_base` (`make bench-scale`): the knowledge base at a million chunks.

Figures (docs/architecture.md §11, §12), each measured in this one run:
- kb_search_growth_ratio: median GET /api/search latency in a tenant of 1,000,000 chunks ÷ in
  a tenant of 10,000, the same two-word query shape as bench.search (one word in ~60 % of the
  chunks, one in ~7 %), in interleaved rounds (AB, BA, …) on the same server.
- kb_web_rss_growth_mb: the growth of the web process's resident memory (the largest of the
  Procfile's gunicorn workers) from an empty knowledge base, warmed by a few searches, to
  1,010,000 chunks and 100 more searches.
- kb_search_during_ingest_ratio: median search latency at 1,000,000 chunks while 20 large
  documents (~1,000 chunks each, ~750 KB of text) are ingested by 2 real workers into the same
  tenant ÷ idle (idle measured before and after, pooled).
- time_to_searchable_s: median seconds from seeing a task `succeeded` (polling it every 10 ms)
  to finding its unique marker word by search, over 10 documents.
- search_exact_share: the share of EXACT_QUERIES searches (k = 10) at 1,000,000 chunks that
  answer `"exact": true`, the true top 10 of BM25: queries of 1–4 words whose ranks in the
  vocabulary are drawn log-uniformly (as many from ranks 10–100, words in 7–60 % of the
  chunks, as from ranks 1,000–10,000), from a fixed seed; each inexact answer's top 10 is
  compared with the exact one (asked with no budget, through the script itself) and the
  smallest overlap reported.

Then, on a redis-server of its own, bench.search_scale: the search script beside tantivy at a
million chunks of English and of Chinese (search_p95_ratio_tantivy_en/_zh, search_max_call_ms,
ping_p99_ms_under_search; its docstring). `--only kb` or `--only search` runs one part;
`--chunks N` (INTAKE_BENCH_SCALE_CHUNKS) sizes both to the machine, the goals being judged at
1,000,000 only (`--help`).

The server is the Procfile's `web:` line as written (bench.servers.procfile_web) with API keys
for the tenants; workers are production `rq worker` processes (bench.servers.workers). The two
big knowledge bases are written directly with `jobs.kb.index.write` (bench.corpus): the staging and
flip the pipeline's last step makes, from 2 processes; the during-ingest figure indexes through
the workers. Prints progress on stderr, then one table of both parts' figures, then one JSON
line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np
import redis
import requests

from bench import corpus, measure, search_scale
from bench.servers import procfile_web, redis_server, workers

SMALL, LARGE = 10_000, 1_000_000
KEYS = {"small": "bench-small-key-0000000001", "large": "bench-large-key-0000000001"}
ROUNDS, PER_ROUND, WARMUP = 20, 10, 10
RSS_SEARCHES = 100
INGEST_DOCUMENTS, INGEST_CHUNKS = 20, 1000
IDLE_SEARCHES = 60
MARKERS = 10
EXACT_QUERIES = 200

GOALS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "kb_search_growth_ratio": ("<= 3", lambda v: v <= 3.0),
    "kb_search_during_ingest_ratio": ("<= 1.5", lambda v: v <= 1.5),
    "kb_web_rss_growth_mb": ("<= 200", lambda v: v <= 200.0),
    "time_to_searchable_s": ("<= 1", lambda v: v <= 1.0),
    "search_exact_share": (">= 0.99", lambda v: v >= 0.99),
}


def log(message: str) -> None:
    print(f"[bench-scale] {message}", file=sys.stderr, flush=True)


def _session(tenant: str) -> requests.Session:
    s = measure.session()
    s.headers["Authorization"] = f"Bearer {KEYS[tenant]}"
    return s


def _search_url(base: str, query: str, k: int = 10) -> str:
    return f"{base}/api/search?{urlencode({'q': query, 'k': k})}"


def worker_rss_mb(master_pid: int) -> float:
    """The largest resident set of the gunicorn master's worker processes, in MB."""
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    sizes = []
    for pid in children:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                sizes.append(int(line.split()[1]) / 1024)
    return max(sizes)


def _query() -> str:
    words = corpus.WORDS
    return f"{words[10]} {words[150]}"  # in ~60 % and ~7 % of the chunks at 110 words


def growth(base: str) -> dict[str, Any]:
    small, large = _session("small"), _session("large")
    url = _search_url(base, _query())
    for answer in (small.get(url, timeout=30).json(), large.get(url, timeout=30).json()):
        if len(answer["results"]) != 10:
            raise RuntimeError(f"a search found {len(answer['results'])} results")
    exact = {
        t: s.get(url, timeout=30).json()["exact"] for t, s in (("small", small), ("large", large))
    }
    figures = measure.latency_ratio(
        (large, url), (small, url), warmup=WARMUP, rounds=ROUNDS, per_round=PER_ROUND
    )
    small.close()
    large.close()
    return {**figures, "exact": exact}


def _document(n: int, nonce: str, rng: np.random.Generator) -> tuple[str, bytes, str]:
    ids = corpus.word_ids(rng, INGEST_CHUNKS * 4 // 3)  # a line of 110 words: ~750 characters
    text = "\n\n".join(corpus.texts_of(ids))
    return f"large-{nonce}-{n}.txt", text.encode(), "text/plain"


def exact_queries(seed: int = 17) -> list[str]:
    """EXACT_QUERIES queries of 1–4 words, their vocabulary ranks log-uniform."""
    return corpus.short_queries(seed, EXACT_QUERIES)


def exact_share(base: str, redis_url: str) -> dict[str, Any]:
    """How many searches of the large tenant are exact; the inexact ones against the truth."""
    from jobs.kb.retrieval import Retriever
    from jobs.text.terms import TERMS

    session, latencies, exact, overlaps = _session("large"), [], 0, []
    connection = redis.Redis.from_url(redis_url)
    unbounded = Retriever(connection, budget=10**9)
    for query in exact_queries():
        started = time.perf_counter()
        answer = session.get(_search_url(base, query), timeout=60).json()
        latencies.append(time.perf_counter() - started)
        if answer["exact"]:
            exact += 1
            continue
        truth = unbounded.lexical("large", TERMS.count_query(query), 10).hits
        got = {(h["document_id"], h["chunk"]) for h in answer["results"]}
        overlaps.append(len(got & {(h["document_id"], h["chunk"]) for h in truth}) / 10)
    session.close()
    connection.close()
    return {
        "share": exact / EXACT_QUERIES,
        "median_ms": 1000 * float(np.median(latencies)),
        "p95_ms": 1000 * float(np.percentile(latencies, 95)),
        "max_ms": 1000 * max(latencies),
        "inexact": len(overlaps),
        "least_overlap": min(overlaps, default=1.0),
    }


def during_ingest(base: str, connection: redis.Redis, nonce: str) -> dict[str, Any]:
    s = _session("large")
    url = _search_url(base, _query())
    measure.get_latencies(s, url, WARMUP)
    before = measure.get_latencies(s, url, IDLE_SEARCHES)
    rng = np.random.default_rng(5)
    files = [("files", _document(n, nonce, rng)) for n in range(INGEST_DOCUMENTS)]
    uploader = _session("large")
    answer = uploader.post(f"{base}/api/documents", files=files, timeout=120)
    if answer.status_code != 202:
        raise RuntimeError(f"the upload answered {answer.status_code}: {answer.text[:300]}")
    batch_url = f"{base}{answer.json()['url']}"
    during: list[float] = []
    started = time.perf_counter()
    deadline = started + 600
    while True:
        during += measure.get_latencies(s, url, 5)
        batch = uploader.get(batch_url, timeout=30).json()
        if batch["status"] not in ("pending", "running"):
            break
        if time.perf_counter() > deadline:
            raise RuntimeError("the 20 documents did not finish in 10 minutes")
    ingest_seconds = time.perf_counter() - started
    if batch["counts"]["succeeded"] != INGEST_DOCUMENTS:
        raise RuntimeError(f"ingest ended {batch['counts']}")
    chunks = sum(t["result"]["chunks"] for t in batch["tasks"])
    after = measure.get_latencies(s, url, IDLE_SEARCHES)
    s.close()
    uploader.close()
    idle = before + after
    return {
        "ratio": measure.median(during) / measure.median(idle),
        "idle_ms": 1000 * measure.median(idle),
        "during_ms": 1000 * measure.median(during),
        "before_ms": 1000 * measure.median(before),
        "after_ms": 1000 * measure.median(after),
        "searches_during": len(during),
        "ingest_seconds": ingest_seconds,
        "chunks_ingested": chunks,
    }


def time_to_searchable(base: str, nonce: str) -> dict[str, Any]:
    s = _session("large")
    delays = []
    for n in range(MARKERS):
        marker = f"zq{nonce}mark{n}"
        body = f"A short note that carries one marker word: {marker}.\n".encode()
        answer = s.post(
            f"{base}/api/documents",
            files=[("files", (f"marker-{nonce}-{n}.txt", body, "text/plain"))],
            timeout=30,
        )
        task_url = f"{base}{answer.json()['tasks'][0]['url']}"
        deadline = time.perf_counter() + 60
        while s.get(task_url, timeout=30).json()["status"] != "succeeded":
            if time.perf_counter() > deadline:
                raise RuntimeError("a marker document did not succeed in 60 s")
            time.sleep(0.01)
        seen = time.perf_counter()
        url = _search_url(base, marker, 1)
        while not s.get(url, timeout=30).json()["results"]:
            if time.perf_counter() > seen + 30:
                raise RuntimeError("a succeeded marker document was not found in 30 s")
            time.sleep(0.01)
        delays.append(time.perf_counter() - seen)
    s.close()
    return {"median_s": measure.median(delays), "max_s": max(delays)}


def memory_searches(base: str) -> None:
    rng = np.random.default_rng(9)
    for tenant in ("small", "large"):
        s = _session(tenant)
        for _ in range(RSS_SEARCHES // 2):
            a, b = rng.integers(0, 2000, size=2)
            s.get(_search_url(base, f"{corpus.WORDS[a]} {corpus.WORDS[b]}"), timeout=30)
        s.close()


def run(large: int = LARGE) -> dict[str, Any]:
    nonce = uuid.uuid4().hex[:8]
    keys = ",".join(f"{tenant}:{key}" for tenant, key in KEYS.items())
    with tempfile.TemporaryDirectory(prefix="intake-bench-scale-") as tmp:
        workdir = Path(tmp)
        with (
            redis_server(workdir) as (redis_url, _redis_pid),
            procfile_web(redis_url, workdir, {"INTAKE_API_KEYS": keys}) as (base, pid, _),
        ):
            connection = redis.Redis.from_url(redis_url)
            for tenant in KEYS:  # the empty knowledge base, warmed: scripts loaded, pools open
                s = _session(tenant)
                measure.get_latencies(s, _search_url(base, _query()), 20)
                s.close()
            rss_empty = worker_rss_mb(pid)
            log(f"writing {SMALL:,} and {large:,} chunks (jobs.kb.index.write, 2 processes)")
            built = {
                "small_s": corpus.build(redis_url, "small", SMALL).seconds,
                "large_s": corpus.build(redis_url, "large", large).seconds,
            }
            redis_mb = connection.info("memory")["used_memory"] / 2**20
            log(f"search latency: {ROUNDS} interleaved rounds x {PER_ROUND} per side")
            grown = growth(base)
            log(f"exact share: {EXACT_QUERIES} queries of 1-4 words at {large:,} chunks")
            exactness = exact_share(base, redis_url)
            memory_searches(base)
            rss_full = worker_rss_mb(pid)
            with workers(redis_url, 2, workdir, prefix="scale"):
                log(
                    f"search while {INGEST_DOCUMENTS} documents of ~{INGEST_CHUNKS} chunks are "
                    "ingested by 2 workers"
                )
                ingest = during_ingest(base, connection, nonce)
                log(f"time to searchable: {MARKERS} marker documents")
                searchable = time_to_searchable(base, nonce)
            connection.close()
    return {
        "growth": grown,
        "ingest": ingest,
        "searchable": searchable,
        "built": built,
        "exactness": exactness,
        "rss_empty_mb": rss_empty,
        "rss_full_mb": rss_full,
        "redis_mb": redis_mb,
        "large": large,
    }


def figures_of(found: dict[str, Any]) -> dict[str, Any]:
    grown, ingest, searchable = found["growth"], found["ingest"], found["searchable"]
    return {
        "kb_search_growth_ratio": round(grown["ratio"], 4),
        "kb_search_during_ingest_ratio": round(ingest["ratio"], 4),
        "kb_web_rss_growth_mb": round(found["rss_full_mb"] - found["rss_empty_mb"], 1),
        "time_to_searchable_s": round(searchable["median_s"], 4),
        "search_exact_share": round(found["exactness"]["share"], 4),
    }


def print_context(found: dict[str, Any]) -> None:
    grown, ingest, searchable = found["growth"], found["ingest"], found["searchable"]
    large = found["large"]
    print(
        f"search: median {grown['subject_ms']:.2f} ms at {large:,} chunks vs "
        f"{grown['baseline_ms']:.2f} ms at {SMALL:,} (q={_query()}; exact top 10: "
        f"{grown['exact']}); per-round ratios q1/median/q3 "
        + "/".join(f"{v:.2f}" for v in grown["round_ratios"])
    )
    print(
        f"index written in {found['built']['small_s']:.1f} s ({SMALL:,}) and "
        f"{found['built']['large_s']:.1f} s ({large:,}); Redis used "
        f"{found['redis_mb']:.0f} MB"
    )
    print(
        f"web worker RSS: {found['rss_empty_mb']:.1f} MB empty, {found['rss_full_mb']:.1f} MB "
        f"after {large + SMALL:,} chunks and {RSS_SEARCHES} searches"
    )
    print(
        f"during ingest: median {ingest['during_ms']:.2f} ms over {ingest['searches_during']} "
        f"searches while {ingest['chunks_ingested']:,} chunks were ingested in "
        f"{ingest['ingest_seconds']:.1f} s, vs idle {ingest['idle_ms']:.2f} ms (before "
        f"{ingest['before_ms']:.2f}, after {ingest['after_ms']:.2f})"
    )
    exactness = found["exactness"]
    print(
        f"exact share: {exactness['share']:.3f} of {EXACT_QUERIES} queries at {large:,} "
        f"chunks; latency median {exactness['median_ms']:.1f} ms, p95 "
        f"{exactness['p95_ms']:.1f} ms, max {exactness['max_ms']:.1f} ms; "
        f"{exactness['inexact']} inexact, whose top 10 held at least "
        f"{exactness['least_overlap']:.0%} of the exact top 10"
    )
    print(
        f"time to searchable: median {searchable['median_s']:.3f} s, max "
        f"{searchable['max_s']:.3f} s over {MARKERS} documents"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    search_scale.arguments(parser)
    parser.add_argument(
        "--only",
        choices=("kb", "search"),
        help="one part: this module's figures (kb) or bench.search_scale's (search)",
    )
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    goals: dict[str, tuple[str, Callable[[float], bool]]] = {}
    reported: tuple[str, ...] = ()
    printers: list[Callable[[], None]] = []
    full_scale = True
    if args.only != "search":
        found = run(args.chunks)
        figures |= figures_of(found)
        goals |= GOALS
        printers.append(lambda: print_context(found))
        full_scale &= args.chunks >= LARGE
    if args.only != "kb":
        chunks, cap = search_scale.scale_of(args)
        scaled = search_scale.run(chunks, cap, args.queries, args.ping_seconds)
        found_figures = search_scale.figures_of(scaled)
        figures |= found_figures
        goals |= search_scale.GOALS
        reported = search_scale.REPORTED
        printers.append(lambda: search_scale.print_context(scaled))
        full_scale &= search_scale.at_full_scale(found_figures)
    measure.print_table(figures, goals, reported)
    for printer in printers:
        printer()
        print()
    if not full_scale:
        print(f"measured below {LARGE:,} chunks: the goals are judged at {LARGE:,}")
    met = measure.goals_met(figures, goals) and full_scale
    print(json.dumps({**figures, "goals_met": met}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
