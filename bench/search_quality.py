"""search_ndcg_ratio and search_recall50_ratio: Intake's default search against Lucene-style BM25
on a public test collection, in the same run.

The collection is CISI (1,460 abstracts of information science, 76 queries with relevance
judgments; `shared/data/cisi` beside the repository, or INTAKE_CISI_DIR). Each abstract is a
document: chunked with the default chunk settings, indexed by its terms (no dense model)
and written with `jobs.kb.index.write` into a redis-server of this run, then every query goes
through `jobs.kb.search.Searcher`, as GET /api/search does. The baseline is the `bm25s`
package (k1 = 1.5, b = 0.75, Lucene's idf, English stop words, Snowball stemming) over the
same chunk texts. A chunk stands for its document; a document's rank is that of its best
chunk, on both sides. Figures: nDCG@10 and Recall@50 averaged over the judged queries, and
Intake ÷ baseline. bm25s over whole documents (not chunks) is reported beside them.
"""

from __future__ import annotations

import collections
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

import redis

from bench.servers import redis_server
from jobs.core.settings import Settings
from jobs.embedding.embedders import LocalEmbedder
from jobs.kb import index
from jobs.kb.search import Searcher
from jobs.text.chunking import chunk_text

ROOT = Path(__file__).resolve().parents[1]
TENANT = "cisi"
RANKED = 200  # chunks asked for per query: enough distinct documents for Recall@50
NDCG_AT, RECALL_AT = 10, 50
#: What Intake's searches said and took, in this run (exactness and latency are reported).
SEEN: dict[str, list[Any]] = {"seconds": [], "exact": []}


def collection_dir() -> Path:
    return Path(os.environ.get("INTAKE_CISI_DIR") or ROOT.parent / "shared" / "data" / "cisi")


def _records(path: Path) -> dict[int, dict[str, str]]:
    """The `.I`-numbered records of a CISI file, each field (`.T`, `.W` …) as its text."""
    records: dict[int, dict[str, str]] = {}
    current, field = None, None
    for line in path.read_text(encoding="latin-1").splitlines(keepends=True):
        if line.startswith(".I "):
            current, field = int(line.split()[1]), None
            records[current] = {}
        elif re.match(r"^\.[A-Z]\s*$", line) and current is not None:
            field = line[1]
            records[current].setdefault(field, "")
        elif current is not None and field:
            records[current][field] += line
    return records


def load(folder: Path) -> tuple[dict[int, str], list[tuple[int, str]], dict[int, set[int]]]:
    """(document text by id, judged queries in order, relevant document ids by query)."""
    documents = {
        i: f"{r.get('T', '').strip()}\n\n{r.get('W', '').strip()}".strip()
        for i, r in _records(folder / "CISI.ALL").items()
    }
    relevant: dict[int, set[int]] = collections.defaultdict(set)
    for line in (folder / "CISI.REL").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2:
            relevant[int(parts[0])].add(int(parts[1]))
    queries = [
        (i, r.get("W", "").strip())
        for i, r in sorted(_records(folder / "CISI.QRY").items())
        if i in relevant
    ]
    return documents, queries, relevant


#: A query's judgments: the relevant documents (each of gain 1), or each judged document's gain.
Judged = Collection[int] | Mapping[int, int]


def gains_of(judged: Judged) -> Mapping[int, int]:
    return judged if isinstance(judged, Mapping) else dict.fromkeys(judged, 1)


def ndcg(ranked: list[int], judged: Judged, at: int = NDCG_AT) -> float:
    """nDCG@at with a log2 discount; the gain of a document is its judgment's (1 where only the
    relevant ones are given, 0 where not judged); the ideal ranking is of the judged ones."""
    gains = gains_of(judged)
    gain = sum(gains.get(d, 0) / math.log2(r + 2) for r, d in enumerate(ranked[:at]))
    ideal = sum(
        g / math.log2(r + 2) for r, g in enumerate(sorted(gains.values(), reverse=True)[:at])
    )
    return gain / ideal if ideal else 0.0


def recall(ranked: list[int], relevant: Collection[int], at: int = RECALL_AT) -> float:
    return len(set(ranked[:at]) & set(relevant)) / len(relevant)


def score(
    search: Callable[[str], list[int]],
    queries: list[tuple[Hashable, str]],
    judged: Mapping[Any, Judged],
    relevant_from: int = 1,
) -> dict[str, float]:
    """Mean nDCG@10 and Recall@50 of `search` over `queries` (id, text); a document counts as
    relevant for recall from the gain `relevant_from` on."""
    n = r = 0.0
    for qid, text in queries:
        ranked = search(text)
        gains = gains_of(judged[qid])
        n += ndcg(ranked, gains)
        r += recall(ranked, [d for d, g in gains.items() if g >= relevant_from])
    return {"ndcg10": n / len(queries), "recall50": r / len(queries)}


def documents_of(chunk_owners: Iterable[int]) -> list[int]:
    """Documents in the order of their best chunk."""
    return list(dict.fromkeys(chunk_owners))


def chunks_of(documents: dict[int, str], settings: Settings) -> list[tuple[int, str]]:
    return [
        (doc, text)
        for doc, body in sorted(documents.items())
        for text in chunk_text(body, settings.chunk_size, settings.chunk_overlap)
    ]


