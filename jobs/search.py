"""Searching a tenant's knowledge base: the query embedded as documents were, then the index.

The query embedder is the web process's one (jobs.intake builds it), so an HTTP embedder keeps
its connections.
"""
from __future__ import annotations

from typing import Any

from redis import Redis

from jobs.embedding import Embedder, SparseRows
from jobs.index import SearchIndex

MAX_SEARCH_K = 50


class Searcher:
    def __init__(self, connection: Redis, embedder: Embedder) -> None:
        self.embedder = embedder
        self.index = SearchIndex(connection)

    def search(self, tenant: str, query: str, k: int = 10) -> list[dict[str, Any]]:
        """Top-k (at most MAX_SEARCH_K) chunks of the tenant's succeeded documents."""
        embedded = self.embedder.embed([query])
        # The index takes one sparse row as is, or one dense vector.
        vector = embedded if isinstance(embedded, SparseRows) else embedded[0]
        return self.index.search(tenant, vector, max(1, min(k, MAX_SEARCH_K)))
