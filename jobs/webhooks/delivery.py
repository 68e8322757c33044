"""deliver(event_id): the RQ job that POSTs one webhook event (docs/architecture.md §14) to
INTAKE_WEBHOOK_URL, signed, and records how it went.

It runs on the `intake-webhooks` queue, served only by webhook workers (jobs.worker.workers
.WebhookWorker), so a slow or dead endpoint holds a webhook worker, never an ingestion one.
Delivery is at least once: a failure (no answer within INTAKE_WEBHOOK_TIMEOUT, a refused or
cut connection, any answer but 2xx) is recorded on the event and raised, and RQ's Retry runs
the job again after growing, jittered delays for a day (jobs.tasks.webhook_events.retry_delays); a
receiver dedupes on the event's `id`. The body is built at the first attempt and kept on the
event, so every attempt sends the same bytes; each is signed anew with its own time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import requests
from redis import Redis
from rq import get_current_job

from jobs.core import keys, metrics
from jobs.core.clock import iso_in, now_iso
from jobs.core.exceptions import NoSuchBatch
from jobs.core.jsontext import compact
from jobs.core.settings import Settings
from jobs.tasks import records as tasks
from jobs.tasks import webhook_events as events
from jobs.tasks.batches import BatchReader
from jobs.tasks.record import TaskRecord

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "Intake-Signature"
USER_AGENT = "Intake-Webhooks/1"


class DeliveryFailed(Exception):
    """One attempt did not reach a 2xx answer; RQ retries the job. The message is the readable
    reason the deliveries list shows (no URL, no answer text)."""


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: what a receiver recomputes."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def body(event: Mapping[str, str], data: Any) -> bytes:
    """The JSON body of an event: `{"id", "type", "created_at", "tenant", "data"}`."""
    return compact(
        {
            "id": event["id"],
            "type": event["type"],
            "created_at": event["created_at"],
            "tenant": event["tenant"],
            "data": data,
        }
    ).encode("utf-8")


def event_data(connection: Redis, event: Mapping[str, str]) -> Any:
    """A task event's task JSON as it was when the task moved (GET /api/tasks/<id>'s shape);
    a batch event's batch JSON as GET /api/batches/<id> answers it now."""
    if event["type"] == events.BATCH_COMPLETED:
        try:
            return BatchReader(connection).get(event["tenant"], event["subject"])
        except NoSuchBatch:  # removed since: its id is all there is to say
            return {"id": event["subject"]}
    snapshot = TaskRecord.from_hash(json.loads(event.get("snapshot") or "{}"))
    if not snapshot.id:  # deleted with its document as it finished
        return {"id": event["subject"], "status": event["type"].removeprefix("task.")}
    return tasks.view(snapshot)


def reason(exc: BaseException, timeout: float) -> str:
    """What went wrong with a POST, for a person: "timed out after 10 s", "connection refused"."""
    seconds = f"{timeout:g} s"
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return f"timed out connecting after {seconds}"
    if isinstance(exc, requests.exceptions.Timeout):
        return f"timed out after {seconds} without an answer"
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS handshake or certificate check failed"
    if isinstance(exc, requests.exceptions.ConnectionError):
        # requests wraps urllib3's error, which names the socket's: read the words of them all.
        words = repr(exc.args)
        if "Connection refused" in words or "ConnectionRefusedError" in words:
            return "connection refused"
        if "NameResolutionError" in words or "Name or service not known" in words:
            return "host not found"
        if any(
            w in words
            for w in (
                "RemoteDisconnected",
                "Connection aborted",
                "ConnectionResetError",
                "Connection reset",
            )
        ):
            return "connection closed without an answer"
        return "connection failed"
    return f"request failed ({type(exc).__name__})"


