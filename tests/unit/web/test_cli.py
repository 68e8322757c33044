"""The CLI on fakeredis: ingest a folder, list dead letters, retry."""

from __future__ import annotations

import threading

from tests.samples import make_pdf_no_text
from tests.unit.conftest import upload


def _invoke_while_working(app, run_jobs, args):
    """Run the CLI in a thread while this (main) thread drains the queues, as workers would."""
    result = {}
    thread = threading.Thread(
        target=lambda: result.update(r=app.test_cli_runner().invoke(args=args))
    )
    thread.start()
    while thread.is_alive():
        run_jobs()
        thread.join(0.1)
    return result["r"]


def test_ingest_a_folder_shows_progress_and_exits_0(app, run_jobs, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("First note about walruses.")
    (tmp_path / "b.md").write_text("# Second\n\nAbout narwhals.")
    result = _invoke_while_working(app, run_jobs, ["ingest", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "100%" in result.output and "2 succeeded, 0 failed" in result.output
    service = app.extensions["intake"]
    newest = service.batches.recent("default")["batches"][0]["id"]
    ids = {t["document_id"] for t in service.batches.get("default", newest)["tasks"]}
    assert ids == {"notes/a.txt", "b.md"}


def test_ingest_exits_1_when_a_document_fails(app, run_jobs, tmp_path):
    (tmp_path / "scan.pdf").write_bytes(make_pdf_no_text())
    result = _invoke_while_working(app, run_jobs, ["ingest", str(tmp_path / "scan.pdf")])
    assert result.exit_code == 1
    assert "no text layer" in result.output
    listed = app.test_cli_runner().invoke(args=["failed"])
    assert "scan.pdf" in listed.output and "fix the file" in listed.output
    retried = app.test_cli_runner().invoke(args=["retry", "--all"])
    assert retried.exit_code == 1 and "not_retryable" in retried.output


def test_ingest_no_wait_prints_task_ids(app, tmp_path):
    (tmp_path / "a.txt").write_text("Words.")
    result = app.test_cli_runner().invoke(args=["ingest", "--no-wait", str(tmp_path)])
    assert result.exit_code == 0 and "pending" in result.output and "a.txt" in result.output


def test_ingest_says_at_once_when_no_worker_listens_instead_of_waiting_forever(
    app, tmp_path, monkeypatch
):
    monkeypatch.setattr("webapp.cli.documents.NO_WORKER_SECONDS", 0.3)
    (tmp_path / "a.txt").write_text("Words.")
    (tmp_path / "b.txt").write_text("More words.")
    result = app.test_cli_runner().invoke(args=["ingest", str(tmp_path)])
    assert result.exit_code == 3, result.output
    assert "No worker is listening on redis://" in result.output
    assert "2 documents wait in its queue" in result.output


def test_ingest_writes_its_log_lines_to_a_file_not_between_the_bar_s_redraws(app, tmp_path):
    import logging
    import sys

    from jobs.core.logs import JsonFormatter

    logger = logging.getLogger("intake")
    terminal = logging.StreamHandler(sys.__stderr__)  # as configure_logging() makes it
    terminal.setFormatter(JsonFormatter())
    logger.addHandler(terminal)
    level = logger.level
    logger.setLevel(logging.INFO)
    app.instance_path = str(tmp_path / "instance")
    try:
        (tmp_path / "a.txt").write_text("Words.")
        result = app.test_cli_runner().invoke(args=["ingest", "--no-wait", str(tmp_path / "a.txt")])
        assert result.exit_code == 0, result.output
        assert terminal.stream is not sys.__stderr__, "the terminal's handler writes elsewhere"
        assert '"task_submitted"' in (tmp_path / "instance" / "ingest.log").read_text()
    finally:
        logger.removeHandler(terminal)
        logger.setLevel(level)
        if terminal.stream is not sys.__stderr__:
            terminal.stream.close()


def test_without_redis_url_the_cli_finds_a_running_dev_runner_s_redis(tmp_path, monkeypatch):
    import subprocess

    from runner import record
    from webapp import create_app
    from webapp.cli.app import on_dev_runner
    from webapp.config import load_config

    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("REDIS_SENTINELS", raising=False)
    monkeypatch.setattr("runner.record.INSTANCE_DIR", tmp_path)
    record.write(tmp_path, "redis://127.0.0.1:47123/0")
    assert load_config()["REDIS_URL_FROM_DEV_RUNNER"] is False, "a web process never reads it"
    app = on_dev_runner(create_app({"TESTING": True}))
    assert app.config["INTAKE"].redis_url == "redis://127.0.0.1:47123/0"
    assert app.config["REDIS_URL_FROM_DEV_RUNNER"] is True
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere:6379/0")
    app = on_dev_runner(create_app({"TESTING": True}))
    assert app.config["INTAKE"].redis_url == "redis://elsewhere:6379/0", "REDIS_URL wins"
    monkeypatch.delenv("REDIS_URL")
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / record.RECORD_NAME).write_text(
        f'{{"redis_url": "redis://127.0.0.1:47123/0", "pid": {gone.pid}}}'
    )
    app = on_dev_runner(create_app({"TESTING": True}))
    assert app.config["REDIS_URL_FROM_DEV_RUNNER"] is False, "a runner that exited is not used"
    record.write(tmp_path, "redis://127.0.0.1:47123/0")
    record.remove(tmp_path)
    assert not (tmp_path / record.RECORD_NAME).exists()


def _found(service, word):
    return {hit["document_id"] for hit in service.search("default", word).results}


def test_ingest_sync_submits_new_and_changed_files_skips_the_rest_and_removes_deleted_ones(
    app, run_jobs, tmp_path
):
    folder = tmp_path / "kb"
    (folder / "notes").mkdir(parents=True)
    (folder / "keep.txt").write_text("Keep this note about albatrosses.")
    (folder / "edit.txt").write_text("A draft about cormorants.")
    (folder / "notes" / "gone.txt").write_text("A note about dodos.")
    first = _invoke_while_working(app, run_jobs, ["ingest", "--sync", str(folder)])
    assert first.exit_code == 0, first.output
    assert "sync: 3 new or changed, 0 unchanged, 0 removed" in first.output
    service = app.extensions["intake"]
    service.submit("default", [_upload("elsewhere.txt", b"Uploaded elsewhere: dodos too.")])
    run_jobs()

    (folder / "edit.txt").write_text("The final text about puffins.")
    (folder / "notes" / "gone.txt").unlink()
    (folder / "new.txt").write_text("A new note about gannets.")
    second = _invoke_while_working(app, run_jobs, ["ingest", "--sync", str(folder)])
    assert second.exit_code == 0, second.output
    assert "sync: 2 new or changed, 1 unchanged, 1 removed" in second.output
    assert _found(service, "gannets") == {"new.txt"}
    assert _found(service, "puffins") == {"edit.txt"} and not _found(service, "cormorants")
    assert _found(service, "dodos") == {"elsewhere.txt"}, "only what the sync brought is removed"
    assert _found(service, "albatrosses") == {"keep.txt"}
    batches = [b["id"] for b in service.batches.recent("default")["batches"]]
    kept = [
        {t["document_id"]: t["id"] for t in service.batches.get("default", b)["tasks"]}["keep.txt"]
        for b in (batches[0], batches[-1])
    ]
    assert kept[0] == kept[1], "the unchanged file is the same task, not ingested again"

    third = _invoke_while_working(app, run_jobs, ["ingest", "--sync", str(folder)])
    assert "sync: 0 new or changed, 3 unchanged, 0 removed" in third.output


def test_ingest_sync_refuses_an_empty_folder_instead_of_removing_everything(
    app, run_jobs, tmp_path
):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "a.txt").write_text("Words about herons.")
    assert _invoke_while_working(app, run_jobs, ["ingest", "--sync", str(folder)]).exit_code == 0
    (folder / "a.txt").unlink()
    result = app.test_cli_runner().invoke(args=["ingest", "--sync", str(folder)])
    assert result.exit_code == 1 and "would remove all 1 documents it brought" in result.output
    assert _found(app.extensions["intake"], "herons") == {"a.txt"}
    two = app.test_cli_runner().invoke(args=["ingest", "--sync", str(folder), str(folder)])
    assert two.exit_code == 2 and "exactly one folder" in two.output


def _upload(name, data):
    from jobs.tasks.submit import Upload

    return Upload.from_bytes(name, name, data, "txt")


def _sync(app, run_jobs, folder):
    result = _invoke_while_working(app, run_jobs, ["ingest", "--sync", str(folder)])
    assert result.exit_code == 0, result.output
    return result.output


def test_ingest_sync_leaves_a_document_another_folder_replaced(app, run_jobs, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "README.md").write_text("# A\n\nFolder A's readme about ospreys.")
    (second / "README.md").write_text("# B\n\nFolder B's readme about kestrels.")
    _sync(app, run_jobs, first)
    _sync(app, run_jobs, second)
    service = app.extensions["intake"]
    assert _found(service, "kestrels") == {"README.md"} and not _found(service, "ospreys")

    (first / "README.md").unlink()
    (first / "other.txt").write_text("Something else, about terns.")
    output = _sync(app, run_jobs, first)
    assert _found(service, "kestrels") == {"README.md"}, "B's document outlives A's sync"
    assert "left README.md alone: another folder or upload replaced it" in output
    assert "sync: 1 new or changed, 0 unchanged, 0 removed, 1 left alone" in output
    assert "README.md" not in _sync(app, run_jobs, first), "A's record let the id go"

    (second / "README.md").unlink()
    (second / "keep.txt").write_text("B keeps a file about merlins.")
    assert "1 removed" in _sync(app, run_jobs, second), "B removes what B brought"
    assert not _found(service, "kestrels")


def test_ingest_sync_leaves_a_document_an_upload_replaced_even_before_it_runs(
    app, client, run_jobs, tmp_path
):
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "README.md").write_text("The folder's readme about ospreys.")
    (folder / "keep.txt").write_text("A file that stays, about terns.")
    _sync(app, run_jobs, folder)
    uploaded = upload(
        client, ("README.md", b"The API's readme about kestrels."), document_id="README.md"
    )
    assert uploaded.status_code == 202, uploaded.get_json()
    task_id = uploaded.get_json()["tasks"][0]["id"]

    (folder / "README.md").unlink()  # the upload is still pending: it is what README.md becomes
    result = app.test_cli_runner().invoke(args=["ingest", "--sync", "--no-wait", str(folder)])
    assert result.exit_code == 0, result.output
    assert "left README.md alone: another folder or upload replaced it" in result.output
    assert client.get(f"/api/tasks/{task_id}").get_json()["status"] == "pending"
    run_jobs()
    assert client.get(f"/api/tasks/{task_id}").get_json()["status"] == "succeeded"
    service = app.extensions["intake"]
    assert _found(service, "kestrels") == {"README.md"} and not _found(service, "ospreys")


