"""The documents page in Chromium against the running system (docs/architecture.md §6): the
library's rows, the name and status filters, Download (the original's bytes), Re-index (its
batch page until it succeeds), and Delete, which asks first: with JavaScript a confirm()
dialog (static/confirm.js), without it a page of its own.

The session's library is shared by every test of the run: each test's names carry a word of
its own, and the rows are found by it. The README's screenshot of the page is taken here.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from tests.browser.conftest import SCREENSHOTS
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import txt, upload, wait_terminal
from tests.samples import make_pdf_no_text

QUESTION = "Delete {}? This removes its chunks, its records and its original."


def _ingest(api: ApiClient, files: list[tuple[str, bytes, str]], **form: str) -> dict[str, str]:
    """Upload `files` and wait until each is done: document id → its final status."""
    response, _ = upload(api, files, **form)
    assert response.status_code == 202, response.text[:300]
    tasks = response.json()["tasks"]
    final, _ = wait_terminal(api, [t["id"] for t in tasks])
    return {t["document_id"]: final[t["id"]]["status"] for t in tasks}


def _row(page, document_id: str):
    return page.locator(f'tr[data-document-id="{document_id}"]')


def test_the_library_with_download_reindex_and_delete(page, api):
    run = uuid.uuid4().hex[:8]
    handbook = ("# Staff handbook\n\n" + "Holidays are booked a month ahead. " * 60).encode()
    alpha, beta, scan = f"handbook-{run}.md", f"tide-tables-{run}.txt", f"scan-{run}.pdf"
    alpha_id = f"policies/{alpha}"  # an id of its own, with a slash: shown under the name
    statuses = _ingest(
        api,
        [
            (alpha, handbook, "text/markdown"),
            txt(beta, f"High water at 06:12 ({run})."),
            (scan, make_pdf_no_text(), "application/pdf"),
        ],
        document_id=alpha_id,
    )
    assert statuses == {alpha_id: "succeeded", beta: "succeeded", scan: "failed"}

    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Documents").click()
    page.wait_for_url("**/documents")
    for name in (alpha_id, beta):
        assert _row(page, name).locator(".status").inner_text() == "Succeeded"
    assert _row(page, scan).locator(".status").inner_text() == "Failed"
    handbook_row = _row(page, alpha_id)
    assert handbook_row.locator("th").inner_text() == f"{alpha}\n{alpha_id}"
    assert handbook_row.locator("td.num").nth(1).inner_text() == "2.1 KiB"

    page.fill("#q", f"HANDBOOK-{run}")  # any case
    page.locator("form.filter-form button[type=submit]").click()
    page.wait_for_url(re.compile(r"/documents\?q=HANDBOOK-"))
    assert page.locator("table.documents tbody tr").count() == 1
    assert _row(page, alpha_id).is_visible()
    page.goto(f"/documents?q={run}")
    page.select_option("select#status", "failed")
    page.locator("form.filter-form button[type=submit]").click()
    page.wait_for_url("**status=failed**")
    assert page.locator("table.documents tbody tr").count() == 1 and _row(page, scan).is_visible()

    page.goto(f"/documents?q={run}")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "documents.png"), full_page=True)

    with page.expect_download() as downloading:
        _row(page, alpha_id).get_by_role("link", name=re.compile("^Download")).click()
    download = downloading.value
    assert download.suggested_filename == alpha
    assert Path(download.path()).read_bytes() == handbook

    _row(page, alpha_id).get_by_role("button", name=re.compile("^Re-index")).click()
    page.wait_for_url(re.compile(r"/batches/[0-9a-f]{32}$"))
    assert page.locator(".flash").inner_text() == f"Re-indexing {alpha}."
    poll(
        lambda: page.locator("[data-field=batch_status]").inner_text(),
        lambda text: text == "Succeeded",
        timeout=20,
        interval=0.1,
        message="the re-index batch succeeds on its page",
    )

    page.goto(f"/documents?q={run}")
    asked: list[str] = []

    def accept(dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    with page.expect_navigation():
        _row(page, beta).get_by_role("button", name=re.compile("^Delete")).click()
    assert asked == [QUESTION.format(beta)]
    assert page.url.endswith(f"/documents?q={run}")
    assert page.locator(".flash").inner_text() == f"Deleted {beta}."
    assert _row(page, beta).count() == 0 and _row(page, alpha_id).count() == 1
    assert api.get(f"/api/documents/{beta}").status_code == 404


def test_a_dismissed_confirm_deletes_nothing(page, api):
    run = uuid.uuid4().hex[:8]
    name = f"kept-{run}.txt"
    assert _ingest(api, [txt(name, f"Kept words ({run}).")]) == {name: "succeeded"}
    page.goto(f"/documents?q={run}")
    page.once("dialog", lambda dialog: dialog.dismiss())
    _row(page, name).get_by_role("button", name=re.compile("^Delete")).click()
    page.wait_for_timeout(300)  # a submit would have started by now
    assert page.url.endswith(f"/documents?q={run}")
    assert _row(page, name).count() == 1
    assert api.get(f"/api/documents/{name}").status_code == 200


def test_delete_without_javascript_asks_on_a_page(page_without_js, api):
    page = page_without_js
    run = uuid.uuid4().hex[:8]
    name = f"gone-{run}.txt"
    assert _ingest(api, [txt(name, f"Words to delete ({run}).")]) == {name: "succeeded"}
    page.goto(f"/documents?q={run}")

    _row(page, name).get_by_role("button", name=re.compile("^Delete")).click()
    page.wait_for_url("**/documents/delete")
    assert page.locator("p.question").inner_text() == QUESTION.format(name)
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url(re.compile(re.escape(f"/documents?q={run}") + "$"))
    assert _row(page, name).count() == 1, "Cancel deletes nothing"

    _row(page, name).get_by_role("button", name=re.compile("^Delete")).click()
    page.wait_for_url("**/documents/delete")
    page.locator("form.confirm button[type=submit]").click()
    page.wait_for_url(re.compile(re.escape(f"/documents?q={run}") + "$"))
    assert page.locator(".flash").inner_text() == f"Deleted {name}."
    assert _row(page, name).count() == 0
    assert api.get(f"/api/documents/{name}").status_code == 404
