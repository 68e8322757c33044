"""`flask --app webapp ingest PATH…`, `reindex`, `failed` and `retry`: Intake's documents from a
terminal, through the same code as the API (the same file checks, the same submit, the same
task JSON)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click
from flask import current_app
from werkzeug.datastructures import FileStorage

from jobs import (
    BATCH_LIVE,
    LAST_RUN_FAILED,
    PRIORITIES,
    REINDEX_PRIORITY,
    TERMINAL,
    FolderRecord,
    Intake,
    LimitReached,
    NotFound,
    NotNow,
    NotReplicated,
    display_url,
    documents_gone,
)
from webapp.cli.app import with_app
from webapp.display import eta_text
from webapp.uploads import accept, clean_path

BAR_WIDTH = 30
LOGGER_NAME = "intake"  # jobs.core.logs' logger
#: How long the bar waits with no worker registered on its Redis before it says so and stops.
NO_WORKER_SECONDS = 5.0
#: The exit code then: the documents are queued and will run once a worker starts.
NO_WORKER_EXIT = 3


def _files(paths: tuple[str, ...]) -> Iterator[tuple[Path, str]]:
    """Each file with its document id: the path relative to the folder given, or its name."""
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                yield path, path.relative_to(root).as_posix()
        elif root.is_file():
            yield root, root.name
        else:
            raise click.BadParameter(f"{raw}: no such file or folder")


@click.command("ingest")
@with_app
@click.argument("paths", nargs=-1, required=True)
@click.option("--tenant", default="default", show_default=True)
@click.option("--priority", type=click.Choice(PRIORITIES))
@click.option("--force", is_flag=True, help="Ingest again even if unchanged.")
@click.option(
    "--sync",
    "sync",
    is_flag=True,
    help="Make the knowledge base follow ONE folder: new and changed files are "
    "submitted, unchanged ones skipped, the documents of deleted files removed.",
)
@click.option(
    "--source",
    help="With --sync: the name the folder's record is kept under (default: its absolute path).",
)
@click.option("--no-wait", is_flag=True, help="Print the task ids and return at once.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Intake's JSON log lines on stderr too (else: instance/ingest.log).",
)
def ingest_command(
    paths: tuple[str, ...],
    tenant: str,
    priority: str | None,
    force: bool,
    sync: bool,
    source: str | None,
    no_wait: bool,
    verbose: bool,
) -> None:
    """Upload files and folders (recursively; relative paths become document ids), then show a
    progress bar until every document is done. Exit code 1 if any failed, 3 if no worker
    listens on the Redis it uses."""
    if source and not sync:
        raise click.UsageError("--source names the record of a --sync")
    if sync and (len(paths) != 1 or not Path(paths[0]).is_dir()):
        raise click.UsageError("--sync takes exactly one folder")
    if not verbose:
        _log_to_file(Path(current_app.instance_path) / "ingest.log")
    if current_app.config.get("REDIS_URL_FROM_DEV_RUNNER"):
        click.echo(
            f"Using the dev runner's Redis at {display_url(settings_url())} "
            "(instance/dev-runner.json; set REDIS_URL to use another).",
            err=True,
        )
    service, settings = current_app.extensions["intake"], current_app.config["INTAKE"]
    record = (
        FolderRecord(service.connection, tenant, source or str(Path(paths[0]).resolve()))
        if sync
        else None
    )
    found = list(_files(paths))
    if not found:
        if record is not None and record.documents():
            raise click.ClickException(
                f"{paths[0]} is empty: --sync would remove all {len(record.documents())} "
                "documents it brought. Check the folder (a disk not mounted?); to remove them, "
                "delete them through the API or the pages."
            )
        raise click.ClickException("no files to ingest")
    handles = [path.open("rb") for path, _ in found]
    try:  # the files are read through once to be checked, then again, in pieces, to be stored
        storages = [
            FileStorage(stream=h, filename=doc_id) for h, (_, doc_id) in zip(handles, found)
        ]
        checked = accept(storages, [doc_id for _, doc_id in found], settings)
        for rejection in checked.rejected:
            click.echo(f"rejected {rejection['filename']}: {rejection['message']}", err=True)
        batch = None
        if checked.uploads:
            try:
                batch = service.submit(tenant, checked.uploads, priority=priority, force=force)
            except LimitReached as exc:
                raise click.ClickException(f"refused, try again later ({exc.limit})") from None
            except NotReplicated as exc:  # stored: running the same command again is safe
                raise click.ClickException(exc.message) from None
    finally:
        for handle in handles:
            handle.close()
    if record is not None:
        # The ids the folder's files are kept under, cleaned as the upload cleaned them.
        _sync_removals(service, record, [clean_path(doc_id) for _, doc_id in found], batch)
    if batch is None:
        sys.exit(1 if checked.rejected else 0)
    _finish(service, tenant, batch, no_wait, refused=bool(checked.rejected))


def _finish(service: Intake, tenant: str, batch: dict, no_wait: bool, refused: bool) -> None:
    """Print the tasks and return (`no_wait`), or follow the batch with the bar and exit: 1
    when anything failed, was canceled or `refused`, NO_WORKER_EXIT when no worker listens."""
    if no_wait:
        for task in batch["tasks"]:
            click.echo(f"{task['id']}  {task['status']:<9}  {task['document_id']}")
        return
    final = _follow(service, tenant, batch["batch_id"])
    if final is None:
        sys.exit(NO_WORKER_EXIT)
    sys.exit(_summary(final) or (1 if refused else 0))


def _sync_removals(
    service: Intake, record: FolderRecord, present: list[str], batch: dict | None
) -> None:
    """Record the version of each document this sync submitted (or found unchanged), remove
    the documents of files gone since the last one while they are still the version this
    folder brought, and say what the sync did. A file refused this time (now unreadable) is
    still present: its document stays as it was."""
    tasks = batch["tasks"] if batch else []
    record.add({task["document_id"]: task["id"] for task in tasks})
    brought = record.documents()
    removed = left = 0
    for document_id in documents_gone(brought, present):
        reason = _remove_one(service, record.tenant, document_id, brought[document_id])
        if reason:
            click.echo(f"sync: left {document_id} alone: {reason}")
            left += 1
        else:
            removed += 1
        record.forget(document_id)
    unchanged = sum(1 for task in tasks if task["duplicate"])
    click.echo(
        f"sync: {len(tasks) - unchanged} new or changed, {unchanged} unchanged, "
        f"{removed} removed" + (f", {left} left alone" if left else "")
    )


def _remove_one(service: Intake, tenant: str, document_id: str, version: str | None) -> str:
    """Remove a gone file's document if it is still the version this folder brought; else
    why it stays (empty when removed, or already gone)."""
    if version is None:
        return (
            "this folder's record (written by an earlier release) does not say which "
            "version the folder brought, so it may be another folder's or an upload's; "
            "delete it through the API or the pages if it should go"
        )
    try:
        if not service.delete_document(tenant, document_id, version=version):
            return "another folder or upload replaced it since this folder brought it"
    except NotFound:  # already deleted through the API or a page
        pass
    return ""


def settings_url() -> str:
    return current_app.config["INTAKE"].redis_url


def _log_to_file(path: Path) -> None:
    """Intake's log lines (one per document submitted) into `path`, not between the bar's
    redraws on the terminal."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for handler in logging.getLogger(LOGGER_NAME).handlers:
        # Only what goes to the terminal itself: a handler on any other stream is someone's.
        if isinstance(handler, logging.StreamHandler) and handler.stream in (
            sys.__stderr__,
            sys.__stdout__,
        ):
            handler.setStream(path.open("a", encoding="utf-8"))


