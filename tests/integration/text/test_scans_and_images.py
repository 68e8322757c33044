"""Scans, images and the new formats' bad files through the real system (docs/architecture.md §7):
gunicorn, real rq workers running the real OCR engine, a real redis-server.

A scanned page is read by OCR only where the PDF has no text layer, the task page says which
page OCR is on while it reads, `result.ocr_pages` counts them, and a search hit on a scanned
page says its page. Every bad file of a new kind fails at once with a permanent, readable reason
and is never retried.
"""

from __future__ import annotations

import textwrap
from urllib.parse import quote

import pytest

from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, upload, wait_terminal
from tests.samples import (
    make_epub,
    make_pdf_pages,
    make_pptx,
    make_scan_pdf,
    make_text_image,
    make_xlsx,
    merge_pdfs,
    zip_bomb,
)

pytestmark = pytest.mark.integration

OCR_BOUND = 240.0  # seconds for a few pages of OCR on a loaded 2-core machine, with margin
BAD_BOUND = 90.0  # seconds for a bad file to end `failed`
OLE_ENCRYPTED = (
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
    + bytes(504)
    + "EncryptionInfo\0EncryptedPackage".encode("utf-16-le")
    + bytes(1024)
)


def _hits(client: ApiClient, query: str, task_id: str) -> list[dict]:
    results = get_json(client, f"/api/search?q={quote(query)}&k=50")["results"]
    return [hit for hit in results if hit["task_id"] == task_id]


def test_only_the_scanned_page_is_read_by_ocr_and_its_hit_says_its_page(api):
    # Page 1 ends the first chunk (about 700 of its 1,000 characters) and page 2 is too long to
    # join it: the next chunk starts at the top of page 2, and page 2 (about 400 characters) is
    # too short to end it, so it runs on into page 3 and says so.
    document = merge_pdfs(
        make_pdf_pages([textwrap.fill("The harbour master keeps the tide tables. " * 17, 80)]),
        make_scan_pdf(
            [
                ["Walrus sightings near the lighthouse", "were counted every morning"]
                + [f"Day {day}: seals resting on the north rocks" for day in range(1, 9)]
            ]
        ),
        make_pdf_pages([textwrap.fill("The ferry timetable changes in winter. " * 20, 80)]),
    )
    response, _ = upload(api, [("logbook.pdf", document, "application/pdf")])
    assert response.status_code == 202, response.text
    task_id = response.json()["tasks"][0]["id"]

    running = poll(
        lambda: get_json(api, f"/api/tasks/{task_id}"),
        lambda t: (
            t["step_detail"].startswith("OCR page") or t["status"] not in ("pending", "running")
        ),
        timeout=OCR_BOUND,
        interval=0.05,
        message="the task page saying which page OCR reads",
    )
    assert running["step_detail"] == "OCR page 1 of 1", running
    assert running["current_step"] == "parsing"

    final, _ = wait_terminal(api, [task_id], timeout=OCR_BOUND)
    task = final[task_id]
    assert task["status"] == "succeeded", task["error"]
    assert (task["result"]["pages"], task["result"]["ocr_pages"]) == (3, 1)
    assert task["result"]["warnings"] == []

    scanned = _hits(api, "walrus lighthouse", task_id)
    assert scanned and scanned[0]["location"] == {"page": 2, "page_end": 3}, scanned
    assert "Walrus sightings near the lighthouse" in scanned[0]["text"]
    assert _hits(api, "ferry timetable", task_id)[0]["location"] in (
        {"page": 2, "page_end": 3},
        {"page": 3},
    )


def test_an_image_is_read_by_ocr_and_found(api):
    image = make_text_image(["Penguin colony survey", "Antarctic summer season"], "JPEG")
    response, _ = upload(api, [("survey.jpg", image, "image/jpeg")])
    assert response.status_code == 202, response.text
    task_id = response.json()["tasks"][0]["id"]
    task = wait_terminal(api, [task_id], timeout=OCR_BOUND)[0][task_id]
    assert task["status"] == "succeeded", task["error"]
    assert task["result"]["ocr_pages"] == 1
    hits = _hits(api, "penguin colony", task_id)
    assert hits and hits[0]["location"] == {"page": 1}


@pytest.fixture(scope="module")
def bad_batch(web, worker_pool):
    """One upload of every bad file, followed to the end once for the tests of this module."""
    worker_pool.ensure(2)
    image = make_text_image(["Cut off halfway"])
    files = [
        ("bomb.pptx", zip_bomb(make_pptx([{"title": "A slide"}]), "ppt/slides/slide1.xml")),
        (
            "bomb.xlsx",
            zip_bomb(make_xlsx({"Data": [["Name"], ["Apples"]]}), "xl/worksheets/sheet1.xml"),
        ),
        (
            "bomb.epub",
            zip_bomb(make_epub("T", "A", [("One", "Words. " * 50)]), "EPUB/chapter1.xhtml"),
        ),
        ("locked.xlsx", OLE_ENCRYPTED),
        ("cut.png", image[: len(image) // 2]),
        ("scan-10000.pdf", make_pdf_pages([None] * 10_000)),
    ]
    with ApiClient(web.url) as client:
        response, _ = upload(
            client, [(name, data, "application/octet-stream") for name, data in files]
        )
        assert response.status_code == 202, response.text
        body = response.json()
        assert body["rejected"] == [], body["rejected"]
        final, _ = wait_terminal(client, [t["id"] for t in body["tasks"]], timeout=BAD_BOUND)
        failed = {t["id"] for t in get_json(client, "/api/failed?limit=200")["tasks"]}
    return {t["filename"]: final[t["id"]] for t in body["tasks"]}, failed


@pytest.mark.parametrize(
    "name, code, words",
    [
        ("bomb.pptx", "too_large", "presentation expands to"),
        ("bomb.xlsx", "too_large", "workbook expands to"),
        ("bomb.epub", "too_large", "e-book expands to"),
        ("locked.xlsx", "encrypted", "password-protected"),
        ("cut.png", "corrupt", "damaged or truncated"),
        ("scan-10000.pdf", "too_large", "10,000 pages without text"),
    ],
)
def test_bad_files_of_the_new_kinds_fail_at_once_and_are_never_retried(
    bad_batch, name, code, words
):
    by_name, failed = bad_batch
    task = by_name[name]
    assert task["status"] == "failed" and task["attempts"] == 1, task
    assert task["error"]["type"] == code and task["error"]["retryable"] is False, task["error"]
    message = task["error"]["message"]
    assert words in message and message.endswith(".") and "Traceback" not in message, message
    assert task["id"] in failed, "a permanent failure is in the dead-letter list"
