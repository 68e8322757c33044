"""Searching a tenant's knowledge base by words, by meaning, or by both fused
(docs/architecture.md §12).

By meaning needs an embedding service and a vector engine; without them, or while the service
fails, the answer is by words, saying so when meaning was asked for. By default a search where
dense vectors exist ranks by both: the lexical and the dense rankings fused by reciprocal rank
fusion (RRF), which needs no calibration between a lexical score and a cosine of embeddings,
only their ranks.

The query embedder is the web process's one (jobs.intake builds it), so an HTTP embedder keeps
its connections. Why a search never waits long on it: a request waits on the embedding service
at most INTAKE_SEARCH_EMBEDDING_TIMEOUT (2 s), and once the service failed a query, no search of
any web process calls it for INTAKE_SEARCH_BREAKER_SECONDS (30 s: a circuit breaker whose state,
a key with that TTL, is in Redis). Meanwhile every document still has its words indexed in
Redis (jobs.kb.index), so the answer is the lexical one, with a notice, instead of an error.
A query's request counts against the shared embedding budget (jobs.embedding.budget) but never
waits for it: while the service asked for a pause, or the budget has no place free now, the
answer is the lexical one at once (and the breaker is left alone: nothing failed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from redis import Redis

from jobs.core import keys
from jobs.core.failures import IntakeError
from jobs.embedding.budget import EmbeddingBudget, NowGate
from jobs.embedding.embedders import BudgetUnavailable, Embedder, HttpEmbedder, LocalEmbedder
from jobs.kb.read_replicas import ReadReplicas
from jobs.kb.retrieval import Found, Retriever
from jobs.text.terms import TERMS, SparseRows

MAX_SEARCH_K = 200
LEXICAL_MODE, DENSE_MODE, HYBRID_MODE = "lexical", "dense", "hybrid"
SEARCH_MODES = (LEXICAL_MODE, DENSE_MODE, HYBRID_MODE)
#: RRF's constant (Cormack et al., 2009): a hit's fused score is Σ 1 / (RRF_K + rank).
RRF_K = 60
#: How many more neighbours than asked for to request from the vector engine: some may be dead
#: chunks (a replaced or deleted document's) that it has not deleted yet.
OVERFETCH = 2


class VectorReader(Protocol):
    def nearest(self, tenant: str, query: np.ndarray, limit: int) -> list[tuple[int, float]]: ...


@dataclass(frozen=True)
class SearchAnswer:
    """`results` best first, each with its `scores` per ranking; `mode` is the ranking that
    answered (``lexical``, ``dense`` or ``hybrid``); `notice` says why meaning was asked for
    and words answered; `exact` is False when the lexical ranking stopped at its budget
    (jobs.kb.retrieval)."""

    results: list[dict[str, Any]]
    mode: str
    notice: str = ""
    exact: bool = True


class DenseUnavailable(Exception):
    """Why a search by meaning cannot be served now: the notice the answer by words carries."""

    def __init__(self, notice: str) -> None:
        super().__init__(notice)
        self.notice = notice


def candidates(k: int) -> int:
    """How deep each ranking is read before fusion: a hit ranked low by one list and high by
    the other must be in both lists to be fused fairly."""
    return max(k * 2, 50)


def fuse(rankings: dict[str, Sequence[dict[str, Any]]], k: int) -> list[dict[str, Any]]:
    """Reciprocal rank fusion of hit lists (each best first), keyed by their ranking's name.

    A hit's `score` is Σ 1/(RRF_K + rank), ranks from 1, over the lists that hold it; its
    `scores` keeps each list's own score. Ties go to the better single rank, then to the
    earlier-named list: the order is deterministic."""
    fused: dict[tuple[str, str, int], dict[str, Any]] = {}
    ties: dict[tuple[str, str, int], tuple[int, int]] = {}  # (best rank, first list) per hit
    for position, (name, hits) in enumerate(rankings.items()):
        for rank, hit in enumerate(hits, start=1):
            # One live chunk: a document has one indexed version (docs/architecture.md §11).
            identity = (hit["document_id"], hit["task_id"], hit["chunk"])
            entry = fused.setdefault(identity, {**hit, "score": 0.0, "scores": {}})
            entry["score"] += 1.0 / (RRF_K + rank)
            entry["scores"][name] = hit["score"]
            ties[identity] = min(ties.get(identity, (rank, position)), (rank, position))
    ranked = sorted(fused, key=lambda i: (-fused[i]["score"], *ties[i]))[:k]
    return [{**fused[i], "score": round(fused[i]["score"], 6)} for i in ranked]


def scored_by(name: str, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hits of one ranking, each saying which score it carries."""
    return [{**hit, "scores": {name: hit["score"]}} for hit in hits]


