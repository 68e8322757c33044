"""The JSON API of docs/architecture.md §5 under /api. Registers work and reads state; never
parses."""

from __future__ import annotations

import hashlib
import re
from functools import partial
from typing import Any

from flask import Blueprint, Response, request, send_file

from jobs import (
    LAST_RUN_FAILED,
    MAX_SEARCH_K,
    PRIORITIES,
    SEARCH_MODES,
    STATUSES,
    compact_json,
    held_logs,
    write_logs,
)
from webapp import limits, tenancy
from webapp.dashboard import is_operator, operator_denial
from webapp.errors import ApiError
from webapp.extensions import intake, settings
from webapp.uploads import accept

bp = Blueprint("api", __name__, url_prefix="/api")
TRACE_ID = re.compile(r"[A-Za-z0-9._-]{8,64}")
REINDEX_IDS = 10_000  # document ids one re-index request may name
_PRIORITY_MESSAGE = f"priority must be one of {', '.join(PRIORITIES)}."


def json_response(
    payload: Any,
    status: int = 200,
    *,
    etag: bool = False,
    headers: dict[str, str] | None = None,
    text: str | None = None,
) -> Response:
    """Serialise once (or send `text`, JSON already serialised the same way); with `etag`,
    answer 304 when the client already has this exact state (its Cache-Control:
    webapp.security)."""
    body = compact_json(payload) if text is None else text
    response = Response(body, status=status, mimetype="application/json", headers=headers)
    if etag:
        response.set_etag(hashlib.blake2b(body.encode(), digest_size=12).hexdigest())
        response.make_conditional(request)
    return response


@bp.post("/documents")
def upload_documents() -> Response:
    files = request.files.getlist("files")
    if not files:
        raise ApiError(400, "no_files", "Send one or more files in the multipart field `files`.")
    limit = settings().max_files_per_request
    if len(files) > limit:
        raise ApiError(413, "too_many_files", f"At most {limit} files per request.")
    priority = request.form.get("priority") or None
    if priority is not None and priority not in PRIORITIES:
        raise ApiError(400, "bad_priority", _PRIORITY_MESSAGE)
    checked = accept(files, request.form.getlist("document_id"), settings())
    if not checked.uploads:
        first = checked.rejected[0]
        raise ApiError(
            checked.refusal_status(),
            first["code"],
            first["message"],
            extra={"rejected": checked.rejected},
        )
    force = request.form.get("force") in ("1", "true", "yes")
    with held_logs() as lines:  # LimitReached: webapp.errors answers 429 or 503
        batch = intake().submit(
            tenancy.current_tenant(),
            checked.uploads,
            priority=priority,
            force=force,
            trace_id=_trace_id(),
        )
    response = json_response(
        upload_payload(batch, checked.rejected),
        202,
        headers={"Location": f"/api/batches/{batch['batch_id']}"},
    )
    response.call_on_close(partial(write_logs, lines))  # the server calls it once sent
    return response


@bp.post("/documents/reindex")
def reindex_documents() -> Response:
    """`{"document_ids": [...]}` or `{"all": true}`, `force`, `priority` (bulk by default): a
    batch like an upload's, each document run again from its stored original. `all` leaves out
    (in `rejected`) the documents whose last run failed, unless forced: 409 when that is all."""
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise ApiError(400, "bad_request", 'Send JSON: {"document_ids": [...]} or {"all": true}.')
    ids, everything = body.get("document_ids"), body.get("all") is True
    if everything == (ids is not None):
        raise ApiError(400, "bad_request", 'Send either "document_ids" or "all": true.')
    if ids is not None and (
        not isinstance(ids, list)
        or not ids
        or len(ids) > REINDEX_IDS
        or not all(isinstance(i, str) and 0 < len(i) <= 1024 for i in ids)
    ):
        raise ApiError(
            400, "bad_request", f"document_ids must be a list of 1 to {REINDEX_IDS} document ids."
        )
    priority = body.get("priority")
    if priority is not None and priority not in PRIORITIES:
        raise ApiError(400, "bad_priority", _PRIORITY_MESSAGE)
    with held_logs() as lines:  # LimitReached: webapp.errors answers 429 or 503
        batch, rejected = intake().reindex(
            tenancy.current_tenant(),
            ids,
            priority=priority,
            force=body.get("force") is True,
            trace_id=_trace_id(),
        )
    if batch is None:
        if rejected and all(r["code"] == LAST_RUN_FAILED for r in rejected):
            raise ApiError(
                409,
                "nothing_to_reindex",
                "The last run of every document failed; "
                "re-index them by id, or with force, to run them again.",
                extra={"rejected": rejected},
            )
        message = rejected[0]["message"] if rejected else "There are no documents to re-index."
        raise ApiError(404, "not_found", message, extra={"rejected": rejected})
    response = json_response(
        upload_payload(batch, rejected),
        202,
        headers={"Location": f"/api/batches/{batch['batch_id']}"},
    )
    response.call_on_close(partial(write_logs, lines))
    return response


