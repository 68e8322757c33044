"""Which vector engine holds dense embeddings, from the settings: PostgreSQL with pgvector
(jobs.kb.vectors) where an HTTP embedder makes dense vectors, none for the local embedder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.core.settings import Settings

if TYPE_CHECKING:
    from jobs.kb.vectors import VectorStore


def vector_store(settings: Settings) -> VectorStore | None:
    """A connection to the vector engine of dense embeddings, or None where there is none (the
    local embedder needs none). Opened per use: a forked work-horse must not share its parent's
    database connection."""
    if not (settings.embedding_url and settings.vector_database_url):
        return None
    from jobs.kb.vectors import VectorStore  # psycopg is loaded only where it is used

    return VectorStore(settings.vector_database_url)
