"""The pipeline version: what decides whether an already ingested file must be ingested again.

It changes with the code's pipeline, the chunk settings and the embedder's model and dimension,
so that an upgrade re-ingests instead of returning stale duplicates (DESIGN §7, §9).
"""
from __future__ import annotations

from functools import lru_cache

from jobs.embedding import make_embedder
from jobs.settings import Settings

PIPELINE_CODE_VERSION = 1


@lru_cache(maxsize=16)
def pipeline_version(settings: Settings) -> str:
    embedder = make_embedder(settings)
    dimension = embedder.dimension or "auto"
    return (f"p{PIPELINE_CODE_VERSION}/chunk-{settings.chunk_size}-{settings.chunk_overlap}"
            f"/{embedder.model}-{dimension}")
