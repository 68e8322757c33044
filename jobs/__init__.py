"""Intake's domain: tasks, the ingestion pipeline and the knowledge base. Never imports webapp.

The web layer uses only what is exported here.
"""
from jobs.announcements import announce, changed_task, changes_channel
from jobs.clock import parse_iso
from jobs.dead_letters import count as dead_letter_count
from jobs.embedding import display_url
from jobs.exceptions import (IntakeRefusal, LimitReached, NoChunks, NoSuchBatch, NoSuchDocument,
                             NoSuchTask, NotFound, NotNow, NotReplicated, NotRetryable,
                             UploadExpired)
from jobs.failures import IntakeError, PermanentError, TransientError
from jobs.filetypes import SUPPORTED_KINDS, detect_kind, rejection_reason
from jobs.folder_sync import FolderRecord
from jobs.folder_sync import removed as documents_gone
from jobs.health import shared_queue_name
from jobs.intake import Intake
from jobs.jsontext import compact as compact_json
from jobs.logs import configure as configure_logging
from jobs.logs import held as held_logs
from jobs.logs import write as write_logs
from jobs.metrics import STEP_BUCKETS
from jobs.metrics import read as read_metrics
from jobs.redis_client import WEB as WEB_REDIS_PROFILE
from jobs.redis_client import connect as connect_redis
from jobs.redis_client import is_outage as is_redis_outage
from jobs.redis_client import dashboard_url as redis_dashboard_url
from jobs.redis_client import sentinel_url as redis_sentinel_url
from jobs.search import MAX_SEARCH_K
from jobs.sessions import end_session, session_tenant, start_session
from jobs.settings import MIB, QUEUE_NAMES, Settings
from jobs.states import BATCH_LIVE, BATCH_STATUSES, STATUSES, TERMINAL
from jobs.submit import Upload
from jobs.submit import measure as measure_upload
from jobs.tasks import ATTEMPT_WORDS, attempt_words, is_id
from jobs.tokens import match_pattern
from jobs.webhook_events import backlog as webhook_backlog
from jobs.workers import webhook_worker_command, worker_command

__all__ = [
    "ATTEMPT_WORDS", "BATCH_LIVE", "FolderRecord", "documents_gone", "BATCH_STATUSES", "attempt_words", "parse_iso", "Intake", "IntakeError", "IntakeRefusal", "LimitReached",
    "MAX_SEARCH_K", "MIB", "NoChunks", "NoSuchBatch", "NoSuchDocument", "NoSuchTask", "NotFound", "NotNow",
    "NotReplicated", "NotRetryable", "PermanentError", "QUEUE_NAMES", "STATUSES", "STEP_BUCKETS",
    "SUPPORTED_KINDS", "Settings", "TERMINAL", "TransientError", "Upload", "UploadExpired",
    "announce", "changed_task", "changes_channel", "compact_json", "configure_logging", "dead_letter_count", "detect_kind", "display_url", "end_session",
    "held_logs", "is_id", "match_pattern", "measure_upload", "read_metrics", "rejection_reason",
    "WEB_REDIS_PROFILE", "connect_redis", "is_redis_outage", "redis_dashboard_url", "redis_sentinel_url",
    "session_tenant", "shared_queue_name", "start_session", "webhook_backlog", "webhook_worker_command", "worker_command", "write_logs",
]
