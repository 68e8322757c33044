"""Server-rendered pages (DESIGN §6). Each shows the true state at render time; one small script
keeps it fresh, and without JavaScript the page refreshes itself. Forms POST, then redirect.
"""
from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from jobs import TERMINAL
from webapp import tenancy
from webapp.extensions import intake, settings
from webapp.uploads import accept

bp = Blueprint("pages", __name__)
NOSCRIPT_REFRESH_SECONDS = 3


@bp.get("/")
def index() -> str:
    batches = intake().list_batches(tenancy.current_tenant(), limit=20)["batches"]
    return render_template("upload.html", batches=batches, limits=settings())


@bp.post("/upload")
def upload() -> Response | tuple[str, int]:
    files = [f for f in request.files.getlist("files") if f.filename]
    limit = settings().max_files_per_request
    if not files or len(files) > limit:
        flash("Choose one or more files." if not files else f"At most {limit} files at once.",
              "error")
        return redirect(url_for("pages.index"), 303)
    checked = accept(files, request.form.getlist("document_id"), settings())
    for rejection in checked.rejected:
        flash(rejection["message"], "error")
    if not checked.uploads:
        return redirect(url_for("pages.index"), 303)
    batch = intake().submit(tenancy.current_tenant(), checked.uploads,
                            priority=request.form.get("priority") or None)
    return redirect(url_for("pages.batch", batch_id=batch["batch_id"]), 303)


@bp.get("/batches/<batch_id>")
def batch(batch_id: str) -> str:
    found = intake().get_batch(tenancy.current_tenant(), batch_id)
    if found is None:
        abort(404, "No such batch.")
    live = found["status"] in ("pending", "running")
    return render_template("batch.html", batch=found,
                           refresh=NOSCRIPT_REFRESH_SECONDS if live else None)


@bp.get("/tasks/<task_id>")
def task(task_id: str) -> str:
    found = intake().get_task(tenancy.current_tenant(), task_id)
    if found is None:
        abort(404, "No such task.")
    live = found["status"] not in TERMINAL
    return render_template("task.html", task=found,
                           refresh=NOSCRIPT_REFRESH_SECONDS if live else None)
