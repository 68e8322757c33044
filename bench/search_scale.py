"""`python -m bench.search_scale`: Intake's lexical search at a million chunks of English and of
Chinese, beside tantivy on the same chunks (issue 40). `make bench-scale` runs it after
bench.knowledge_base's figures (`python -m bench.knowledge_base`), on a redis-server of its own.

What it builds, in a redis-server of its own (nothing else of Intake runs: HTTP is left out on
both sides):
- tenant `en`: N chunks (1,000,000 by default) of ~1,000 characters, 170 words each of
  bench.search's Zipf-like vocabulary (bench.corpus); tenant `zh`: N chunks of ~1,000
  characters of words from jieba's dictionary, drawn by frequency (bench.chinese). Both are
  written with `jobs.kb.index.write` from 2 processes (bench.corpus.build), in steps (10k, 20k,
  50k, 100k, …), Redis's used_memory read after each, so that the memory a language costs can
  be projected past what this machine holds. A build stops at a cap of Redis memory
  (`--max-redis-gb`; by default 60 % of the memory available at the start) and the run goes on
  with the chunks written.
- per language, a tantivy index (tantivy-py, in a temporary directory; one writer of 2 threads,
  its merges waited for) of the same chunk texts, positions not indexed (index_option
  "freq": Intake keeps none). English through tantivy's `en_stem` analyzer (lower case,
  Snowball English stems); Chinese pre-tokenised into the terms Intake indexes of it (each
  character, each pair of neighbouring characters between two marks: a character-bigram
  tokenizer plus single characters), space-separated, through tantivy's `whitespace`
  tokenizer, the query likewise into the pairs Intake searches by: both engines read the same
  terms.

Queries, k = 10, fixed seeds, per language: `short`, 300 queries of 1–4 words whose frequency
ranks are drawn log-uniformly (as bench.knowledge_base.exact_queries); `question`, 300
sentences (English: 8–20 words drawn by frequency; Chinese: 20–60 characters, clauses of
dictionary words by their part of speech); `worst`, 20 pasted paragraphs (English: 1,000
characters, a chunk's text; Chinese: 128 characters).

How each side is timed, one query at a time, Intake then tantivy for each query (the drift of a
shared machine falls on both alike), after 20 warm-up queries a language:
- Intake: the search script's time inside Redis. SLOWLOG logs every command during the run
  (slowlog-log-slower-than 0); it is reset before each `Retriever.lexical` call and read after
  it, and the search's time is the sum of its EVALSHA durations (a search is one call, or
  several of at most CALL_BUDGET chunks scored). The query's terms are counted before (not
  timed). The client's time of the same call (loopback TCP, the reply parsed) is printed too.
- tantivy: `index.parse_query` and `searcher.search(query, 10, count=False)`, the query's
  analysis included (English: lower case, punctuation out; Chinese: its pairs). count=False:
  no count of every match, which would visit them all; Intake counts none either.

Figures:
- search_p95_ratio_tantivy_en, _zh (goal ≤ 2): p95 of Intake's script time ÷ p95 of tantivy's,
  the larger of the two shapes (short, question).
- search_max_call_ms (goal ≤ 10): the longest single EVALSHA of the search script among every
  search run alone (all three shapes, both languages).
- ping_p99_ms_under_search (goal ≤ 20): p99 of PING round trips from one more client (a PING,
  then 1 ms of sleep, again, for 20 s and at least 50 pings, at most 100 s) while 8 processes,
  4 a language, run the `worst` queries in a loop on the same Redis. A PING that arrives
  during a script waits for it, and may wait for other searchers' calls that Redis's event
  loop serves first.
Reported beside them: chunks written, Redis used_memory per chunk and projected to 1,000,000
chunks per language, build rates, the longest write call, tantivy's build time and size, the
share of Intake's answers that are exact, and how much of tantivy's top 10 Intake's holds.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import redis

from bench import chinese, corpus, measure
from bench.servers import redis_server

MILLION = 1_000_000
SHORT = QUESTIONS = 300
WORST = 20
WARMUP = 20
CONCURRENT = 8
PING_SECONDS = 20.0
MIN_PINGS = 50  # the ping goes on past PING_SECONDS (up to 5 times) until it has as many
K = 10
STEPS = (10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000)
LANGUAGES = ("en", "zh")
SHAPES = ("short", "question")
CORPORA = {
    "en": corpus.Corpus("en", 21, 1000, corpus.WORDS_PER_1000_CHARACTERS),
    "zh": corpus.Corpus("zh", 31, 1000),
}
TANTIVY_HEAP = 400_000_000
TANTIVY_THREADS = 2

GOALS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "search_p95_ratio_tantivy_en": ("<= 2", lambda v: v <= 2.0),
    "search_p95_ratio_tantivy_zh": ("<= 2", lambda v: v <= 2.0),
    "search_max_call_ms": ("<= 10", lambda v: v <= 10.0),
    "ping_p99_ms_under_search": ("<= 20", lambda v: v <= 20.0),
}
REPORTED = tuple(
    f"{name}_{language}"
    for name in (
        "chunks",
        "redis_bytes_per_chunk",
        "redis_gb_projected_1m",
        "build_chunks_per_s",
        "build_max_call_ms",
    )
    for language in LANGUAGES
)


def log(message: str) -> None:
    print(f"[search-scale] {message}", file=sys.stderr, flush=True)


def query_sets(language: str, short: int = SHORT, questions: int = QUESTIONS) -> dict[str, list]:
    """The queries of one language, by shape."""
    seed = CORPORA[language].seed
    if language == "en":
        return {
            "short": corpus.short_queries(seed, short),
            "question": corpus.questions(seed + 1, questions),
            "worst": corpus.paragraphs(seed + 2, WORST),
        }
    return {
        "short": chinese.short_queries(seed, short),
        "question": chinese.questions(seed + 1, questions),
        "worst": chinese.long_queries(seed + 2, WORST),
    }


# --- building --------------------------------------------------------------------------------


@dataclass
class Built:
    """One language's knowledge base: chunks and document numbers written, seconds, CPU, the
    memory after each step (chunks, used_memory bytes over the empty tenant, keys)."""

    language: str
    target: int
    chunks: int = 0
    numbers: list[int] = field(default_factory=list)
    seconds: float = 0.0
    client_cpu_s: float = 0.0
    redis_cpu_s: float = 0.0
    steps: list[tuple[int, int, int]] = field(default_factory=list)
    full: bool = False
    bulk: bool = True
    max_call_ms: float = 0.0
    tantivy: dict[str, float] = field(default_factory=dict)

    @property
    def bytes_per_chunk(self) -> float:
        return self.steps[-1][1] / self.steps[-1][0] if self.steps else math.nan

    def projected_gb(self, chunks: int = MILLION) -> tuple[float, float]:
        """Redis memory at `chunks`: a power law through the steps (the cost of a chunk falls
        as its terms are more often known already), and the last step's bytes per chunk
        added for every further chunk (an upper bound while that cost keeps falling)."""
        if not self.steps:
            return math.nan, math.nan
        n, used, _keys = self.steps[-1]
        marginal = used / n
        if len(self.steps) > 1:
            m, before, _ = self.steps[-2]
            marginal = (used - before) / (n - m)
        linear = (used + marginal * (chunks - n)) / 1e9
        if len(self.steps) < 2:
            return linear, linear
        x = np.log([s[0] for s in self.steps])
        y = np.log([max(s[1], 1) for s in self.steps])
        slope, intercept = np.polyfit(x, y, 1)
        return float(np.exp(intercept + slope * np.log(chunks)) / 1e9), linear


def _cpu(connection: redis.Redis) -> float:
    found = connection.info("cpu")
    return float(found["used_cpu_user"]) + float(found["used_cpu_sys"])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build_language(
    redis_url: str, connection: redis.Redis, language: str, chunks: int, max_memory: int
) -> Built:
    """Write `chunks` chunks of the language's corpus in STEPS, the memory read after each."""
    spec, built = CORPORA[language], Built(language, chunks)
    base = int(connection.info("memory")["used_memory"])
    keys_before = int(connection.dbsize())
    # The longest write call: logged from 100 ms, read after each step (the log is bounded).
    connection.config_set("slowlog-log-slower-than", 100_000)
    connection.config_set("slowlog-max-len", 10_000)
    stops = [s for s in STEPS if s < chunks] + [chunks]
    for stop in stops:
        connection.slowlog_reset()
        cpu, children = _cpu(connection), _children_cpu()
        step = corpus.build(
            redis_url, language, stop, spec=spec, max_memory=max_memory, start=built.chunks
        )
        built.seconds += step.seconds
        built.redis_cpu_s += _cpu(connection) - cpu
        built.client_cpu_s += _children_cpu() - children
        built.numbers += step.numbers
        built.chunks += step.chunks
        built.bulk &= step.bulk
        used = int(connection.info("memory")["used_memory"]) - base
        built.steps.append((built.chunks, used, int(connection.dbsize()) - keys_before))
        calls = [e["duration"] for e in connection.slowlog_get(-1) if _is_evalsha(e)]
        built.max_call_ms = max(built.max_call_ms, max(calls, default=0) / 1000)
        log(
            f"{language}: {built.chunks:,} chunks in {built.seconds:.0f} s, Redis "
            f"{used / 2**20:,.0f} MB ({used / max(built.chunks, 1):,.0f} B a chunk), "
            f"{built.steps[-1][2]:,} keys"
        )
        if step.full or built.chunks < stop:
            built.full = True
            log(f"{language}: Redis reached the {max_memory / 2**30:.1f} GiB cap: stopped")
            break
    connection.config_set("slowlog-log-slower-than", 10_000)
    return built


