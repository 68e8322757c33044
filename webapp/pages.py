"""Server-rendered pages (docs/architecture.md §6). Each shows the true state at render time; one
small script keeps it fresh, and without JavaScript the page refreshes itself. Forms POST, then
redirect.
"""

from __future__ import annotations

from functools import partial

from flask import Blueprint, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from jobs import (
    BATCH_LIVE,
    EXTENSIONS,
    MAX_SEARCH_K,
    SEARCH_MODES,
    STATUSES,
    TERMINAL,
    LimitReached,
    NoChunks,
    NotNow,
    NotReplicated,
    SearchTimedOut,
    StorageUnavailable,
    Throttled,
    held_logs,
    write_logs,
)
from webapp import display, tenancy
from webapp.extensions import intake, settings
from webapp.redirects import local_path
from webapp.uploads import accept

bp = Blueprint("pages", __name__)
bp.record_once(lambda state: display.init_app(state.app))
NOSCRIPT_REFRESH_SECONDS = 3
PREVIEW_CHUNKS = 5  # the first chunks a succeeded task's page shows
# How the search page names each ranking (docs/architecture.md §12): what it offers, what answered.
SEARCH_MODE_NAMES = {"hybrid": "words and meaning", "lexical": "words", "dense": "meaning"}


@bp.get("/")
def index() -> str:
    batches = intake().batches.recent(tenancy.current_tenant(), limit=20)["batches"]
    return render_template("upload.html", batches=batches, limits=settings(), accept=EXTENSIONS)


@bp.post("/upload")
def upload() -> Response | tuple[str, int]:
    files = [f for f in request.files.getlist("files") if f.filename]
    limit = settings().max_files_per_request
    if not files or len(files) > limit:
        flash(
            "Choose one or more files." if not files else f"At most {limit} files at once.", "error"
        )
        return redirect(url_for("pages.index"), 303)
    checked = accept(files, request.form.getlist("document_id"), settings())
    for rejection in checked.rejected:
        flash(rejection["message"], "error")
    if not checked.uploads:
        return redirect(url_for("pages.index"), 303)
    with held_logs() as lines:
        try:
            batch = intake().submit(
                tenancy.current_tenant(),
                checked.uploads,
                priority=request.form.get("priority") or None,
                force=request.form.get("force") == "1",
            )
        except (LimitReached, NotReplicated, StorageUnavailable) as exc:  # see their docstrings
            flash(exc.message, "error")
            return redirect(url_for("pages.index"), 303)
    duplicates = sum(1 for task in batch["tasks"] if task["duplicate"])
    if duplicates:
        flash(
            f"{duplicates} of these files were already ingested unchanged and were not "
            "processed again. To process them again, choose them again with “Upload again "
            "anyway” ticked.",
            "info",
        )
    response = redirect(url_for("pages.batch", batch_id=batch["batch_id"]), 303)
    response.call_on_close(partial(write_logs, lines))  # the server calls it once sent
    return response


@bp.get("/batches/<hexid:batch_id>")
def batch(batch_id: str) -> str:
    found = intake().batches.get(tenancy.current_tenant(), batch_id)
    live = found["status"] in BATCH_LIVE
    show = request.args.get("status")  # ?status=failed shows only those rows, without JS too
    return render_template(
        "batch.html",
        batch=found,
        show=show if show in STATUSES else None,
        here=request.full_path.rstrip("?"),
        refresh=NOSCRIPT_REFRESH_SECONDS if live else None,
    )


@bp.post("/batches/<hexid:batch_id>/retry-failed")
def retry_batch(batch_id: str) -> Response:
    counts = intake().retry_failed(tenancy.current_tenant(), _batch_tasks(batch_id))
    flash(
        f"Retrying {counts['retried']} failed documents"
        + (f"; {counts['skipped']} cannot be retried." if counts["skipped"] else "."),
        "info",
    )
    return redirect(url_for("pages.batch", batch_id=batch_id), 303)


