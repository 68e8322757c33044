"""The path every queued ingestion job stores (`jobs.pipeline.ingest_document`): jobs enqueued
before or after an upgrade find their function here."""
from jobs.worker.pipeline import ingest_document

__all__ = ["ingest_document"]
