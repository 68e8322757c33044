"""The paths every queued job stores: `jobs.pipeline.ingest_document` (a task's job) and
`jobs.pipeline.read_page_range` (a range of a scan's pages, jobs.worker.scan_reading); jobs
enqueued before or after an upgrade find their function here."""

from jobs.worker.pipeline import ingest_document
from jobs.worker.scan_reading import read_page_range

__all__ = ["ingest_document", "read_page_range"]
