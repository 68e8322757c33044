"""A tenant's recent webhook deliveries (docs/architecture.md §14), newest first: what each event
was, and how its delivery went (attempts, the last answer or error), so a failing endpoint shows.

Read from the tenant's own index of events (jobs.tasks.webhook_events), so another tenant's events
are never listed. Kept a week, the newest 1,000 per tenant.
"""

from __future__ import annotations

from typing import Any

from redis import Redis

from jobs.core import keys
from jobs.tasks.webhook_events import BATCH_COMPLETED

_FIELDS = (
    "id",
    "type",
    "tenant",
    "created_at",
    "subject",
    "status",
    "attempts",
    "last_status_code",
    "last_error",
    "delivered_at",
    "next_attempt_at",
    "updated_at",
)


def view(raw: dict[str, str]) -> dict[str, Any]:
    """One delivery's JSON: the event and the state of its delivery."""
    subject = raw.get("subject", "")
    batch = raw.get("type") == BATCH_COMPLETED
    code = raw.get("last_status_code") or ""
    return {
        "id": raw["id"],
        "type": raw.get("type", ""),
        "created_at": raw.get("created_at", ""),
        "task_id": None if batch else subject,
        "batch_id": subject if batch else None,
        "status": raw.get("status", "pending"),
        "attempts": int(raw.get("attempts") or 0),
        "last_status_code": int(code) if code.isdigit() else None,
        "last_error": raw.get("last_error") or None,
        "delivered_at": raw.get("delivered_at") or None,
        "next_attempt_at": raw.get("next_attempt_at") or None,
        "updated_at": raw.get("updated_at") or raw.get("created_at", ""),
        "subject_url": f"/api/batches/{subject}" if batch else f"/api/tasks/{subject}",
        "subject_page_url": f"/batches/{subject}" if batch else f"/tasks/{subject}",
    }


def page(connection: Redis, tenant: str, *, offset: int = 0, limit: int = 50) -> dict[str, Any]:
    """One page of the tenant's deliveries, newest first, with how many it has in all."""
    index = keys.tenant_webhooks(tenant)
    ids = [e.decode() for e in connection.zrevrange(index, offset, offset + limit - 1)]
    pipe = connection.pipeline(transaction=False)
    for event_id in ids:
        pipe.hmget(keys.webhook_event(event_id), _FIELDS)
    pipe.zcard(index)
    *rows, total = pipe.execute()
    found = []
    for values in rows:
        raw = {name: v.decode() for name, v in zip(_FIELDS, values) if v is not None}
        if raw.get("id") and raw.get("tenant") == tenant:  # expired ones are skipped
            found.append(view(raw))
    return {"deliveries": found, "offset": offset, "limit": limit, "total": total}
