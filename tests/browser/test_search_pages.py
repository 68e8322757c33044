"""What a person sees when searching and opening a finished document in Chromium
(docs/architecture.md §6, §12): the words that matched marked in every language, where each hit is,
the ranking that answered and a choice of it without JavaScript, and a succeeded task's first
chunks, also when it succeeds while its page is open."""

from __future__ import annotations

import textwrap
import uuid
from urllib.parse import quote

from tests.browser.conftest import SCREENSHOTS
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import txt, upload, wait_terminal
from tests.samples import make_pdf_pages, make_scan_pdf, merge_pdfs

CHINESE = (
    "# 失败处理\n\n任务失败三次以后会被转入死信队列，运维人员可以在死信页面上查看原因并重试。"
    "重试会重新计算退避时间。\n\n## 监控\n\n队列长度和工作进程可以在仪表盘上看到。\n"
)


def _ingest(api, files):
    response, _ = upload(api, files)
    assert response.status_code == 202, response.text[:300]
    ids = [t["id"] for t in response.json()["tasks"]]
    final, _ = wait_terminal(api, ids)
    assert all(t["status"] == "succeeded" for t in final.values()), final
    return ids


def test_a_chinese_search_marks_the_word_inside_its_sentence(page, api, workers):
    run = uuid.uuid4().hex[:8]
    _ingest(api, [(f"运维手册-{run}.md", CHINESE.encode(), "text/markdown")])
    page.goto(f"/search?q={quote('死信队列')}")
    row = page.locator("table.results tbody tr", has_text=f"运维手册-{run}").first
    marks = row.locator("td.chunk-text mark").all_inner_texts()
    assert marks and set(marks) == {"死信队列"}, marks
    assert row.locator("td.location").inner_text() == "“失败处理”"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "search-chinese.png"), full_page=True)


def test_a_pdf_hit_says_its_page(page, api, workers):
    run = uuid.uuid4().hex[:8]
    pages = [
        textwrap.fill(sentence * 40, 80)
        for sentence in ("A cover page. ", "Nothing to see here. ", "The quorum rule is here. ")
    ]
    pdf = make_pdf_pages(pages[:2] + [pages[2] + f"\nThe quorum{run} rule."])  # ends page 3
    _ingest(api, [(f"rules-{run}.pdf", pdf, "application/pdf")])
    page.goto(f"/search?q=quorum{run}")
    row = page.locator("table.results tbody tr", has_text=f"rules-{run}.pdf")
    assert row.locator("td.location").inner_text() == "page 3"
    assert row.locator("mark").all_inner_texts() == [f"quorum{run}"]


def test_the_ranking_is_shown_and_chosen_in_the_form_without_javascript(fault, chromium):
    """On the fault stack (an HTTP embedder and pgvector): the default ranks by words and
    meaning; choosing "meaning" in the select and submitting the GET form ranks by meaning."""
    run = uuid.uuid4().hex[:8]
    text = f"The tide{run} almanac of the harbour."
    with ApiClient(fault.url) as client:
        _ingest(client, [txt(f"almanac-{run}.txt", text)])
        poll(
            lambda: client.get("/api/search", params={"q": text}).json()["mode"],
            lambda mode: mode == "hybrid",
            timeout=10,
            interval=0.5,
            message="the fault stack's breaker, if another test left it open, has closed",
        )
    context = chromium.new_context(base_url=fault.url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"/search?q={quote(text)}")
        assert page.locator(".ranked-by").inner_text() == "Ranked by: words and meaning (hybrid)"
        assert page.locator("select#mode").input_value() == ""
        assert page.locator("table.results tbody tr", has_text=f"almanac-{run}.txt").count() == 1
        page.select_option("select#mode", "dense")
        page.locator("form.search button[type=submit]").click()
        page.wait_for_url("**mode=dense**")
        assert page.locator(".ranked-by").inner_text() == "Ranked by: meaning (dense)"
        assert page.locator("select#mode").input_value() == "dense", "the choice stays chosen"
        assert (
            page.locator("table.results tbody tr").first.locator("th").inner_text()
            == f"almanac-{run}.txt"
        )
    finally:
        context.close()