def _follow(service: Intake, tenant: str, batch_id: str) -> dict | None:
    """Redraw one progress line until the batch is terminal; returns its last state, or None
    when nothing moved for NO_WORKER_SECONDS and no worker listens on this Redis (after saying
    so: waiting would be forever)."""
    width, alone_since, last = 0, None, None
    while True:
        batch = service.batches.get(tenant, batch_id)
        moved, last = (
            last != (batch["progress"], batch["counts"]),
            (batch["progress"], batch["counts"]),
        )
        if batch["status"] in BATCH_LIVE and not moved and not service.worker_count():
            alone_since = alone_since or time.monotonic()
            if time.monotonic() - alone_since >= NO_WORKER_SECONDS:
                click.echo()
                live = sum(batch["counts"][s] for s in ("pending", "running", "retrying"))
                url = current_app.config["INTAKE"].redis_url
                click.echo(
                    f"No worker is listening on {display_url(url)}: {live} document"
                    f"{'s wait' if live != 1 else ' waits'} in its queue and will run "
                    "when one starts. Start workers on this Redis (`make run` starts two), or set "
                    f"REDIS_URL to the Redis your workers use. Batch {batch_id}.",
                    err=True,
                )
                return None
        else:
            alone_since = None
        done = sum(batch["counts"][s] for s in TERMINAL)
        filled = BAR_WIDTH * batch["progress"] // 100
        left = eta_text(batch.get("eta_seconds")) if batch["status"] in BATCH_LIVE else ""
        line = (
            f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {batch['progress']:3d}%  "
            f"{done}/{batch['size']} done" + (f", {left}" if left else "")
        )
        # Padded: a shorter line (the estimate gone) must not leave the end of the last one.
        click.echo("\r" + line.ljust(width), nl=False)
        width = max(width, len(line))
        if batch["status"] not in BATCH_LIVE:
            click.echo()
            return batch
        time.sleep(0.5)


