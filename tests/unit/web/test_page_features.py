"""The pages of issue 4 on fakeredis: the status filter without JavaScript, the search page's
escaping, what the upload form tells its script, the task page's timings and advice, and the
"no progress" hint (docs/architecture.md §6)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from jobs import EXTENSIONS, detect_kind
from tests.samples import make_docx, make_pdf, make_pdf_no_text
from tests.unit.conftest import upload
from tests.unit.web.test_pages import INLINE_SCRIPT, INLINE_STYLE
from webapp import display


def _rows(html: str) -> dict[str, str]:
    """document id → the opening tag of its row."""
    return {
        m.group(2): m.group(1)
        for m in re.finditer(
            r'(<tr class="task-row"[^>]*>)\s*<th scope="row"><a [^>]*>([^<]+)</a>', html
        )
    }


def test_status_filter_hides_other_rows_without_javascript(client, redis):
    batch = upload(client, ("keep.txt", b"Some words."), ("drop.txt", b"Other words.")).get_json()
    drop = next(t["id"] for t in batch["tasks"] if t["document_id"] == "drop.txt")
    assert client.post(f"/api/tasks/{drop}/cancel").status_code == 202

    rows = _rows(client.get(batch["page_url"] + "?status=canceled").get_data(as_text=True))
    assert "hidden" not in rows["drop.txt"] and "hidden" in rows["keep.txt"]
    html = client.get(batch["page_url"] + "?status=canceled").get_data(as_text=True)
    assert re.search(r'data-filter="canceled"[^>]*aria-current="true"', html)
    assert f'value="/batches/{batch["batch_id"]}?status=canceled#t-{drop}"' in html, (
        "after Retry the person comes back to the same filtered view and row"
    )

    every = _rows(client.get(batch["page_url"]).get_data(as_text=True))
    assert not any("hidden" in tag for tag in every.values())
    bogus = _rows(client.get(batch["page_url"] + "?status=<b>").get_data(as_text=True))
    assert not any("hidden" in tag for tag in bogus.values()), "an unknown status shows all"


def test_search_page_escapes_what_documents_contain(client, run_jobs):
    text = b"Zebrafinch notes. <script>alert('x')</script> <b>bold</b> zebrafinch again."
    upload(client, ("<i>odd</i>.txt", text))
    run_jobs()
    response = client.get("/search?q=zebrafinch&k=5")
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "<script>alert" not in html and "<b>bold</b>" not in html and "<i>odd</i>" not in html
    assert "&lt;script&gt;alert(" in html and "&lt;i&gt;odd&lt;/i&gt;.txt" in html
    assert "1 result for" in html
    assert not INLINE_SCRIPT.search(html) and not INLINE_STYLE.search(html)


def test_search_page_without_a_query_is_just_the_form(client):
    html = client.get("/search").get_data(as_text=True)
    assert 'name="q"' in html and "result" not in html.split("</form>")[1]
    assert client.get("/search?q=x&k=abc").status_code == 200
    assert 'value="200"' in client.get("/search?q=x&k=999").get_data(as_text=True)


def test_upload_form_gives_its_script_the_servers_limits(make_app):
    client = make_app(
        INTAKE_MAX_FILE_BYTES=1234, INTAKE_MAX_FILES_PER_REQUEST=7, INTAKE_MAX_REQUEST_BYTES=98765
    ).test_client()
    html = client.get("/").get_data(as_text=True)
    assert 'data-max-file-bytes="1234"' in html and 'data-max-files="7"' in html
    assert 'data-max-request-bytes="98765"' in html and 'data-api-url="/api/documents"' in html
    assert "webkitdirectory" in html and "upload.js" in html
    assert not INLINE_SCRIPT.search(html) and not INLINE_STYLE.search(html)


def test_the_accepted_extensions_are_what_the_server_accepts():
    samples = {
        "txt": b"Words.",
        "md": b"# Title",
        "html": b"<html><p>Hi</p></html>",
        "pdf": make_pdf("Words."),
        "docx": make_docx(["Words."]),
        "png": b"\x89PNG\r\n\x1a\n",
        "jpeg": b"\xff\xd8\xff\xe0",
        "tiff": b"II*\x00",
        "webp": b"RIFF\x00\x00\x00\x00WEBPVP8 ",
    }
    for extension in EXTENSIONS:
        assert any(detect_kind(f"a{extension}", data) for data in samples.values()), extension


def test_task_page_shows_step_timings_and_advice(client, run_jobs):
    good = upload(client, ("good.txt", b"Some words here.")).get_json()["tasks"][0]
    bad = upload(client, ("scan.pdf", make_pdf_no_text())).get_json()["tasks"][0]
    run_jobs()
    html = client.get(good["page_url"]).get_data(as_text=True)
    assert re.search(r'<td class="num">\d+\.\d\d s</td>', html), "each step has a duration"
    assert re.search(r"\d+ chunks?\.", html) and 'data-field="error_box" hidden' in html
    html = client.get(bad["page_url"]).get_data(as_text=True)
    assert display.ADVICE[False] in html
    assert re.search(
        r'<form method="post" action="/tasks/\w+/retry" data-action="retry"\s+hidden', html
    )
    for url in (good["page_url"], bad["page_url"], "/failed", "/search?q=words"):
        page = client.get(url).get_data(as_text=True)
        assert not INLINE_SCRIPT.search(page) and not INLINE_STYLE.search(page), url


def test_no_progress_hint_for_a_running_task_with_an_old_heartbeat(client, redis):
    batch = upload(client, ("a.txt", b"Some words.")).get_json()
    task_id = batch["tasks"][0]["id"]
    old = (datetime.now(UTC) - timedelta(minutes=3, seconds=5)).isoformat()
    redis.hset(f"intake:task:{task_id}", mapping={"status": "running", "updated_at": old})
    assert "No progress for 3 min" in client.get(batch["page_url"]).get_data(as_text=True)
    fresh = datetime.now(UTC).isoformat()
    redis.hset(f"intake:task:{task_id}", mapping={"updated_at": fresh})
    assert "No progress for" not in client.get(batch["page_url"]).get_data(as_text=True)


def test_display_words_and_durations():
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    step = {"started_at": "2025-01-01T11:59:58.500Z", "ended_at": "2025-01-01T12:00:00.000Z"}
    assert display.duration(step) == "1.50 s" and display.duration({"started_at": None}) == ""
    assert display.clock("2025-01-01T11:59:58.500Z") == "11:59:58"
    retrying = {
        "status": "retrying",
        "attempts": 1,
        "max_attempts": 3,
        "status_text": "x",
        "next_attempt_at": "2025-01-01T12:00:04Z",
    }
    assert display.words(retrying, now) == "Attempt 2 of 3 in 4 s"
    assert (
        display.words({**retrying, "next_attempt_at": "2025-01-01T11:00:00Z"}, now)
        == "Attempt 2 of 3 soon"
    )
    running = {"status": "running", "updated_at": "2025-01-01T11:57:30Z"}
    assert display.stalled(running, now) == "No progress for 2 min"
    assert display.stalled({**running, "status": "retrying"}, now) == ""
    failed = {"status": "failed", "step_detail": "x", "error": {"step": "parsing"}}
    assert display.step_text(failed) == "Stopped in Parsing"
    assert display.step_text({"status": "canceled", "step_detail": "Canceled"}) == ""
    assert display.step_text({"status": "running", "step_detail": "Embedding"}) == "Embedding"