def _is_evalsha(entry: dict[str, Any]) -> bool:
    return bytes(entry["command"]).upper().startswith(b"EVALSHA")


class Tantivy:
    """A tantivy index of one language's chunks, searched as described above."""

    def __init__(self, language: str, folder: Path) -> None:
        import tantivy

        self.tantivy, self.language = tantivy, language
        builder = tantivy.SchemaBuilder()
        builder.add_text_field(
            "text",
            tokenizer_name="en_stem" if language == "en" else "whitespace",
            index_option="freq",
        )
        builder.add_integer_field("n", stored=True)
        self.index = tantivy.Index(builder.build(), path=str(folder))
        self.folder = folder
        self.searcher: Any = None

    def build(self, built: Built) -> dict[str, float]:
        """Index the chunks `built` wrote; seconds (without making the texts) and size."""
        spec = CORPORA[self.language]
        writer = self.index.writer(TANTIVY_HEAP, TANTIVY_THREADS)
        making = 0.0
        started = time.perf_counter()
        for number in built.numbers:
            begun = time.perf_counter()
            texts = spec.texts(number, spec.size(number, built.target))
            if self.language == "zh":
                texts = chinese.indexed_terms(texts)
            making += time.perf_counter() - begun
            first = number * spec.per_document
            for n, text in enumerate(texts):
                writer.add_document(self.tantivy.Document(text=text, n=first + n))
        writer.commit()
        writer.wait_merging_threads()
        seconds = time.perf_counter() - started - making
        self.index.reload()
        self.searcher = self.index.searcher()
        size = sum(f.stat().st_size for f in self.folder.rglob("*") if f.is_file())
        return {
            "seconds": seconds,
            "disk_mb": size / 2**20,
            "segments": self.searcher.num_segments,
            "documents": self.searcher.num_docs,
        }

    def analysed(self, text: str) -> str:
        if self.language == "zh":
            return chinese.query_pairs(text)
        return " ".join("".join(c if c.isalnum() else " " for c in text.lower()).split())

    def search(self, text: str) -> tuple[float, list[Any]]:
        started = time.perf_counter()
        query = self.index.parse_query(self.analysed(text) or "nothingatall", ["text"])
        hits = self.searcher.search(query, K, count=False).hits
        return time.perf_counter() - started, hits

    def ids(self, hits: list[Any]) -> list[int]:
        return [int(self.searcher.doc(address)["n"][0]) for _score, address in hits]