def index_document(
    connection: redis.Redis, doc: int, texts: list[str], tenant: str = TENANT
) -> None:
    """One document's chunks staged and flipped by `jobs.kb.index.write`, the pipeline's index
    step."""
    written = index.write(
        connection,
        index.IndexedDocument(
            tenant=tenant,
            document_id=str(doc),
            filename=f"{tenant}-{doc}.txt",
            task_id=f"{doc:032x}",
            version=1,
            texts=texts,
            vectors=None,
        ),
    )
    if not written:
        raise RuntimeError(f"document {doc} was not indexed")


def intake_side(
    connection: redis.Redis, chunks: list[tuple[int, str]], tenant: str = TENANT, k: int = RANKED
) -> Callable[[str], list[int]]:
    """Index every document as the pipeline does (in the order of `chunks`: chunk ids, and so
    equal scores, follow it); a search function over it, asking for `k` chunks."""
    by_doc: dict[int, list[str]] = collections.defaultdict(list)
    for doc, text in chunks:
        by_doc[doc].append(text)
    for doc, texts in by_doc.items():
        index_document(connection, doc, texts, tenant)
    searcher = Searcher(connection, LocalEmbedder())

    def search(query: str) -> list[int]:
        started = time.perf_counter()
        answer = searcher.search(tenant, query, k=k)
        SEEN["seconds"].append(time.perf_counter() - started)
        SEEN["exact"].append(answer.exact)
        return documents_of(int(hit["document_id"]) for hit in answer.results)

    return search


def bm25s_side(texts: list[tuple[int, str]]) -> Callable[[str], list[int]]:
    """Lucene-style BM25 (bm25s) over `texts` (owner, text): owners ranked by best text."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    owners = [owner for owner, _ in texts]
    tokens = bm25s.tokenize(
        [t for _, t in texts], stopwords="en", stemmer=stemmer, show_progress=False
    )
    model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    model.index(tokens, show_progress=False)

    def search(query: str) -> list[int]:
        asked = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
        found, scores = model.retrieve(asked, k=min(RANKED, len(owners)), show_progress=False)
        return documents_of(owners[j] for j, s in zip(found[0], scores[0]) if s > 0)

    return search


def measured_intake(
    chunks: list[tuple[int, str]],
    scored: Callable[[Callable[[str], list[int]]], dict[str, float]],
    tenant: str = TENANT,
    k: int = RANKED,
) -> dict[str, Any]:
    """`scored` (the figures of a search function) of Intake's search over `chunks`, indexed
    into a redis-server of its own, with the share of exact answers and the median latency."""
    with tempfile.TemporaryDirectory(prefix="intake-quality-") as workdir:
        with redis_server(Path(workdir)) as (url, _pid):
            connection = redis.Redis.from_url(url)
            SEEN["seconds"].clear()
            SEEN["exact"].clear()
            subject = scored(intake_side(connection, chunks, tenant, k))
    seconds = sorted(SEEN["seconds"])
    return {
        "intake": subject,
        "exact_share": sum(SEEN["exact"]) / len(SEEN["exact"]),
        "median_ms": 1000 * seconds[len(seconds) // 2],
    }


def against(measured: dict[str, Any], baseline: dict[str, float]) -> dict[str, Any]:
    """Intake's figures (`measured_intake`) with the baseline's and the ratios of the two."""
    subject = measured["intake"]
    return {
        "ndcg_ratio": subject["ndcg10"] / baseline["ndcg10"],
        "recall50_ratio": subject["recall50"] / baseline["recall50"],
        **measured,
        "bm25s": baseline,
    }


def run(log: Callable[[str], None] = print) -> dict[str, Any] | None:
    """The figures, or None (said in the log) where the collection is not beside the checkout."""
    if not (collection_dir() / "CISI.ALL").exists():
        log(f"search quality: no CISI collection at {collection_dir()} (INTAKE_CISI_DIR): skipped")
        return None
    documents, queries, relevant = load(collection_dir())
    chunks = chunks_of(documents, Settings())
    log(
        f"search quality: CISI, {len(documents):,} documents in {len(chunks):,} chunks, "
        f"{len(queries)} judged queries"
    )
    baseline = score(bm25s_side(chunks), queries, relevant)
    whole = score(bm25s_side(sorted(documents.items())), queries, relevant)
    return {
        **against(
            measured_intake(chunks, lambda search: score(search, queries, relevant)), baseline
        ),
        "bm25s_whole_documents": whole,
        "documents": len(documents),
        "chunks": len(chunks),
        "queries": len(queries),
    }


def describe(found: dict[str, Any]) -> str:
    intake, base, whole = found["intake"], found["bm25s"], found["bm25s_whole_documents"]
    return (
        f"search quality (CISI, {found['queries']} judged queries, {found['documents']:,} "
        f"documents in {found['chunks']:,} chunks): nDCG@10 {intake['ndcg10']:.3f} Intake vs "
        f"{base['ndcg10']:.3f} bm25s with stemming on the same chunks "
        f"({whole['ndcg10']:.3f} on whole documents); Recall@50 {intake['recall50']:.3f} vs "
        f"{base['recall50']:.3f} ({whole['recall50']:.3f}); k = {RANKED}: "
        f"{found['exact_share']:.0%} exact, median {found['median_ms']:.1f} ms a query"
    )


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1))
