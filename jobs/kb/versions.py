"""The pipeline version: what decides whether an already ingested file must be ingested again.

It changes with the code's pipeline, the chunk settings, OCR turned off, the embedder's model,
and with the vectors' dimension where the embedder knows it before its first call (the local
one; a remote model's shows as "auto"), so that an upgrade re-ingests instead of returning stale
duplicates (docs/architecture.md §7, §9). Worked out once per process
(jobs.worker.parts.Parts.version, jobs.intake.Intake), before any embedding, so a remote model's
dimension learnt later never changes it.
"""

from __future__ import annotations

from jobs.core.settings import Settings
from jobs.embedding.embedders import Embedder

PIPELINE_CODE_VERSION = 2


def pipeline_version(settings: Settings, embedder: Embedder) -> str:
    dimension = embedder.dimension or "auto"
    version = (
        f"p{PIPELINE_CODE_VERSION}/chunk-{settings.chunk_size}-{settings.chunk_overlap}"
        f"/{embedder.model}-{dimension}"
    )
    # Reading scans with OCR finds text that reading without it does not: turning it back on
    # must re-ingest what was read without it.
    return version if settings.ocr == "auto" else f"{version}/ocr-{settings.ocr}"