# --- searching -------------------------------------------------------------------------------


@dataclass
class Timed:
    """One shape's searches: Intake's script and client seconds, its calls' seconds, how many
    answers were exact, tantivy's seconds, and the overlap of the two top 10s."""

    script: list[float] = field(default_factory=list)
    client: list[float] = field(default_factory=list)
    calls: list[float] = field(default_factory=list)
    exact: int = 0
    tantivy: list[float] = field(default_factory=list)
    overlap: list[float] = field(default_factory=list)


def _chunk_ids(hits: list[dict[str, Any]], per_document: int) -> list[int]:
    ids = []
    for hit in hits:
        number = int(hit["document_id"].rsplit("-", 1)[1].split(".")[0])
        ids.append(number * per_document + int(hit["chunk"]))
    return ids


def search_intake(
    connection: redis.Redis, retriever: Any, language: str, text: str
) -> tuple[float, float, list[float], bool, list[int]]:
    """(script seconds, client seconds, each call's seconds, exact, chunk ids)."""
    from jobs.text.terms import TERMS

    row = TERMS.count_query(text)
    connection.slowlog_reset()
    started = time.perf_counter()
    found = retriever.lexical(language, row, K)
    client = time.perf_counter() - started
    calls = [e["duration"] / 1e6 for e in connection.slowlog_get(-1) if _is_evalsha(e)]
    ids = _chunk_ids(found.hits, CORPORA[language].per_document)
    return sum(calls), client, calls, found.exact, ids


