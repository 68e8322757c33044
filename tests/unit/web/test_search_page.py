"""The search page and a succeeded task's page on fakeredis: where a hit comes from, the matched
words marked (and everything else escaped), the first chunks previewed (docs/architecture.md §6,
§12)."""

from __future__ import annotations

import re

from markupsafe import Markup

from tests.samples import make_pdf_pages
from tests.unit.conftest import upload
from webapp.display import highlight, location_text, result_text


def test_the_matched_words_are_marked_and_everything_else_escaped():
    marked = highlight("消息转入死信队列以后 <b>Queue</b> queues", "死信队列 queue")
    assert isinstance(marked, Markup)
    assert marked == (
        "消息转入<mark>死信队列</mark>以后 &lt;b&gt;<mark>Queue</mark>&lt;/b&gt; "
        "<mark>queues</mark>"
    ), "words whole or by their stem, spaceless runs anywhere"
    assert highlight("the queueing of inspected valves", "inspection") == (
        "the queueing of <mark>inspected</mark> valves"
    ), "what search matched: the same stem"
    assert (
        highlight("<i>x</i>", "<i>x")
        == "&lt;<mark>i</mark>&gt;<mark>x</mark>&lt;/<mark>i</mark>&gt;"
    ), "a query is words, never markup"
    assert highlight("ข้อมูลในฐานข้อมูล", "ฐานข้อมูล").count("<mark>") == 1


def test_a_chinese_hit_found_by_the_query_s_characters_marks_them():
    assert highlight("头部疼痛应该怎么办", "头痛") == "<mark>头</mark>部疼<mark>痛</mark>应该怎么办"
    assert highlight("患者头痛，头部不适", "头痛发作") == "患者<mark>头痛</mark>，头部不适", (
        "pairs where the chunk has some, not every shared character"
    )


def test_a_long_chunk_is_cut_around_its_first_match():
    text = "filler " * 200 + "the refund clause " + "tail " * 200
    marked = highlight(text, "refund", width=200)
    assert "<mark>refund</mark>" in marked
    assert marked.startswith("…") and marked.endswith("…")
    assert len(marked) < 260


def test_a_location_in_words():
    assert location_text({"page": 12}) == "page 12"
    assert location_text({"slide": 3}) == "slide 3"
    assert location_text({"sheet": "Q3"}) == "sheet Q3"
    assert location_text({"page": 4, "heading": "Refunds"}) == "page 4 · “Refunds”"
    assert location_text({}) == "" and location_text(None) == ""


def test_a_location_over_a_page_break_names_both_pages():
    assert location_text({"page": 1, "page_end": 2}) == "pages 1–2"
    assert location_text({"page": 3, "page_end": 5, "heading": "Terms"}) == "pages 3–5 · “Terms”"
    assert location_text({"page": 4, "page_end": 4}) == "page 4", "one page is one page"


def test_the_search_page_says_a_hit_runs_over_a_page_break(client, run_jobs):
    pdf = make_pdf_pages(
        [
            "The zorblax notice starts on a short page.",
            "It goes on overleaf about the harbour. " * 30,
        ]
    )
    upload(client, ("notice.pdf", pdf))
    run_jobs()
    html = client.get("/search?q=zorblax").get_data(as_text=True)
    cells = re.findall(r'<td class="location">(.*?)</td>', html, re.S)
    assert cells == ["pages 1–2"], html


def test_the_search_page_shows_where_a_hit_is_and_marks_the_words(client, run_jobs):
    markdown = "# Refunds <script>\n\nMoney back within thirty days: zorblax applies.\n"
    upload(client, ("policy.md", markdown.encode()))
    run_jobs()
    html = client.get("/search?q=zorblax").get_data(as_text=True)
    row = re.search(
        r'<td class="location">(.*?)</td>\s*<td class="chunk-text">(.*?)</td>', html, re.S
    )
    assert row, html
    assert row.group(1) == "“Refunds &lt;script&gt;”"
    assert "<mark>zorblax</mark> applies." in row.group(2)
    assert "<script>" not in html.split("<main", 1)[1]