def _trace_id() -> str | None:
    """A proxy's X-Request-ID, if it is a plausible id, follows the upload into the logs."""
    given = request.headers.get("X-Request-ID", "")
    return given if TRACE_ID.fullmatch(given) else None


def upload_payload(batch: dict[str, Any], rejected: list[dict[str, str]]) -> dict[str, Any]:
    batch_id = batch["batch_id"]
    tasks = [
        {**t, "url": f"/api/tasks/{t['id']}", "page_url": f"/tasks/{t['id']}"}
        for t in batch["tasks"]
    ]
    return {
        "batch_id": batch_id,
        "url": f"/api/batches/{batch_id}",
        "page_url": f"/batches/{batch_id}",
        "tasks": tasks,
        "rejected": rejected,
    }


@bp.get("/documents")
def list_documents() -> Response:
    """The tenant's documents, newest first; `q` filters by name, `status` by the latest
    task's status. A filter reads the whole library: an expensive read (webapp.limits)."""
    tenant = tenancy.current_tenant()
    offset, limit = _int_arg("offset", 0, 0, 10**6), _int_arg("limit", 50, 1, 100)
    query, status = (request.args.get("q") or "").strip() or None, _status_arg()
    if query is not None or status is not None:
        limits.charge(tenant, "the document library filtered by name or status")
    page = intake().documents(tenant, offset=offset, limit=limit, query=query, status=status)
    return json_response(page)


def _status_arg() -> str | None:
    """The task status asked for; none (absent or empty) keeps every status."""
    return _choice_arg("status", STATUSES)


def _choice_arg(name: str, choices: tuple[str, ...]) -> str | None:
    """A query argument that must be one of `choices`; None when absent or empty."""
    value = request.args.get(name) or None
    if value is not None and value not in choices:
        raise ApiError(400, "bad_parameter", f"`{name}` must be one of {', '.join(choices)}.")
    return value


@bp.get("/documents/<path:document_id>")
def get_document(document_id: str) -> Response:
    return json_response(intake().document(tenancy.current_tenant(), document_id))


@bp.delete("/documents/<path:document_id>")
def delete_document(document_id: str) -> Response:
    intake().delete_document(tenancy.current_tenant(), document_id)
    return Response(status=204)


@bp.get("/originals/<path:document_id>")
def download_original(document_id: str) -> Response:
    """The stored bytes of a document as uploaded, always as an attachment and under a
    sandboxing policy, so an uploaded HTML page can never run as this site."""
    original = intake().original(tenancy.current_tenant(), document_id)
    response = send_file(
        original.stream,
        mimetype=original.content_type,
        as_attachment=True,
        download_name=original.filename,
        conditional=False,
        etag=False,
        max_age=0,
    )
    if original.size:
        response.content_length = original.size
    response.headers["Content-Security-Policy"] = "sandbox"
    return response


@bp.get("/batches")
def list_batches() -> Response:
    offset = _int_arg("offset", 0, 0, 10**6)
    limit = _int_arg("limit", 20, 1, 100)
    return json_response(
        intake().batches.recent(tenancy.current_tenant(), offset=offset, limit=limit)
    )


