"""The documents page (docs/architecture.md §6): the tenant's library, newest first, with
Download, Re-index and Delete per document and one Re-index of all.

Apart from webapp/pages.py because it is a page with its own forms and rules: like every page
it works with JavaScript off, each action a form that POSTs with its CSRF token and redirects.
Delete asks first: static/confirm.js asks in the browser, and without JavaScript the first POST
answers a page that asks (`confirmed=1` is what the answer sends).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from jobs import (
    LAST_RUN_FAILED,
    NORMAL_PRIORITY,
    STATUSES,
    LimitReached,
    NotFound,
    NotReplicated,
    StorageUnavailable,
    held_logs,
    write_logs,
)
from webapp import tenancy
from webapp.extensions import intake

bp = Blueprint("documents", __name__)
PAGE_SIZE = 50
MAX_QUERY = 1000  # characters of a name filter, as the search page keeps of a query
MAX_PAGE = 20_000  # 1,000,000 documents deep: far past what a filter reads (library.py)
# What the API refuses an upload or a re-index for, as a flash instead of an error page.
REFUSALS = (LimitReached, NotReplicated, StorageUnavailable)


@bp.get("/documents")
def index() -> str:
    """One page of the library. A page past the last (the last document of it deleted) shows
    the last page rather than nothing."""
    view = _view(request.args)
    tenant = tenancy.current_tenant()
    found = _page(tenant, view)
    last = max(1, -(-found["total"] // PAGE_SIZE))
    if view["page"] > last:
        view = {**view, "page": last}
        found = _page(tenant, view)
    return render_template(
        "documents.html",
        documents=found["documents"],
        total=found["total"],
        pages=last,
        view=view,
        statuses=STATUSES,
        here=partial(_here, view),
    )


@bp.post("/documents/reindex")
def reindex() -> Response:
    """One document (`document_id`), forced: whoever clicks Re-index on it wants it run again,
    at normal priority since they watch its batch page; clicked again while that run waits
    or runs, it is the same run. Or `all=1`: every document, not forced, on the bulk queue:
    those already indexed under today's pipeline come back as duplicates, those whose last
    run failed are left out, and the flash says how many."""
    back = _back(request.form)
    everything = request.form.get("all") == "1"
    document_id = request.form.get("document_id") or ""
    if not everything and not document_id:
        flash("Choose a document to re-index.", "error")
        return redirect(back, 303)
    with held_logs() as lines:
        try:
            batch, rejected = (
                intake().reindex(tenancy.current_tenant(), None)
                if everything
                else intake().reindex(
                    tenancy.current_tenant(), [document_id], force=True, priority=NORMAL_PRIORITY
                )
            )
        except REFUSALS as exc:  # see their docstrings
            flash(exc.message, "error")
            return redirect(back, 303)
    if batch is None:
        flash(
            _left_out("Nothing to re-index", rejected)
            if everything and rejected
            else rejected[0]["message"]
            if rejected
            else "There are no documents to re-index.",
            "error",
        )
        return redirect(back, 303)
    message, started = _reindex_words(batch, rejected, everything)
    flash(message, "info")
    response = redirect(
        url_for("pages.batch", batch_id=batch["batch_id"]) if started else back, 303
    )
    response.call_on_close(partial(write_logs, lines))  # the server calls it once sent
    return response


@bp.post("/documents/delete")
def delete() -> Response | str:
    """Without `confirmed=1` (no JavaScript asked), a page that asks; with it, the document's
    chunks, records and original go. The document is read first, for its name and so that
    another tenant's is "No such document." before anything is asked or done."""
    back = _back(request.form)
    document_id = request.form.get("document_id") or ""
    tenant = tenancy.current_tenant()
    try:
        document = intake().document(tenant, document_id)
        if request.form.get("confirmed") != "1":
            return render_template(
                "document_delete.html",
                document=document,
                name=_name(document),
                view=_view(request.form),
                back=back,
            )
        intake().delete_document(tenant, document_id)
    except NotFound as exc:
        flash(exc.message, "error")
        return redirect(back, 303)
    flash(f"Deleted {_name(document)}.", "info")
    return redirect(back, 303)


def _view(values: Mapping[str, str]) -> dict[str, Any]:
    """The filters and page asked for, each made possible: an unknown status shows every
    status (as the batch page's filter does), a page that is not a number is the first."""
    status = values.get("status") or None
    try:
        page = min(max(int(values.get("page") or 1), 1), MAX_PAGE)
    except ValueError:
        page = 1
    return {
        "q": (values.get("q") or "").strip()[:MAX_QUERY],
        "status": status if status in STATUSES else None,
        "page": page,
    }


def _page(tenant: str, view: Mapping[str, Any]) -> dict[str, Any]:
    return intake().documents(
        tenant,
        offset=(view["page"] - 1) * PAGE_SIZE,
        limit=PAGE_SIZE,
        query=view["q"] or None,
        status=view["status"],
    )


def _here(view: Mapping[str, Any], **changes: Any) -> str:
    """/documents with the view's filters and page, some changed; empty ones left out."""
    wanted = {**view, **changes}
    return url_for(
        "documents.index",
        q=wanted["q"] or None,
        status=wanted["status"],
        page=wanted["page"] if wanted["page"] > 1 else None,
    )


def _back(form: Mapping[str, str]) -> str:
    """Where a form sends the person back to: the list as they saw it (filters and page)."""
    return _here(_view(form))


def _name(document: Mapping[str, Any]) -> str:
    return document["filename"] or document["document_id"]


def _reindex_words(
    batch: Mapping[str, Any], rejected: list[dict[str, str]], everything: bool
) -> tuple[str, bool]:
    """The flash after a re-index, and whether anything runs (else there is no batch worth
    watching: every document was already up to date)."""
    tasks = batch["tasks"]
    current = sum(1 for task in tasks if task["duplicate"])
    started = len(tasks) - current
    if not everything:
        name = tasks[0]["filename"] or tasks[0]["document_id"]
        if tasks[0]["duplicate"]:  # forced: a duplicate is its run still under way
            return f"{name} is already being re-indexed.", True
        return f"Re-indexing {name}.", True
    words = f"Re-indexing {_documents(started)}" if started else "Nothing to re-index"
    if current:
        words += f"; {_documents(current)} {'was' if current == 1 else 'were'} already up to date"
    return _left_out(words, rejected), started > 0


def _left_out(words: str, rejected: list[dict[str, str]]) -> str:
    """`words` and what a re-index of all left out: documents whose last run failed (they
    would fail again at each click), then those it could not re-index."""
    failed = sum(1 for r in rejected if r["code"] == LAST_RUN_FAILED)
    if failed:
        words += (
            f"; {_documents(failed)} whose last run failed "
            f"{'was' if failed == 1 else 'were'} left out (Re-index each to run it again)"
        )
    refused = [r for r in rejected if r["code"] != LAST_RUN_FAILED]
    if refused:
        words += f"; {_documents(len(refused))} could not be: {refused[0]['message']}"
    return words.rstrip(".") + "."


def _documents(count: int) -> str:
    return f"{count:,} document{'' if count == 1 else 's'}"
