"""What a person sees in Chromium: an upload through the form, then a batch page that follows
the work to the end without a reload; and the same page with JavaScript off."""
from __future__ import annotations

import uuid

from tests.integration.helpers import poll
from tests.samples import make_docx, make_pdf

ROWS = "tr.task-row"


def _files(tmp_path):
    word = uuid.uuid4().hex[:10]
    paths = {
        f"notes-{word}.txt": f"Plain notes about {word}. Second sentence.".encode(),
        f"paper-{word}.pdf": make_pdf(f"A paper that mentions {word}."),
        f"memo-{word}.docx": make_docx([f"A memo about {word}."]),
    }
    for name, data in paths.items():
        (tmp_path / name).write_bytes(data)
    return [str(tmp_path / name) for name in paths]


def _paused(workers):
    """Stop every session worker, so the page first renders the batch queued; restart later."""
    for name in list(workers.names):
        workers.stop(name)


def test_upload_form_then_bars_fill_without_reload(page, workers, tmp_path):
    _paused(workers)
    try:
        page.goto("/")
        page.set_input_files("input[name=files]", _files(tmp_path))
        page.click("form.upload button[type=submit]")
        page.wait_for_url("**/batches/*")
        assert page.locator(ROWS).count() == 3
        assert set(page.locator(f"{ROWS} [data-field=status_text]").all_inner_texts()) == {"Queued"}
        page.evaluate("window.__sameDocument = true")
    finally:
        workers.start(2)

    poll(lambda: page.locator(f"{ROWS} [data-field=status_text]").all_inner_texts(),
         lambda texts: texts == ["Succeeded"] * 3, timeout=60,
         message="every row says Succeeded")
    values = page.locator(f"{ROWS} progress").evaluate_all("bars => bars.map(b => b.value)")
    assert values == [100, 100, 100]
    assert page.locator("[data-field=batch_progress]").evaluate("b => b.value") == 100
    assert page.evaluate("window.__sameDocument") is True, "the page was never reloaded"


def test_without_javascript_the_page_refreshes_itself(page_without_js, api, workers, tmp_path):
    _paused(workers)
    try:
        word = uuid.uuid4().hex[:10]
        body = api.post("/api/documents", files=[
            ("files", (f"nojs-{word}.txt", f"No script needed for {word}.".encode()))]).json()
        page_without_js.goto(body["page_url"])
        assert page_without_js.locator(f"{ROWS} [data-field=status_text]").inner_text() == "Queued"
        refresh = page_without_js.locator("noscript").first.inner_html()
        assert 'http-equiv="refresh"' in refresh
    finally:
        workers.start(2)
    poll(lambda: page_without_js.locator(f"{ROWS} [data-field=status_text]").inner_text(),
         lambda text: text == "Succeeded", timeout=60, interval=0.5,
         message="the self-refreshing page shows Succeeded",
         ignore=(Exception,))
