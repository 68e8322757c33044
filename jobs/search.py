"""Searching a tenant's knowledge base: the query embedded as documents were, then the index.

The query embedder is the web process's one (jobs.intake builds it), so an HTTP embedder keeps
its connections. Why a search never waits long on it: a request waits on the embedding service
at most INTAKE_SEARCH_EMBEDDING_TIMEOUT (2 s), and once the service failed a query, no search of
any web process calls it for INTAKE_SEARCH_BREAKER_SECONDS (30 s: a circuit breaker whose state,
a key with that TTL, is in Redis), so an outage answers 503 at once instead of holding every
search for the full timeout.
"""
from __future__ import annotations

from typing import Any

from redis import Redis

from jobs import keys
from jobs.embedding import Embedder, LocalEmbedder, SparseRows
from jobs.exceptions import SearchUnavailable
from jobs.failures import IntakeError
from jobs.index import SearchIndex

MAX_SEARCH_K = 50


class Searcher:
    def __init__(self, connection: Redis, embedder: Embedder, breaker_seconds: int = 30) -> None:
        self.connection = connection
        self.embedder = embedder
        self.breaker_seconds = breaker_seconds
        self.index = SearchIndex(connection)
        # The local embedder runs in this process and cannot be down: no breaker to check.
        self.remote = not isinstance(embedder, LocalEmbedder)

    def search(self, tenant: str, query: str, k: int = 10) -> list[dict[str, Any]]:
        """Top-k (at most MAX_SEARCH_K) chunks of the tenant's succeeded documents. Raises
        SearchUnavailable while the embedding service is failing."""
        embedded = self._embed(query)
        # The index takes one sparse row as is, or one dense vector.
        vector = embedded if isinstance(embedded, SparseRows) else embedded[0]
        return self.index.search(tenant, vector, max(1, min(k, MAX_SEARCH_K)))

    def _embed(self, query: str) -> Any:
        if not self.remote:
            return self.embedder.embed([query])
        left = self.connection.ttl(keys.search_breaker())
        if left > 0:
            reason = (self.connection.get(keys.search_breaker()) or b"").decode()
            raise SearchUnavailable(reason, left)
        try:
            return self.embedder.embed([query])
        except IntakeError as exc:
            reason = f"the embedding service failed a query ({exc.message})"
            self.connection.set(keys.search_breaker(), reason, ex=self.breaker_seconds, nx=True)
            raise SearchUnavailable(reason, self.breaker_seconds) from None
