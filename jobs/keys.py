"""Every Redis key Intake owns, named in one place so that nothing else spells a key by hand.

Tenant names are validated where tenants are configured; ids are hex. A document's id is
free text, so its keys use a digest of it instead.
"""
from __future__ import annotations

import hashlib

PREFIX = "intake:"
TASK_PREFIX = PREFIX + "task:"


def task(task_id: str) -> str:
    return TASK_PREFIX + task_id


def blob(task_id: str) -> str:
    return f"{PREFIX}blob:{task_id}"


def cancel_flag(task_id: str) -> str:
    return f"{PREFIX}cancel:{task_id}"


def batch(batch_id: str) -> str:
    return f"{PREFIX}batch:{batch_id}"


def batch_tasks(batch_id: str) -> str:
    return f"{PREFIX}batch:{batch_id}:tasks"


def tenant_batches(tenant: str) -> str:
    return f"{PREFIX}tenant:{tenant}:batches"


def tenant_failed(tenant: str) -> str:
    return f"{PREFIX}tenant:{tenant}:failed"


def idempotency(digest: str) -> str:
    return f"{PREFIX}idem:{digest}"


def document_digest(document_id: str) -> str:
    return hashlib.sha256(document_id.encode("utf-8")).hexdigest()[:32]


def kb_document(tenant: str, document_id: str) -> str:
    return f"{PREFIX}kb:{tenant}:doc:{document_digest(document_id)}"


def kb_documents(tenant: str) -> str:
    return f"{PREFIX}kb:{tenant}:docs"


def kb_generation(tenant: str) -> str:
    return f"{PREFIX}kb:{tenant}:gen"


def failed_all() -> str:
    """Every tenant's dead letters, for operators."""
    return f"{PREFIX}failed"


def active() -> str:
    """Tasks that are pending, running or retrying: what the reconciler watches."""
    return f"{PREFIX}active"


def canceling() -> str:
    """Running tasks sent RQ's stop command, whose stopped job must leave the failed registry."""
    return f"{PREFIX}canceling"


def checkpoint(task_id: str) -> str:
    return f"{PREFIX}checkpoint:{task_id}"


def reconcile_lock() -> str:
    return f"{PREFIX}reconcile-lock"


def housekeeping_lock() -> str:
    return f"{PREFIX}housekeeping-lock"


def tenant_active(tenant: str) -> str:
    return f"{PREFIX}tenant:{tenant}:active"


def blob_bytes() -> str:
    """Uploaded bytes waiting in Redis, all tenants: checked against the blob budget."""
    return f"{PREFIX}blob-bytes"


def blob_sizes() -> str:
    """task id → size of its stored upload, to recount blob_bytes when uploads expire."""
    return f"{PREFIX}blob-sizes"


def metrics() -> str:
    return f"{PREFIX}metrics"


def step_metrics() -> str:
    return f"{PREFIX}metrics:steps"


def document_tasks(tenant: str, document_id: str) -> str:
    """Every task ever created for one document of a tenant, so it can be removed whole."""
    return f"{PREFIX}tenant:{tenant}:document:{document_digest(document_id)}:tasks"