def run_queries(
    connection: redis.Redis, engines: dict[str, Tantivy | None], sets: dict[str, dict]
) -> dict[tuple[str, str], Timed]:
    """Every query of every shape, alone, Intake then tantivy."""
    from jobs.kb.retrieval import Retriever

    retriever = Retriever(connection)
    connection.config_set("slowlog-max-len", 10_000)
    connection.config_set("slowlog-log-slower-than", 0)
    timed: dict[tuple[str, str], Timed] = {}
    for language in LANGUAGES:
        engine = engines[language]
        for text in sets[language]["short"][:WARMUP]:  # scripts loaded, caches warm
            search_intake(connection, retriever, language, text)
            if engine is not None:
                engine.search(text)
        for shape in (*SHAPES, "worst"):
            log(f"{language} {shape}: {len(sets[language][shape])} queries")
            found = timed[language, shape] = Timed()
            for text in sets[language][shape]:
                script, client, calls, exact, ids = search_intake(
                    connection, retriever, language, text
                )
                found.script.append(script)
                found.client.append(client)
                found.calls += calls
                found.exact += exact
                if engine is not None:
                    seconds, hits = engine.search(text)
                    found.tantivy.append(seconds)
                    theirs = engine.ids(hits)
                    if theirs:
                        found.overlap.append(len(set(ids) & set(theirs)) / len(theirs))
    connection.config_set("slowlog-log-slower-than", 10_000)
    return timed


def _search_loop(redis_url: str, tenant: str, queries: list[str], stop: Any, done: Any) -> None:
    """One of the concurrent searchers: the queries in a loop until `stop` is set."""
    from jobs.kb.retrieval import Retriever
    from jobs.text.terms import TERMS

    connection = redis.Redis.from_url(redis_url, socket_timeout=None)
    connection.ping()
    retriever = Retriever(connection)
    rows = [TERMS.count_query(q) for q in queries]
    n = done.value = 0  # ready: the first search goes now
    while not stop.is_set():
        retriever.lexical(tenant, rows[n % len(rows)], K)
        n += 1
        done.value = n
    connection.close()


def ping_under_search(
    redis_url: str, connection: redis.Redis, sets: dict[str, dict], seconds: float
) -> dict[str, Any]:
    """PING round trips while CONCURRENT processes run the worst-case queries in a loop (from 1 s
    after the last of them sent its first one)."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    counts = [context.Value("i", -1) for _ in range(CONCURRENT)]  # -1: not searching yet
    workers = [
        context.Process(
            target=_search_loop,
            args=(redis_url, LANGUAGES[n % 2], sets[LANGUAGES[n % 2]]["worst"], stop, counts[n]),
        )
        for n in range(CONCURRENT)
    ]
    connection.config_set("slowlog-log-slower-than", 1000)
    connection.config_set("slowlog-max-len", 100_000)
    connection.slowlog_reset()
    pinger = redis.Redis.from_url(redis_url, socket_timeout=None)
    pinger.ping()
    for worker in workers:
        worker.start()
    try:
        deadline = time.monotonic() + 300
        while min(c.value for c in counts) < 0:
            if time.monotonic() > deadline or not all(w.is_alive() for w in workers):
                raise RuntimeError("the concurrent searchers did not start")
            time.sleep(0.05)
        time.sleep(1.0)
        before = sum(c.value for c in counts)
        pings: list[float] = []
        begun = time.perf_counter()
        while (elapsed := time.perf_counter() - begun) < seconds or (
            len(pings) < MIN_PINGS and elapsed < 5 * seconds
        ):
            started = time.perf_counter()
            pinger.ping()
            pings.append(time.perf_counter() - started)
            time.sleep(0.001)
        searches = sum(c.value for c in counts) - before
    finally:
        pinger.close()
        # A search under way at the end may take long at a million chunks: the searchers are
        # waited for a few seconds, then ended (the call they sent runs to its end in Redis).
        stop.set()
        for worker in workers:
            worker.join(5)
            if worker.is_alive():
                worker.terminate()
                worker.join()
    calls = [e["duration"] / 1e6 for e in connection.slowlog_get(-1) if _is_evalsha(e)]
    connection.config_set("slowlog-log-slower-than", 10_000)
    ms = 1000 * np.asarray(pings)
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
        "pings": len(pings),
        "searches": searches,
        "max_call_ms": 1000 * max(calls, default=0.0),
    }


# --- the run ---------------------------------------------------------------------------------


def default_max_memory() -> int:
    """60 % of the memory available now (MemAvailable), in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(int(line.split()[1]) * 1024 * 0.6)
    return 8 * 2**30


