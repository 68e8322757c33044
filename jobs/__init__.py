"""Intake's domain: tasks, the ingestion pipeline and the knowledge base. Never imports webapp.

The web layer uses only what is exported here.
"""
from jobs.failures import IntakeError, PermanentError, TransientError
from jobs.filetypes import SUPPORTED_KINDS, detect_kind, rejection_reason
from jobs.logs import configure as configure_logging
from jobs.logs import held as held_logs
from jobs.logs import write as write_logs
from jobs.metrics import STEP_BUCKETS
from jobs.metrics import read as read_metrics
from jobs.service import MAX_SEARCH_K, Intake
from jobs.sessions import end_session, session_tenant, start_session
from jobs.settings import QUEUE_NAMES, Settings
from jobs.submit import LimitReached, Upload
from jobs.submit import measure as measure_upload
from jobs.tasks import STATUSES, TERMINAL
from jobs.workers import worker_command

__all__ = [
    "Intake", "IntakeError", "LimitReached", "MAX_SEARCH_K", "PermanentError", "QUEUE_NAMES",
    "STATUSES", "STEP_BUCKETS", "SUPPORTED_KINDS", "Settings", "TERMINAL", "TransientError",
    "Upload", "configure_logging", "detect_kind", "end_session", "held_logs", "measure_upload",
    "read_metrics", "rejection_reason", "session_tenant", "start_session",
    "worker_command", "write_logs",
]
