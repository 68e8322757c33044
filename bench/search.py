"""search_ratio: GET /api/search with 10,000 chunks indexed against GET /api/tasks/<id>.

The knowledge base is written directly, not through workers: 100 documents of 100 chunks
(~700 characters of words drawn from a Zipf-like vocabulary of 20,000 made-up words, fixed
seed), their terms counted by the index step and written with `jobs.kb.index
.write`: the staging and the flip the pipeline's last step makes (same scripts, same layout).
That takes seconds instead of the minute 100 larger documents would take through the workers,
and what is measured, the read side, is the same. The query is two words, one common (in ~60 % of
the chunks) and one rarer (~7 %), so that it scores thousands of chunks. Sequential requests on
keep-alive sessions, rounds alternating AB, BA, …; the figure is the ratio of the pooled
medians. The first search after indexing is reported apart, as "cold" (it once built a
per-process snapshot; now it only loads the search script).
"""

from __future__ import annotations

import itertools
import random
import time
from typing import Any
from urllib.parse import urlencode

import redis

from bench import measure
from bench.servers import Services
from jobs.kb import index

DOCUMENTS = 100
CHUNKS_PER_DOCUMENT = 100
WORDS_PER_CHUNK = 110
VOCABULARY = 20_000
TENANT = "default"  # the bench runs without INTAKE_API_KEYS: one tenant
WARMUP = 10
ROUNDS = 16
PER_ROUND = 8
_SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "sa",
    "to",
    "vi",
    "de",
    "po",
    "ra",
    "en",
    "qu",
    "zi",
    "ba",
    "fo",
    "gu",
    "hi",
    "ja",
    "ly",
)


def vocabulary(size: int) -> list[str]:
    """`size` distinct made-up words of 2–4 syllables, in a fixed order (rank 0 most common)."""
    words = []
    for length in (2, 3, 4):
        for parts in itertools.product(_SYLLABLES, repeat=length):
            words.append("".join(parts))
            if len(words) == size:
                return words
    raise ValueError("vocabulary too large")


def chunk_texts(count: int, seed: int = 11) -> tuple[list[str], list[str]]:
    """`count` chunk texts (Zipf-like word frequencies) and the vocabulary, by rank."""
    words = vocabulary(VOCABULARY)
    weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        drawn = rng.choices(words, cum_weights=weights, k=WORDS_PER_CHUNK)
        texts.append(" ".join(drawn).capitalize() + ".")
    return texts, words


def build_index(connection: redis.Redis, nonce: str) -> dict[str, Any]:
    """Write DOCUMENTS × CHUNKS_PER_DOCUMENT chunks; returns the query and how long it took."""
    start = time.perf_counter()
    texts, words = chunk_texts(DOCUMENTS * CHUNKS_PER_DOCUMENT)
    version = time.time_ns() // 1000
    for n in range(DOCUMENTS):
        chunk_slice = texts[n * CHUNKS_PER_DOCUMENT : (n + 1) * CHUNKS_PER_DOCUMENT]
        if not index.write(
            connection,
            index.IndexedDocument(
                tenant=TENANT,
                document_id=f"search-{nonce}-{n}.txt",
                filename=f"search-{n}.txt",
                task_id=f"{n:032x}",
                version=version,
                texts=chunk_slice,
                vectors=None,
            ),
        ):
            raise RuntimeError("an index write was refused")
    # At 110 words a chunk, rank 10 is in ~60 % of the chunks and rank 150 in ~7 %.
    common, rare = words[10], words[150]
    split = [set(t.lower().rstrip(".").split()) for t in texts]
    return {
        "query": f"{common} {rare}",
        "seconds": time.perf_counter() - start,
        "matching_chunks": sum(1 for w in split if common in w or rare in w),
        "word_chunks": [sum(1 for w in split if common in w), sum(1 for w in split if rare in w)],
        "chunks": len(texts),
    }


def run(svc: Services, task_id: str, nonce: str) -> dict[str, Any]:
    connection = redis.Redis.from_url(svc.redis_url)
    built = build_index(connection, nonce)
    connection.close()
    search_url = f"{svc.base}/api/search?{urlencode({'q': built['query']})}"
    task_url = f"{svc.base}/api/tasks/{task_id}"
    ss, st = measure.session(), measure.session()
    cold = measure.get_latencies(ss, search_url, 1)[0]
    answer = ss.get(search_url, timeout=30)
    results = answer.json()["results"]
    if len(results) != 10:
        raise RuntimeError(f"the search found {len(results)} results, expected 10")
    figures = measure.latency_ratio(
        (ss, search_url), (st, task_url), warmup=WARMUP, rounds=ROUNDS, per_round=PER_ROUND
    )
    ss.close()
    st.close()
    return {
        **built,
        **figures,
        "cold_ms": 1000 * cold,
        "answer_bytes": len(answer.content),
    }