def tantivy_installed() -> bool:
    try:
        import tantivy  # noqa: F401
    except ImportError:
        return False
    return True


def run(
    chunks: dict[str, int],
    max_memory: int,
    queries: int = SHORT,
    ping_seconds: float = PING_SECONDS,
) -> dict[str, Any]:
    sets = {language: query_sets(language, queries, queries) for language in LANGUAGES}
    with tempfile.TemporaryDirectory(prefix="intake-bench-search-scale-") as tmp:
        workdir = Path(tmp)
        with redis_server(workdir) as (redis_url, _pid):
            connection = redis.Redis.from_url(redis_url, socket_timeout=None)
            # A piece of 1,000 Chinese chunks' rows is one script that holds Redis for seconds:
            # the other build process must wait for it, not be answered BUSY.
            connection.config_set("busy-reply-threshold", 600_000)
            built: dict[str, Built] = {}
            engines: dict[str, Tantivy | None] = {}
            for language in LANGUAGES:
                log(
                    f"{language}: writing {chunks[language]:,} chunks (jobs.kb.index.write, 2 "
                    f"processes; Redis capped at {max_memory / 2**30:.1f} GiB)"
                )
                built[language] = build_language(
                    redis_url, connection, language, chunks[language], max_memory
                )
                engines[language] = None
                if tantivy_installed():
                    folder = workdir / f"tantivy-{language}"
                    folder.mkdir()
                    engine = Tantivy(language, folder)
                    built[language].tantivy = engine.build(built[language])
                    engines[language] = engine
                    log(f"{language}: tantivy {built[language].tantivy}")
            timed = run_queries(connection, engines, sets)
            log(f"ping under {CONCURRENT} concurrent worst-case searches, {ping_seconds:.0f} s")
            ping = ping_under_search(redis_url, connection, sets, ping_seconds)
            connection.close()
    return {"built": built, "timed": timed, "ping": ping, "tantivy": tantivy_installed()}


def _ms(values: list[float], q: float) -> float:
    return 1000 * float(np.percentile(values, q)) if values else math.nan


def figures_of(found: dict[str, Any]) -> dict[str, Any]:
    built, timed, ping = found["built"], found["timed"], found["ping"]
    figures: dict[str, Any] = {}
    for language in LANGUAGES:
        if found["tantivy"]:
            figures[f"search_p95_ratio_tantivy_{language}"] = round(
                max(
                    _ms(timed[language, s].script, 95) / _ms(timed[language, s].tantivy, 95)
                    for s in SHAPES
                ),
                3,
            )
    calls = [c for t in timed.values() for c in t.calls]
    figures["search_max_call_ms"] = round(1000 * max(calls), 2)
    figures["ping_p99_ms_under_search"] = round(ping["p99_ms"], 2)
    for language in LANGUAGES:
        b = built[language]
        figures[f"chunks_{language}"] = b.chunks
        figures[f"redis_bytes_per_chunk_{language}"] = round(b.bytes_per_chunk)
        figures[f"redis_gb_projected_1m_{language}"] = round(b.projected_gb()[0], 2)
        figures[f"build_chunks_per_s_{language}"] = round(b.chunks / b.seconds, 1)
        figures[f"build_max_call_ms_{language}"] = round(b.max_call_ms, 1)
    return figures