@bp.post("/batches/<hexid:batch_id>/cancel")
def cancel_batch(batch_id: str) -> Response:
    counts = intake().cancel_many(tenancy.current_tenant(), _batch_tasks(batch_id))
    flash(f"Canceled {counts['canceled']} documents.", "info")
    return redirect(url_for("pages.batch", batch_id=batch_id), 303)


def _batch_tasks(batch_id: str) -> list[str]:
    return intake().batches.task_ids(tenancy.current_tenant(), batch_id)


@bp.post("/tasks/<hexid:task_id>/<any(retry, cancel):action>")
def change_task(task_id: str, action: str) -> Response:
    """Retry or cancel, then back to where the person was (the form says where)."""
    service = intake()
    change = service.retry if action == "retry" else service.cancel
    try:
        change(tenancy.current_tenant(), task_id)  # NoSuchTask: webapp.errors' 404 page
    except NotNow as exc:
        flash(exc.message, "error")
    back = local_path(request.form.get("next"), url_for("pages.task", task_id=task_id))
    return redirect(back, 303)


@bp.get("/failed")
def failed() -> str:
    page = intake().list_failed(tenancy.current_tenant(), limit=200)
    return render_template("failed.html", tasks=page["tasks"], total=page["total"])


@bp.post("/failed/retry-all")
def retry_all_failed() -> Response:
    page = intake().list_failed(tenancy.current_tenant(), limit=1000)
    counts = intake().retry_failed(tenancy.current_tenant(), [t["id"] for t in page["tasks"]])
    flash(
        f"Retrying {counts['retried']} documents"
        + (f"; {counts['skipped']} cannot be retried." if counts["skipped"] else "."),
        "info",
    )
    return redirect(url_for("pages.failed"), 303)


@bp.get("/webhooks")
def webhooks() -> str:
    page = intake().webhook_deliveries(tenancy.current_tenant(), limit=200)
    return render_template("webhooks.html", **page)


@bp.get("/tasks/<hexid:task_id>")
def task(task_id: str) -> str:
    found = intake().get_task(tenancy.current_tenant(), task_id)
    live = found["status"] not in TERMINAL
    preview = None
    if found["status"] == "succeeded":
        try:
            preview = intake().chunks(tenancy.current_tenant(), task_id, limit=PREVIEW_CHUNKS)
        except NoChunks:  # deleted, or a newer version replaced them: the page says nothing
            pass
    return render_template(
        "task.html",
        task=found,
        preview=preview,
        preview_size=PREVIEW_CHUNKS,
        refresh=NOSCRIPT_REFRESH_SECONDS if live else None,
    )


@bp.get("/search")
def search() -> str | tuple[str, int, dict[str, str]]:
    """A GET form: the query stays in the URL, so a search can be bookmarked and shared. A
    mode it does not know is the default one, as an impossible `k` is the nearest possible.
    A search refused for now (too many at once, a replica's timeout) shows the form again with
    the reason, under the API's status and Retry-After."""
    query = (request.args.get("q") or "").strip()[:1000]
    try:
        k = max(1, min(int(request.args.get("k") or 10), MAX_SEARCH_K))
    except ValueError:
        k = 10
    asked = request.args.get("mode")
    mode = asked if asked in SEARCH_MODES else None
    results, notice, used = [], "", None
    page = partial(
        render_template,
        "search.html",
        query=query,
        k=k,
        max_k=MAX_SEARCH_K,
        mode=mode,
        modes=SEARCH_MODE_NAMES,
    )
    if query:
        try:
            found = intake().search(tenancy.current_tenant(), query, k, mode)
        except (Throttled, SearchTimedOut) as exc:
            status = 429 if isinstance(exc, Throttled) else 503
            return (
                page(refused=exc.message, used=None, results=[], notice=""),
                status,
                {"Retry-After": str(exc.retry_after)},
            )
        # notice: answered by words, and why; used: the ranking that answered
        results, notice, used = found.results, found.notice, found.mode
    return page(used=used, results=results, notice=notice, refused="")