def test_ingest_sync_removes_its_own_version_still_pending(app, run_jobs, tmp_path):
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "draft.txt").write_text("A draft about ospreys.")
    (folder / "keep.txt").write_text("A file that stays, about terns.")
    queued = app.test_cli_runner().invoke(args=["ingest", "--sync", "--no-wait", str(folder)])
    assert queued.exit_code == 0, queued.output
    (folder / "draft.txt").unlink()
    output = _sync(app, run_jobs, folder)
    assert "0 new or changed, 1 unchanged, 1 removed" in output
    assert not _found(app.extensions["intake"], "ospreys")
    assert _found(app.extensions["intake"], "terns") == {"keep.txt"}


def test_ingest_sync_leaves_an_id_recorded_without_its_version_and_records_the_rest(
    app, redis, run_jobs, tmp_path
):
    from jobs.core import keys

    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "kept.txt").write_text("A kept file about terns.")
    service = app.extensions["intake"]
    service.submit(
        "default",
        [
            _upload("gone.txt", b"A file about ospreys."),
            _upload("kept.txt", b"A kept file about terns."),
        ],
    )
    run_jobs()
    source = str(folder.resolve())
    redis.sadd(keys.folder_sync("default", source), "gone.txt", "kept.txt")  # ids only

    output = _sync(app, run_jobs, folder)
    assert "left gone.txt alone: this folder's record (written by an earlier release)" in output
    assert "sync: 0 new or changed, 1 unchanged, 0 removed, 1 left alone" in output
    assert _found(service, "ospreys") == {"gone.txt"}
    kept = service.batches.get("default", service.batches.recent("default")["batches"][0]["id"])
    assert redis.hgetall(keys.folder_sync_versions("default", source)) == {
        b"kept.txt": kept["tasks"][0]["id"].encode()
    }
    assert not redis.exists(keys.folder_sync("default", source))

    (folder / "kept.txt").unlink()
    (folder / "new.txt").write_text("New.")
    assert "1 new or changed, 0 unchanged, 1 removed" in _sync(app, run_jobs, folder)
    assert not _found(service, "terns")


def test_ingest_sync_keeps_a_file_whose_name_uploads_cleaned(app, run_jobs, tmp_path):
    """A document id is the file's path cleaned (NFC as macOS does not write it, no control or
    bidi characters): the sync compared the folder's raw paths with the ids it had recorded,
    and removed such a file's document as soon as it had brought it."""
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "cafe\u0301.txt").write_text("A note about ospreys.")
    (folder / "report\u202etxt.md").write_text("A report about shearwaters.")
    assert "sync: 2 new or changed, 0 unchanged, 0 removed" in _sync(app, run_jobs, folder)
    service = app.extensions["intake"]
    assert _found(service, "ospreys") == {"caf\u00e9.txt"}
    assert _found(service, "shearwaters") == {"reporttxt.md"}
    assert "sync: 0 new or changed, 2 unchanged, 0 removed" in _sync(app, run_jobs, folder)