def _summary(batch: dict) -> int:
    """Print what happened; 1 when anything failed or was canceled, else 0."""
    counts = batch["counts"]
    click.echo(
        f"{counts['succeeded']} succeeded, {counts['failed']} failed, {counts['canceled']} canceled"
    )
    for task in batch["tasks"]:
        if task["status"] == "failed" and task["error"]:
            click.echo(f"  failed {task['document_id']}: {task['error']['message']}")
    return 1 if counts["failed"] or counts["canceled"] else 0


@click.command("reindex")
@with_app
@click.argument("document_ids", nargs=-1)
@click.option("--all", "reindex_all", is_flag=True, help="Every document of the tenant.")
@click.option("--tenant", default="default", show_default=True)
@click.option(
    "--force",
    is_flag=True,
    help="Also the documents already indexed under the current pipeline version "
    "and, with --all, those whose last run failed.",
)
@click.option(
    "--priority", type=click.Choice(PRIORITIES), default=REINDEX_PRIORITY, show_default=True
)
@click.option("--no-wait", is_flag=True, help="Print the task ids and return at once.")
def reindex_command(
    document_ids: tuple[str, ...],
    reindex_all: bool,
    tenant: str,
    force: bool,
    priority: str,
    no_wait: bool,
) -> None:
    """Run documents again from their stored originals under the current pipeline (after a
    change of chunk size, embedder or OCR setting), then show a progress bar until every one
    is done; each stays findable from its previous version meanwhile. Exit code 1 if any
    failed, 3 if no worker listens on the Redis it uses."""
    if reindex_all == bool(document_ids):
        raise click.UsageError("name document ids, or --all")
    _log_to_file(Path(current_app.instance_path) / "ingest.log")
    service = current_app.extensions["intake"]
    try:
        batch, rejected = service.reindex(
            tenant, None if reindex_all else list(document_ids), force=force, priority=priority
        )
    except LimitReached as exc:
        if exc.limit == "reindex_too_large":
            raise click.ClickException(f"refused: {exc.message}") from None
        raise click.ClickException(f"refused, try again later ({exc.limit})") from None
    refused = [r for r in rejected if r["code"] != LAST_RUN_FAILED]
    for rejection in refused:
        click.echo(f"not re-indexed {rejection['document_id']}: {rejection['message']}", err=True)
    if len(refused) < len(rejected):
        click.echo(
            f"{len(rejected) - len(refused)} left out, their last run failed (name "
            "them, or --force, to run them again)",
            err=True,
        )
    if batch is None:
        raise click.ClickException("no documents to re-index")
    duplicates = sum(1 for task in batch["tasks"] if task["duplicate"])
    if duplicates:
        click.echo(
            f"{duplicates} already indexed under the current pipeline, or being "
            "re-indexed (--force to run the former again)",
            err=True,
        )
    _finish(service, tenant, batch, no_wait, refused=bool(refused))


@click.command("failed")
@with_app
@click.option("--tenant", default="default", show_default=True)
def failed_command(tenant: str) -> None:
    """List the dead letters: id, document, step and reason."""
    for task in current_app.extensions["intake"].list_failed(tenant, limit=1000)["tasks"]:
        error = task["error"] or {}
        retry = "retryable" if error.get("retryable") else "fix the file"
        click.echo(
            f"{task['id']}  {task['document_id']}  [{error.get('step')}] "
            f"{error.get('message')} ({retry})"
        )


@click.command("retry")
@with_app
@click.argument("task_ids", nargs=-1)
@click.option("--all", "retry_all", is_flag=True, help="Every retryable dead letter.")
@click.option("--tenant", default="default", show_default=True)
def retry_command(task_ids: tuple[str, ...], retry_all: bool, tenant: str) -> None:
    """Start a new run of failed (retryable) or canceled tasks."""
    service = current_app.extensions["intake"]
    if retry_all:
        task_ids = tuple(t["id"] for t in service.list_failed(tenant, limit=10000)["tasks"])
    if not task_ids:
        raise click.UsageError("give task ids, or --all")
    failures = 0
    for task_id in task_ids:
        try:
            service.retry(tenant, task_id)
            click.echo(f"{task_id}  retrying")
        except (NotFound, NotNow) as exc:
            click.echo(f"{task_id}  {exc.code}: {exc.message}")
            failures += 1
    sys.exit(1 if failures else 0)
