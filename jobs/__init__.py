"""Intake's domain: tasks, the ingestion pipeline and the knowledge base. Never imports webapp.

The web layer uses only what is exported here.
"""

from jobs.core.addresses import display_url
from jobs.core.addresses import sentinel_url as redis_sentinel_url
from jobs.core.clock import parse_iso
from jobs.core.exceptions import (
    IntakeRefusal,
    LimitReached,
    NoChunks,
    NoSuchBatch,
    NoSuchDocument,
    NoSuchTask,
    NotFound,
    NotNow,
    NotReplicated,
    NotRetryable,
    SearchTimedOut,
    StorageUnavailable,
    Throttled,
    UploadExpired,
)
from jobs.core.failures import IntakeError, PermanentError, TransientError
from jobs.core.health import shared_queue_name
from jobs.core.ids import ID_PATTERN, is_id
from jobs.core.jsontext import compact as compact_json
from jobs.core.keys import kb_pattern as knowledge_base_keys
from jobs.core.logs import configure as configure_logging
from jobs.core.logs import held as held_logs
from jobs.core.logs import write as write_logs
from jobs.core.metrics import STEP_BUCKETS
from jobs.core.metrics import read as read_metrics
from jobs.core.redis_client import WEB as WEB_REDIS_PROFILE
from jobs.core.redis_client import connect as connect_redis
from jobs.core.redis_client import dashboard_url as redis_dashboard_url
from jobs.core.redis_client import is_outage as is_redis_outage
from jobs.core.sessions import end_session, session_tenant, start_session
from jobs.core.settings import (
    MIB,
    NORMAL_PRIORITY,
    PRIORITIES,
    QUEUE_NAMES,
    REINDEX_PRIORITY,
    Settings,
)
from jobs.intake import Intake
from jobs.kb.search import MAX_SEARCH_K, SEARCH_MODES
from jobs.tasks.announcements import announce, changed_task, changes_channel
from jobs.tasks.dead_letters import count as dead_letter_count
from jobs.tasks.folder_sync import FolderRecord
from jobs.tasks.folder_sync import removed as documents_gone
from jobs.tasks.records import ATTEMPT_WORDS, attempt_words
from jobs.tasks.reindex import LAST_RUN_FAILED
from jobs.tasks.states import BATCH_LIVE, BATCH_STATUSES, STATUSES, TERMINAL
from jobs.tasks.stored_bytes import used as stored_bytes_used
from jobs.tasks.submit import Upload
from jobs.tasks.submit import measure as measure_upload
from jobs.tasks.webhook_events import backlog as webhook_backlog
from jobs.text.filetypes import EXTENSIONS, SUPPORTED_KINDS, detect_kind, rejection_reason
from jobs.text.tokens import match_pattern
from jobs.worker.workers import webhook_worker_command, worker_command

__all__ = [
    "announce",
    "ATTEMPT_WORDS",
    "attempt_words",
    "BATCH_LIVE",
    "BATCH_STATUSES",
    "changed_task",
    "changes_channel",
    "compact_json",
    "configure_logging",
    "connect_redis",
    "knowledge_base_keys",
    "dead_letter_count",
    "detect_kind",
    "display_url",
    "documents_gone",
    "end_session",
    "EXTENSIONS",
    "FolderRecord",
    "held_logs",
    "ID_PATTERN",
    "Intake",
    "IntakeError",
    "IntakeRefusal",
    "is_id",
    "is_redis_outage",
    "LAST_RUN_FAILED",
    "LimitReached",
    "match_pattern",
    "MAX_SEARCH_K",
    "measure_upload",
    "MIB",
    "NoChunks",
    "NoSuchBatch",
    "NoSuchDocument",
    "NoSuchTask",
    "NotFound",
    "NotNow",
    "NORMAL_PRIORITY",
    "NotReplicated",
    "NotRetryable",
    "parse_iso",
    "PermanentError",
    "PRIORITIES",
    "QUEUE_NAMES",
    "REINDEX_PRIORITY",
    "read_metrics",
    "redis_dashboard_url",
    "redis_sentinel_url",
    "rejection_reason",
    "SEARCH_MODES",
    "SearchTimedOut",
    "session_tenant",
    "StorageUnavailable",
    "Settings",
    "shared_queue_name",
    "start_session",
    "STATUSES",
    "STEP_BUCKETS",
    "stored_bytes_used",
    "SUPPORTED_KINDS",
    "TERMINAL",
    "Throttled",
    "TransientError",
    "Upload",
    "UploadExpired",
    "WEB_REDIS_PROFILE",
    "webhook_backlog",
    "webhook_worker_command",
    "worker_command",
    "write_logs",
]
