"""Intake's domain: tasks, the ingestion pipeline and the knowledge base. Never imports webapp.

The web layer uses only what is exported here.
"""
from jobs.failures import IntakeError, PermanentError, TransientError
from jobs.filetypes import SUPPORTED_KINDS, detect_kind, rejection_reason
from jobs.service import MAX_SEARCH_K, Intake
from jobs.settings import QUEUE_NAMES, Settings
from jobs.submit import LimitReached, Upload
from jobs.tasks import STATUSES, TERMINAL

__all__ = [
    "Intake", "IntakeError", "LimitReached", "MAX_SEARCH_K", "PermanentError", "QUEUE_NAMES", "STATUSES",
    "SUPPORTED_KINDS", "Settings", "TERMINAL", "TransientError", "Upload", "detect_kind",
    "rejection_reason",
]