class Searcher:
    def __init__(
        self,
        connection: Redis,
        embedder: Embedder,
        breaker_seconds: int = 30,
        vectors: VectorReader | None = None,
        budget: EmbeddingBudget | None = None,
        replicas: Sequence[Redis] = (),
    ) -> None:
        self.connection = connection
        self.embedder = embedder
        self.budget = budget
        self.breaker_seconds = breaker_seconds
        self.vectors = vectors
        self.retriever = Retriever(connection)
        #: Where the search scripts run: the replicas in turn (INTAKE_KB_REPLICA_URLS), else
        #: the knowledge base's Redis.
        self.readers = ReadReplicas(self.retriever, [Retriever(r, replica=True) for r in replicas])
        # The local embedder is the lexical index itself: nothing remote to call.
        self.remote = not isinstance(embedder, LocalEmbedder)

    def search(self, tenant: str, query: str, k: int = 10, mode: str | None = None) -> SearchAnswer:
        """Top-k (at most MAX_SEARCH_K) chunks of the tenant's succeeded documents, ranked as
        `mode` says (None: hybrid where dense vectors exist, else lexical). Raises ValueError
        for a mode not in SEARCH_MODES."""
        if mode is not None and mode not in SEARCH_MODES:
            raise ValueError(f"unknown search mode {mode!r}")
        k = max(1, min(k, MAX_SEARCH_K))
        if mode == LEXICAL_MODE:
            return self._lexical(tenant, query, k, "")
        unserved = self._no_dense_notice(explicit=mode is not None)
        if unserved is not None:
            return self._lexical(tenant, query, k, unserved)
        wanted = mode or HYBRID_MODE
        try:
            dense = self._dense_hits(tenant, query, k if wanted == DENSE_MODE else candidates(k))
        except DenseUnavailable as exc:
            return self._lexical(tenant, query, k, exc.notice)
        if wanted == DENSE_MODE:
            return SearchAnswer(scored_by(DENSE_MODE, dense), DENSE_MODE)
        lexical = self._lexical_found(tenant, query, candidates(k))
        return SearchAnswer(
            fuse({LEXICAL_MODE: lexical.hits, DENSE_MODE: dense}, k),
            HYBRID_MODE,
            exact=lexical.exact,
        )

    def _no_dense_notice(self, explicit: bool) -> str | None:
        """None when dense vectors exist; else the notice for the answer by words ("" when
        nothing needs saying: the local embedder, and meaning not asked for)."""
        if not self.remote:
            return (
                (
                    "Search by meaning needs an embedding service (INTAKE_EMBEDDING_URL) and "
                    "a vector database, and no embedding service is configured, so these "
                    "results match your words only."
                )
                if explicit
                else ""
            )
        if self.vectors is None:
            return (
                "No vector database is configured (INTAKE_VECTOR_DATABASE_URL), so these "
                "results match your words only."
            )
        return None

    def _dense_hits(self, tenant: str, query: str, depth: int) -> list[dict[str, Any]]:
        """The `depth` live chunks nearest the query's embedding. Raises DenseUnavailable while
        the breaker is open, the budget has no place, or the service or the engine fails."""
        assert self.vectors is not None  # _no_dense_notice said so
        left = self.connection.ttl(keys.search_breaker())
        if left > 0:
            reason = (self.connection.get(keys.search_breaker()) or b"").decode()
            raise DenseUnavailable(_fallback_notice(reason, left))
        try:
            vector = np.asarray(self._embed_query(query), dtype=np.float32)[0]
        except BudgetUnavailable as exc:
            raise DenseUnavailable(_unavailable_notice(exc.message)) from None
        except IntakeError as exc:
            reason = f"the embedding service failed a query ({exc.message})"
            self.connection.set(keys.search_breaker(), reason, ex=self.breaker_seconds, nx=True)
            raise DenseUnavailable(_fallback_notice(reason, self.breaker_seconds)) from None
        try:
            found = self.vectors.nearest(tenant, vector, depth * OVERFETCH + 10)
        except IntakeError as exc:
            raise DenseUnavailable(_unavailable_notice(exc.message)) from None
        # As for words, only a positive similarity is a match: the nearest of unrelated
        # vectors is no answer.
        found = [(cid, score) for cid, score in found if score > 0]
        return self.readers.read(lambda retriever: retriever.hydrate(tenant, found, depth))

    def _embed_query(self, query: str) -> Any:
        if self.budget is not None and isinstance(self.embedder, HttpEmbedder):
            return self.embedder.embed([query], gate=NowGate(self.budget))
        return self.embedder.embed([query])

    def _lexical(self, tenant: str, query: str, k: int, notice: str) -> SearchAnswer:
        found = self._lexical_found(tenant, query, k)
        return SearchAnswer(scored_by(LEXICAL_MODE, found.hits), LEXICAL_MODE, notice, found.exact)

    def _lexical_found(self, tenant: str, query: str, k: int) -> Found:
        """The lexical ranking's top k: the one place a query's words become its query row."""
        row: SparseRows = TERMS.count_query(query)
        return self.readers.read(lambda retriever: retriever.lexical(tenant, row, k))


def _unavailable_notice(reason: str) -> str:
    return f"Search by meaning is unavailable: {reason}. These results match your words only."


def _fallback_notice(reason: str, seconds: int) -> str:
    return (
        f"Search by meaning is unavailable: {reason}. These results match your words only; "
        f"search by meaning is tried again in {seconds} s."
    )
