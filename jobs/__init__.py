"""Intake's domain: tasks, the ingestion pipeline and the knowledge base. Never imports webapp.

The web layer uses only what is exported here.
"""
from jobs.tasks.announcements import announce, changed_task, changes_channel
from jobs.core.clock import parse_iso
from jobs.tasks.dead_letters import count as dead_letter_count
from jobs.embedding.embedders import display_url
from jobs.core.exceptions import (IntakeRefusal, LimitReached, NoChunks, NoSuchBatch, NoSuchDocument,
                             NoSuchTask, NotFound, NotNow, NotReplicated, NotRetryable,
                             UploadExpired)
from jobs.core.failures import IntakeError, PermanentError, TransientError
from jobs.text.filetypes import SUPPORTED_KINDS, detect_kind, rejection_reason
from jobs.tasks.folder_sync import FolderRecord
from jobs.tasks.folder_sync import removed as documents_gone
from jobs.core.health import shared_queue_name
from jobs.intake import Intake
from jobs.core.jsontext import compact as compact_json
from jobs.core.logs import configure as configure_logging
from jobs.core.logs import held as held_logs
from jobs.core.logs import write as write_logs
from jobs.core.metrics import STEP_BUCKETS
from jobs.core.metrics import read as read_metrics
from jobs.core.redis_client import WEB as WEB_REDIS_PROFILE
from jobs.core.redis_client import connect as connect_redis
from jobs.core.redis_client import is_outage as is_redis_outage
from jobs.core.redis_client import dashboard_url as redis_dashboard_url
from jobs.core.addresses import sentinel_url as redis_sentinel_url
from jobs.kb.search import MAX_SEARCH_K
from jobs.core.sessions import end_session, session_tenant, start_session
from jobs.core.settings import MIB, QUEUE_NAMES, Settings
from jobs.tasks.states import BATCH_LIVE, BATCH_STATUSES, STATUSES, TERMINAL
from jobs.tasks.submit import Upload
from jobs.tasks.submit import measure as measure_upload
from jobs.tasks.records import ATTEMPT_WORDS, attempt_words, is_id
from jobs.text.tokens import match_pattern
from jobs.tasks.webhook_events import backlog as webhook_backlog
from jobs.worker.workers import webhook_worker_command, worker_command

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