def _watch_until_it_succeeds(page, api, workers, file) -> None:
    """Upload `file` with the workers stopped, open its task page, then start them: the page
    must show the chunks when the task succeeds while it is open (JavaScript's rendering)."""
    names = list(workers.names)
    for name in names:
        workers.stop(name)
    response, _ = upload(api, [file])
    page.goto(response.json()["tasks"][0]["page_url"])
    assert page.locator("[data-field=preview]").is_hidden()
    workers.ensure(len(names))
    poll(
        lambda: page.locator("[data-field=preview]").is_visible(),
        timeout=60,
        interval=0.1,
        message="the preview appears once the task succeeded",
    )


def test_the_first_chunks_appear_when_a_task_succeeds_while_its_page_is_open(page, api, workers):
    run = uuid.uuid4().hex[:8]
    text = "".join(f"Part {n} of the {run} notes talks at length. " * 30 + "\n\n" for n in range(4))
    _watch_until_it_succeeds(page, api, workers, txt(f"notes-{run}.txt", text))
    items = page.locator("[data-field=preview_list] li")
    assert items.count() == 5
    assert items.first.locator(".location").inner_text() == "chunk 1"
    assert items.first.locator(".chunk-text").inner_text().startswith(f"Part 0 of the {run} notes")
    page.reload()
    assert page.locator("[data-field=preview_list] li").count() == 5, "the same after a reload"


def test_a_chunk_over_a_page_break_shows_both_pages_when_it_appears_live(page, api, workers):
    """static/progress.js words a location as webapp/display.py does: "pages 1–2"."""
    run = uuid.uuid4().hex[:8]
    pdf = make_pdf_pages(
        [
            f"The {run} notice starts on a short page.",
            textwrap.fill("It goes on overleaf about the harbour. " * 30, 80),
        ]
    )
    _watch_until_it_succeeds(page, api, workers, (f"notice-{run}.pdf", pdf, "application/pdf"))
    locations = page.locator("[data-field=preview_list] li .location").all_inner_texts()
    assert locations == ["pages 1–2", "page 2"], locations
    page.reload()
    assert page.locator("[data-field=preview_list] li .location").all_inner_texts() == locations, (
        "the same from the server after a reload"
    )


def test_a_scanned_pdf_hit_says_its_page_and_its_task_counts_the_ocr_pages(page, api, workers):
    run = uuid.uuid4().hex[:8]
    cover = make_pdf_pages([textwrap.fill("The harbour master keeps the tide tables. " * 17, 80)])
    scan = make_scan_pdf(
        [
            ["Walrus sightings near the lighthouse", "were counted every morning"]
            + [f"Day {day}: seals resting on the north rocks" for day in range(1, 9)]
        ]
    )
    response, _ = upload(api, [(f"logbook-{run}.pdf", merge_pdfs(cover, scan), "application/pdf")])
    task = response.json()["tasks"][0]
    page.goto(task["page_url"])  # open while it runs: the live page fills in the result
    poll(
        lambda: page.locator("[data-field=result]").inner_text(),
        lambda text: "OCR" in text,
        timeout=240,
        interval=0.2,
        message="the live task page showing its result",
    )
    expected = "2 pages (1 read by OCR)"
    assert page.locator("[data-field=result]").inner_text().startswith(expected)
    page.reload()
    assert page.locator("[data-field=result]").inner_text().startswith(expected)

    page.goto(f"/search?q={quote('walrus lighthouse')}")
    row = page.locator("table.results tbody tr", has_text=f"logbook-{run}.pdf").first
    assert row.locator("td.location").inner_text() == "page 2"
    assert set(row.locator("mark").all_inner_texts()) == {"Walrus", "lighthouse"}
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "search-scanned-pdf.png"), full_page=True)
