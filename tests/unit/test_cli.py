"""The CLI on fakeredis: ingest a folder, list dead letters, retry."""
from __future__ import annotations

import threading

from tests.samples import make_pdf_no_text


def _invoke_while_working(app, run_jobs, args):
    """Run the CLI in a thread while this (main) thread drains the queues, as workers would."""
    result = {}
    thread = threading.Thread(target=lambda: result.update(
        r=app.test_cli_runner().invoke(args=args)))
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


def test_ingest_says_at_once_when_no_worker_listens_instead_of_waiting_forever(app, tmp_path,
                                                                            monkeypatch):
    monkeypatch.setattr("webapp.ingest.NO_WORKER_SECONDS", 0.3)
    (tmp_path / "a.txt").write_text("Words.")
    (tmp_path / "b.txt").write_text("More words.")
    result = app.test_cli_runner().invoke(args=["ingest", str(tmp_path)])
    assert result.exit_code == 3, result.output
    assert "No worker is listening on redis://" in result.output
    assert "2 documents wait in its queue" in result.output