def test_a_succeeded_task_s_page_previews_its_first_chunks(client, run_jobs):
    text = "".join(
        f"Paragraph {n} talks about topic{n} at some length. " * 25 + "\n\n" for n in range(10)
    )
    task = upload(client, ("long.txt", text.encode())).get_json()["tasks"][0]
    run_jobs()
    html = client.get(task["page_url"]).get_data(as_text=True)
    preview = re.search(r'<section class="preview"[^>]*>(.*?)</section>', html, re.S)
    assert preview and "hidden" not in preview.group(0).split(">", 1)[0]
    items = re.findall(r"<li>", preview.group(1))
    chunks = client.get(f"/api/tasks/{task['id']}/chunks").get_json()
    assert len(items) == 5 and chunks["total"] > 5
    assert f"(5 of {chunks['total']})" in preview.group(1)
    assert "Paragraph 0 talks about topic0" in preview.group(1)


def test_a_task_that_has_not_succeeded_previews_nothing(client):
    task = upload(client, ("queued.txt", b"Not processed yet.")).get_json()["tasks"][0]
    html = client.get(task["page_url"]).get_data(as_text=True)
    assert re.search(r'<section class="preview"[^>]* hidden>', html)
    answer = client.get(f"/api/tasks/{task['id']}/chunks")
    assert answer.status_code == 409 and answer.get_json()["error"]["code"] == "no_chunks"


def test_a_result_reads_as_a_sentence_in_the_singular_too():
    assert result_text({"pages": 1, "characters": 1234, "chunks": 1}) == (
        "1 page, 1,234 characters, 1 chunk."
    )
    assert result_text({"pages": 12, "ocr_pages": 3, "characters": 20481, "chunks": 24}) == (
        "12 pages (3 read by OCR), 20,481 characters, 24 chunks."
    )


def _selected_mode(html: str) -> str:
    select = re.search(r'<select id="mode" name="mode">(.*?)</select>', html, re.S)
    assert select, html
    chosen = re.findall(r'<option value="([^"]*)" selected>', select.group(1))
    assert len(chosen) == 1, select.group(1)
    return chosen[0]


def test_the_search_page_offers_a_mode_and_says_which_one_ranked(client, run_jobs):
    upload(client, ("notes.txt", b"The zorblax ledger."))
    run_jobs()
    html = client.get("/search").get_data(as_text=True)
    assert _selected_mode(html) == "", "none chosen: the service's default"
    options = re.findall(r'<option value="([^"]*)"', html)
    assert options == ["", "hybrid", "lexical", "dense"]
    assert "Ranked by" not in html, "nothing searched, nothing ranked"

    html = client.get("/search?q=zorblax").get_data(as_text=True)
    assert "Ranked by: words (lexical)" in html and "notes.txt" in html
    assert 'class="flash warning"' not in html

    html = client.get("/search?q=zorblax&mode=dense").get_data(as_text=True)
    assert _selected_mode(html) == "dense"
    assert "Ranked by: words (lexical)" in html, "no dense vectors here: by words"
    assert "Search by meaning needs an embedding service" in html

    html = client.get("/search?q=zorblax&mode=%3Cscript%3E").get_data(as_text=True)
    assert _selected_mode(html) == "" and "Ranked by: words (lexical)" in html
    assert "<script>" not in html.split("<main", 1)[1]


def test_the_search_page_names_a_hybrid_and_a_dense_ranking(app, client, redis):
    import numpy as np

    from jobs.kb.search import Searcher
    from tests.unit.kb.test_index import put
    from tests.unit.kb.test_search_modes import QueryEmbedder, Spied

    store, axes = Spied(), np.eye(4, dtype=np.float32)
    put(redis, "ledger.txt", ["the zorblax ledger"], vectors=axes[:1], store=store)
    app.extensions["intake"].searcher = Searcher(
        redis, QueryEmbedder({"zorblax": axes[0]}), vectors=store
    )
    html = client.get("/search?q=zorblax").get_data(as_text=True)
    assert "Ranked by: words and meaning (hybrid)" in html and "ledger.txt" in html
    cell = re.search(r'<td class="num" title="([^"]*)">([^<]*)</td>', html)
    assert cell and cell.group(1).startswith("words: ") and "; meaning: 1.000" in cell.group(1)
    assert cell.group(2) == f"{2 / 61:.4f}", "the fused score: ranked first by both"
    html = client.get("/search?q=zorblax&mode=dense").get_data(as_text=True)
    assert "Ranked by: meaning (dense)" in html and _selected_mode(html) == "dense"
