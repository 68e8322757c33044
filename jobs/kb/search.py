"""Searching a tenant's knowledge base: by meaning where there is an embedding service and a
vector engine, else, or while the service fails, by words, saying so.

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

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from redis import Redis

from jobs.core import keys
from jobs.core.failures import IntakeError
from jobs.embedding.budget import EmbeddingBudget, NowGate
from jobs.embedding.embedders import (BudgetUnavailable, Embedder, HttpEmbedder, LocalEmbedder,
                                      SparseRows)
from jobs.kb.index import LEXICAL
from jobs.kb.retrieval import Retriever

MAX_SEARCH_K = 200
#: How many more neighbours than k to ask the vector engine for: some may be dead chunks
#: (a replaced or deleted document's) that it has not deleted yet.
OVERFETCH = 2


class VectorReader(Protocol):
    def nearest(self, tenant: str, query: np.ndarray, limit: int) -> list[tuple[int, float]]: ...


@dataclass(frozen=True)
class SearchAnswer:
    """`results` best first; `mode` is ``semantic`` (vectors) or ``lexical`` (words);
    `notice` says why a semantic search answered by words; `exact` is False when a lexical
    search stopped at its budget (jobs.kb.retrieval)."""

    results: list[dict[str, Any]]
    mode: str
    notice: str = ""
    exact: bool = True


class Searcher:
    def __init__(self, connection: Redis, embedder: Embedder, breaker_seconds: int = 30,
                 vectors: VectorReader | None = None,
                 budget: EmbeddingBudget | None = None) -> None:
        self.connection = connection
        self.embedder = embedder
        self.budget = budget
        self.breaker_seconds = breaker_seconds
        self.vectors = vectors
        self.retriever = Retriever(connection)
        # The local embedder is the lexical index itself: nothing remote to call.
        self.remote = not isinstance(embedder, LocalEmbedder)

    def search(self, tenant: str, query: str, k: int = 10) -> SearchAnswer:
        """Top-k (at most MAX_SEARCH_K) chunks of the tenant's succeeded documents."""
        k = max(1, min(k, MAX_SEARCH_K))
        if not self.remote:
            return self._lexical(tenant, query, k, "")
        if self.vectors is None:
            return self._lexical(tenant, query, k, (
                "No vector database is configured (INTAKE_VECTOR_DATABASE_URL), so these "
                "results match your words only."))
        left = self.connection.ttl(keys.search_breaker())
        if left > 0:
            reason = (self.connection.get(keys.search_breaker()) or b"").decode()
            return self._lexical(tenant, query, k, _fallback_notice(reason, left))
        try:
            vector = np.asarray(self._embed_query(query), dtype=np.float32)[0]
        except BudgetUnavailable as exc:
            return self._lexical(tenant, query, k, (
                f"Search by meaning is unavailable: {exc.message}. These results match your "
                "words only."))
        except IntakeError as exc:
            reason = f"the embedding service failed a query ({exc.message})"
            self.connection.set(keys.search_breaker(), reason, ex=self.breaker_seconds, nx=True)
            return self._lexical(tenant, query, k, _fallback_notice(reason, self.breaker_seconds))
        try:
            found = self.vectors.nearest(tenant, vector, k * OVERFETCH + 10)
        except IntakeError as exc:
            return self._lexical(tenant, query, k, (
                f"Search by meaning is unavailable: {exc.message}. These results match your "
                "words only."))
        # As for words, only a positive similarity is a match: the nearest of unrelated
        # vectors is no answer.
        found = [(cid, score) for cid, score in found if score > 0]
        return SearchAnswer(self.retriever.hydrate(tenant, found, k), "semantic")

    def _embed_query(self, query: str) -> Any:
        if self.budget is not None and isinstance(self.embedder, HttpEmbedder):
            return self.embedder.embed([query], gate=NowGate(self.budget))
        return self.embedder.embed([query])

    def _lexical(self, tenant: str, query: str, k: int, notice: str) -> SearchAnswer:
        row: SparseRows = LEXICAL.embed_query(query)
        found = self.retriever.lexical(tenant, row, k)
        return SearchAnswer(found.hits, "lexical", notice, found.exact)


def _fallback_notice(reason: str, seconds: int) -> str:
    return (f"Search by meaning is unavailable: {reason}. These results match your words only; "
            f"search by meaning is tried again in {seconds} s.")