def post(settings: Settings, payload: bytes, event: Mapping[str, str]) -> int:
    """POST once; returns the answer's status code, raises DeliveryFailed with the reason."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Intake-Event": event["type"],
        "Intake-Event-Id": event["id"],
    }
    if settings.webhook_secret:
        headers[SIGNATURE_HEADER] = signature(settings.webhook_secret, int(time.time()), payload)
    try:
        response = requests.post(
            settings.webhook_url,
            data=payload,
            headers=headers,
            timeout=settings.webhook_timeout,
            allow_redirects=False,
        )
    except requests.exceptions.RequestException as exc:
        raise DeliveryFailed(reason(exc, settings.webhook_timeout)) from None
    response.close()
    return response.status_code


def attempt(
    connection: Redis,
    settings: Settings,
    event_id: str,
    *,
    retries_left: int,
    retry_in: float | None = None,
) -> str:
    """One delivery attempt of an event; returns its outcome (`delivered`; `gone` for an event
    that expired) or raises DeliveryFailed once it is recorded. `retries_left`: how many more
    attempts RQ will make (0: this is the last); `retry_in`: the delay before the next one."""
    key = keys.webhook_event(event_id)
    event = tasks.decode(connection.hgetall(key))
    if not event.get("id"):
        return "gone"
    if event.get("status") == events.DELIVERED:
        return events.DELIVERED  # a duplicate run of the job: sent already
    _enqueue_batch_events(connection, settings, key, event)
    payload = _payload(connection, key, event)
    if not settings.webhook_url:  # turned off while the event waited: nowhere to send it
        _record(
            connection,
            key,
            events.FAILED,
            outcome="gave_up",
            attempted=False,
            error="INTAKE_WEBHOOK_URL is no longer set",
        )
        return events.FAILED
    code: int | None = None
    try:
        code = post(settings, payload, event)
        if not 200 <= code < 300:
            raise DeliveryFailed(f"HTTP {code}")
    except DeliveryFailed as exc:
        last = retries_left <= 0
        _record(
            connection,
            key,
            events.FAILED if last else events.RETRYING,
            error=str(exc),
            status_code=code,
            outcome="gave_up" if last else "failed_attempt",
            next_attempt_at="" if last or retry_in is None else iso_in(retry_in),
        )
        log.info("webhook %s %s: %s", event_id, "gave up" if last else "will retry", exc)
        raise
    _record(
        connection,
        key,
        events.DELIVERED,
        status_code=code,
        outcome="delivered",
        delivered_at=now_iso(),
    )
    return events.DELIVERED


def deliver(event_id: str) -> str:
    """RQ entry point: this job's retries left and next delay, this process's settings."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("deliver must run inside an RQ job")
    retries_left = job.retries_left or 0
    retry_in = job.get_retry_interval() if retries_left else None
    return attempt(
        job.connection, current_settings(), event_id, retries_left=retries_left, retry_in=retry_in
    )


def _payload(connection: Redis, key: str, event: Mapping[str, str]) -> bytes:
    """The event's body, built once: a later attempt (or a duplicate run) sends the same."""
    if event.get("body"):
        return event["body"].encode("utf-8")
    pipe = connection.pipeline()  # another run may have kept one meanwhile: send that one
    pipe.hsetnx(key, "body", body(event, event_data(connection, event)))
    pipe.hget(key, "body")
    return pipe.execute()[1] or b""


def _enqueue_batch_events(
    connection: Redis, settings: Settings, key: str, event: Mapping[str, str]
) -> None:
    """The batch.completed events this task's finish recorded: their delivery jobs, once (the
    flag and the enqueue land together)."""
    batch_events = [e for e in (event.get("batch_events") or "").split(",") if e]
    if not batch_events or event.get("batch_events_enqueued"):
        return
    pipe = connection.pipeline()
    events.enqueue(pipe, settings, batch_events)
    pipe.hset(key, "batch_events_enqueued", 1)
    pipe.execute()


def _record(
    connection: Redis,
    key: str,
    status: str,
    *,
    outcome: str,
    error: str = "",
    status_code: int | None = None,
    delivered_at: str = "",
    next_attempt_at: str = "",
    attempted: bool = True,
) -> None:
    """How an attempt went, on the event, and counted (`webhook_deliveries_total{outcome}`)."""
    pipe = connection.pipeline()
    if attempted:
        pipe.hincrby(key, "attempts", 1)
    fields: dict[str, Any] = {
        "status": status,
        "updated_at": now_iso(),
        "next_attempt_at": next_attempt_at,
        "last_status_code": "" if status_code is None else status_code,
    }
    if error:
        fields["last_error"] = error
    if delivered_at:
        fields["delivered_at"] = delivered_at
    pipe.hset(key, mapping=fields)
    metrics.count(pipe, "webhook_deliveries_total", outcome=outcome)
    pipe.execute()


_settings: Settings | None = None


def install(settings: Settings | None) -> None:
    """The settings this process's deliveries use (the webhook worker installs them once)."""
    global _settings
    _settings = settings


def current_settings() -> Settings:
    if _settings is None:
        install(Settings.from_env())
    assert _settings is not None
    return _settings