def print_context(found: dict[str, Any]) -> None:
    built, timed, ping = found["built"], found["timed"], found["ping"]
    rows = [("language", "shape", "engine", "n", "p50", "p95", "p99", "max", "exact", "overlap")]
    for (language, shape), t in timed.items():
        sides = [("intake", t.script), ("intake-client", t.client), ("tantivy", t.tantivy)]
        for engine, values in sides:
            if not values:
                continue
            rows.append(
                (
                    language,
                    shape,
                    engine,
                    str(len(values)),
                    *(f"{_ms(values, q):.2f}" for q in (50, 95, 99, 100)),
                    f"{t.exact / len(t.script):.2f}" if engine == "intake" else "",
                    f"{np.mean(t.overlap):.2f}" if engine == "tantivy" and t.overlap else "",
                )
            )
    print("search latency, ms (intake: script time in Redis; intake-client: the same call seen")
    print("by the client; exact: share of Intake's answers exact; overlap: tantivy's top 10")
    print("found in Intake's)")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths)))
    print()
    for language in LANGUAGES:
        b = built[language]
        power, linear = b.projected_gb()
        cpu = 1000 * (b.client_cpu_s + b.redis_cpu_s) / max(b.chunks, 1)
        capped = ", stopped at the memory cap" if b.full else ""
        print(
            f"{language}: {b.chunks:,} chunks written in {b.seconds:.0f} s "
            f"({b.chunks / b.seconds:.0f} chunks/s; CPU {cpu:.2f} ms a chunk, Redis's "
            f"{1000 * b.redis_cpu_s / max(b.chunks, 1):.2f}; terms counted "
            f"{'in bulk' if b.bulk else 'by the index'}){capped}; "
            f"longest write call {b.max_call_ms:.0f} ms"
        )
        steps = ", ".join(
            f"{n:,}: {used / n:,.0f} B ({keys / n:.0f} keys)" for n, used, keys in b.steps
        )
        print(f"  Redis used_memory a chunk after each step: {steps}")
        print(
            f"  projected at {MILLION:,} chunks: {power:.1f} GB (power law through the steps), "
            f"{linear:.1f} GB (the last step's bytes a chunk for every further one)"
        )
        if b.tantivy:
            print(
                f"  tantivy: {b.tantivy['documents']:,} chunks indexed in "
                f"{b.tantivy['seconds']:.0f} s, {b.tantivy['disk_mb']:.0f} MB on disk, "
                f"{b.tantivy['segments']} segments"
            )
    print(
        f"ping under {CONCURRENT} concurrent worst-case searches: p50 {ping['p50_ms']:.2f} ms, "
        f"p99 {ping['p99_ms']:.2f} ms, max {ping['max_ms']:.1f} ms over {ping['pings']:,} pings; "
        f"{ping['searches']} searches done meanwhile, their longest call "
        f"{ping['max_call_ms']:.0f} ms"
    )
    if not found["tantivy"]:
        print("tantivy is not installed (requirements-dev.txt): its ratios are not measured")


def at_full_scale(figures: dict[str, Any]) -> bool:
    return all(figures[f"chunks_{language}"] >= MILLION for language in LANGUAGES)


def arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the scale (also bench.knowledge_base's, which runs this module)."""
    parser.add_argument(
        "--chunks",
        type=int,
        default=int(os.environ.get("INTAKE_BENCH_SCALE_CHUNKS", MILLION)),
        help="chunks per knowledge base (env INTAKE_BENCH_SCALE_CHUNKS; 1,000,000)",
    )
    parser.add_argument(
        "--zh-chunks",
        type=int,
        default=int(os.environ.get("INTAKE_BENCH_SCALE_ZH_CHUNKS", 0)) or None,
        help="Chinese chunks, if not --chunks (env INTAKE_BENCH_SCALE_ZH_CHUNKS)",
    )
    parser.add_argument(
        "--max-redis-gb",
        type=float,
        default=float(os.environ.get("INTAKE_BENCH_SCALE_REDIS_GB", 0)) or None,
        help="stop writing chunks once Redis uses this much (env INTAKE_BENCH_SCALE_REDIS_GB; "
        "60 %% of the memory available at the start)",
    )
    parser.add_argument("--queries", type=int, default=SHORT, help="queries per shape (300)")
    parser.add_argument(
        "--ping-seconds", type=float, default=PING_SECONDS, help="the ping's duration (20)"
    )


def scale_of(args: argparse.Namespace) -> tuple[dict[str, int], int]:
    chunks = {"en": args.chunks, "zh": args.zh_chunks or args.chunks}
    cap = int(args.max_redis_gb * 2**30) if args.max_redis_gb else default_max_memory()
    return chunks, cap


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments(parser)
    args = parser.parse_args()
    chunks, cap = scale_of(args)
    found = run(chunks, cap, args.queries, args.ping_seconds)
    figures = figures_of(found)
    measure.print_table(figures, GOALS, REPORTED)
    print_context(found)
    met = measure.goals_met(figures, GOALS) and at_full_scale(figures)
    if not at_full_scale(figures):
        print(f"measured below {MILLION:,} chunks: the goals are judged at {MILLION:,}")
    print(json.dumps({**figures, "goals_met": met}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