@bp.get("/batches/<hexid:batch_id>")
def get_batch(batch_id: str) -> Response:
    tenant = tenancy.current_tenant()
    text = intake().batches.get_json(tenant, batch_id, limits.batch_meter(tenant))
    return json_response(None, etag=True, text=text)


@bp.get("/tasks/<hexid:task_id>")
def get_task(task_id: str) -> Response:
    return json_response(intake().get_task(tenancy.current_tenant(), task_id), etag=True)


@bp.get("/tasks/<hexid:task_id>/chunks")
def get_chunks(task_id: str) -> Response:
    """One page of a succeeded task's chunks with their locations; 409 for any other task."""
    page = intake().chunks(
        tenancy.current_tenant(),
        task_id,
        offset=_int_arg("offset", 0, 0, 10**7),
        limit=_int_arg("limit", 20, 1, 100),
    )
    return json_response(page, etag=True)


@bp.post("/tasks/<hexid:task_id>/retry")
def retry_task(task_id: str) -> Response:
    intake().retry(tenancy.current_tenant(), task_id)
    return json_response(intake().get_task(tenancy.current_tenant(), task_id), 202)


@bp.post("/tasks/<hexid:task_id>/cancel")
def cancel_task(task_id: str) -> Response:
    intake().cancel(tenancy.current_tenant(), task_id)
    return json_response(intake().get_task(tenancy.current_tenant(), task_id), 202)


@bp.post("/batches/<hexid:batch_id>/retry-failed")
def retry_batch(batch_id: str) -> Response:
    tenant = tenancy.current_tenant()
    task_ids = intake().batches.task_ids(tenant, batch_id)
    return json_response(intake().retry_failed(tenant, task_ids), 202)


@bp.post("/batches/<hexid:batch_id>/cancel")
def cancel_batch(batch_id: str) -> Response:
    tenant = tenancy.current_tenant()
    return json_response(
        intake().cancel_many(tenant, intake().batches.task_ids(tenant, batch_id)), 202
    )


@bp.get("/failed")
def list_failed() -> Response:
    """The tenant's dead letters; with ?all=1 every tenant's, for an operator's basic auth."""
    tenant: str | None = None
    if request.args.get("all") in ("1", "true"):
        denial = operator_denial()
        if denial is not None:  # a known tenant lacks the right; anyone else lacks credentials
            raise ApiError(
                403 if tenancy.identified() else denial.status_code,
                "operator_only",
                "Every tenant's dead letters are for operators.",
            )
    else:
        tenant = tenancy.current_tenant()
    page = intake().list_failed(
        tenant, offset=_int_arg("offset", 0, 0, 10**6), limit=_int_arg("limit", 50, 1, 200)
    )
    return json_response(page, etag=True)


@bp.get("/webhooks/deliveries")
def list_webhook_deliveries() -> Response:
    """The tenant's recent webhook events, newest first, with each delivery's state."""
    page = intake().webhook_deliveries(
        tenancy.current_tenant(),
        offset=_int_arg("offset", 0, 0, 10**6),
        limit=_int_arg("limit", 50, 1, 200),
    )
    return json_response(page, etag=True)


@bp.get("/search")
def search() -> Response:
    query = (request.args.get("q") or "").strip()
    if not query:
        raise ApiError(400, "missing_query", "Give a query in the parameter `q`.")
    k = _int_arg("k", 10, 1, MAX_SEARCH_K)
    found = intake().search(tenancy.current_tenant(), query[:1000], k, _search_mode())
    answer = {"query": query, "results": found.results, "mode": found.mode, "exact": found.exact}
    if found.notice:
        answer["notice"] = found.notice
    return json_response(answer)


def _search_mode() -> str | None:
    """The ranking asked for; none (absent or empty) leaves it to the service
    (docs/architecture.md §12)."""
    return _choice_arg("mode", SEARCH_MODES)


@bp.get("/health")
def health() -> Response:
    """Open to monitoring without credentials, so it names no tenant unless an operator asks."""
    return json_response(intake().health(per_tenant=is_operator()))


def _int_arg(name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "bad_parameter", f"`{name}` must be a whole number.") from None
    if not low <= value <= high:
        raise ApiError(400, "bad_parameter", f"`{name}` must be between {low} and {high}.")
    return value
