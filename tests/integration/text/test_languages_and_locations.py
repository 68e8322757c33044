"""Search in every language, and where each hit comes from, through the real system
(docs/architecture.md §5, §12): gunicorn, real rq workers, the local embedder and a real
redis-server.

A word is searched *inside a sentence*, as a person finds it, never as a whole line: in Chinese,
Japanese and Thai a sentence has no spaces, and in Korean a particle sticks to the word.
"""

from __future__ import annotations

import textwrap
from urllib.parse import quote

import pytest

from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal
from tests.samples import make_pdf_pages

pytestmark = pytest.mark.integration

# language: (a sentence holding the word, the word, a sentence of the same language without it)
SENTENCES = {
    "chinese": (
        "任务失败三次以后会被转入死信队列，运维人员可以在页面上重试。",
        "死信队列",
        "今天天气很好，我们去公园散步吧。",
    ),
    "japanese": (
        "この文書は全文検索エンジンに登録されてから数秒で見つかります。",
        "検索エンジン",
        "明日の会議は午後三時に始まります。",
    ),
    "korean": (
        "우리는 모든 문서를 데이터베이스에 저장하고 나중에 찾습니다.",
        "데이터베이스",
        "오늘 점심은 김치찌개를 먹었습니다.",
    ),
    "thai": (
        "ระบบนี้เก็บเอกสารทั้งหมดไว้ในฐานข้อมูลเพื่อค้นหาภายหลัง",
        "ฐานข้อมูล",
        "วันนี้อากาศดีมากและฉันไปเดินเล่นที่สวน",
    ),
    "german": (
        "Die Rechnung wurde nach der Prüfung der Lieferscheine freigegeben.",
        "Lieferscheine",
        "Das Wetter ist heute sonnig und warm.",
    ),
}


def _ingest(client, files):
    response, _ = upload(client, files)
    assert response.status_code == 202, response.text[:500]
    tasks = response.json()["tasks"]
    final, _ = wait_terminal(client, [t["id"] for t in tasks])
    for task in final.values():
        assert task["status"] == "succeeded", (task["filename"], task["error"])
    return {t["filename"]: final[t["id"]] for t in tasks}


def _search(client, query, k=50):
    return get_json(client, f"/api/search?q={quote(query)}&k={k}")["results"]


def test_a_word_is_found_inside_a_sentence_in_every_language(api):
    run = unique_word()
    files, expected = [], {}
    for language, (with_word, word, without) in SENTENCES.items():
        files.append(txt(f"{run}-{language}-with.txt", with_word * 3))
        files.append(txt(f"{run}-{language}-without.txt", without * 3))
        expected[language] = word
    tasks = _ingest(api, files)
    for language, word in expected.items():
        mine = {tasks[f"{run}-{language}-{side}.txt"]["id"]: side for side in ("with", "without")}
        hits = [hit for hit in _search(api, word) if hit["task_id"] in mine]
        assert hits, f"{language}: searching {word!r} finds nothing in the sentence holding it"
        assert mine[hits[0]["task_id"]] == "with", (
            f"{language}: the document with {word!r} ranks first"
        )
        assert word in hits[0]["text"]
        assert hits[0]["location"] == {}, "a plain text file has no pages or headings"


def test_mixed_script_text_is_found_by_each_of_its_words(api):
    run = unique_word()
    sentence = f"Der {run} Bericht über 死信队列 und データベース, plus the outage notes."
    tasks = _ingest(api, [txt(f"{run}-mixed.txt", sentence)])
    task_id = tasks[f"{run}-mixed.txt"]["id"]
    for query in (run, "死信队列", "データベース", "Bericht", f"{run} 死信"):
        assert any(hit["task_id"] == task_id for hit in _search(api, query)), query


def _page_of(sentence: str, repeat: int = 50, last: str = "") -> str:
    """Longer than a chunk (1,000 characters), in lines that fit on a PDF page."""
    return textwrap.fill(sentence * repeat + last, 80)


def test_a_word_after_a_control_character_in_a_pdf_is_found_by_itself(api):
    """py-pdf's habibi.pdf holds "ϲΒϴΒ\\x03habibi": PDFium drops the U+0003, and the word before
    it ran into "habibi", so a search for "habibi" missed the document."""
    run = unique_word()
    pdf = make_pdf_pages([f"Salaam abc\x03{run}, welcome."])
    task = _ingest(api, [(f"{run}.pdf", pdf, "application/pdf")])[f"{run}.pdf"]
    (hit,) = [h for h in _search(api, run) if h["task_id"] == task["id"]]
    assert f"abc {run}," in hit["text"]


def test_pdf_hits_say_their_page_and_markdown_hits_their_heading(api):
    """A chunk is located where it starts; each word searched for ends a part longer than a
    chunk, so every chunk holding it starts in that part."""
    run = unique_word()
    pdf = make_pdf_pages(
        [
            _page_of(f"Cover page of the {run} contract. "),
            _page_of("Terms of delivery are listed in the annex. "),
            _page_of(
                "A refund is allowed within thirty days. ", last=f"The clause is refund{run}."
            ),
        ]
    )
    markdown = (
        f"# Intro\n\n{_page_of(f'This {run} guide starts here. ')}\n\n## Refunds\n\n"
        f"{_page_of('Ask for a rebate by mail. ', last=f'Write rebate{run}.')}\n"
    ).encode()
    tasks = _ingest(
        api, [(f"{run}.pdf", pdf, "application/pdf"), (f"{run}.md", markdown, "text/markdown")]
    )
    assert tasks[f"{run}.pdf"]["result"]["pages"] == 3
    assert tasks[f"{run}.pdf"]["result"]["ocr_pages"] == 0
    assert tasks[f"{run}.pdf"]["result"]["warnings"] == []

    (pdf_hit,) = [h for h in _search(api, f"refund{run}") if h["filename"] == f"{run}.pdf"]
    assert pdf_hit["location"] == {"page": 3}
    (md_hit,) = [h for h in _search(api, f"rebate{run}") if h["filename"] == f"{run}.md"]
    assert md_hit["location"] == {"heading": "Refunds"}


def test_a_pdf_hit_that_runs_over_a_page_break_says_both_pages(api):
    """Page 1 is too short to end a chunk, so its chunk runs on into page 2: the hit and the
    chunk say where it ends (`page_end`); the chunks after it are on page 2 only."""
    run = unique_word()
    pdf = make_pdf_pages(
        [
            textwrap.fill(f"The notice{run} starts on a short page. " * 3, 80),
            _page_of("It goes on overleaf about the harbour. "),
        ]
    )
    task = _ingest(api, [(f"{run}.pdf", pdf, "application/pdf")])[f"{run}.pdf"]
    (hit,) = [h for h in _search(api, f"notice{run}") if h["task_id"] == task["id"]]
    assert hit["location"] == {"page": 1, "page_end": 2}
    assert "overleaf" in hit["text"]
    chunks = get_json(api, f"/api/tasks/{task['id']}/chunks")["chunks"]
    assert [c["location"] for c in chunks] == [{"page": 1, "page_end": 2}] + [{"page": 2}] * (
        len(chunks) - 1
    )


def test_the_chunks_of_a_succeeded_document_page_through_all_of_them(api):
    run = unique_word()
    pages = [
        _page_of(f"Page {n} of the {run} manual. " + f"Sentence {n} says word{n} again. ", 30)
        for n in range(1, 7)
    ]
    task = _ingest(api, [(f"{run}.pdf", make_pdf_pages(pages), "application/pdf")])[f"{run}.pdf"]
    total = task["result"]["chunks"]
    assert total >= 6, "each page is longer than a chunk"

    collected = []
    offset = 0
    while True:
        page = get_json(api, f"/api/tasks/{task['id']}/chunks?offset={offset}&limit=4")
        assert page["total"] == total
        assert len(page["chunks"]) <= 4
        if not page["chunks"]:
            break
        collected += page["chunks"]
        offset += len(page["chunks"])
    assert [c["chunk"] for c in collected] == list(range(total))
    located = [c["location"]["page"] for c in collected]
    assert located == sorted(located) and set(located) == set(range(1, 7))
    for chunk in collected:
        assert (
            f"word{chunk['location']['page']}" in chunk["text"]
            or f"Page {chunk['location']['page']}" in chunk["text"]
        )

    too_many = api.get(f"/api/tasks/{task['id']}/chunks?limit=101")
    assert too_many.status_code == 400 and too_many.json()["error"]["code"] == "bad_parameter"
    unknown = api.get(f"/api/tasks/{'0' * 32}/chunks")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"


def test_only_a_succeeded_task_has_chunks(api):
    run = unique_word()
    response, _ = upload(api, [(f"{run}.pdf", b"%PDF-1.4 not really a pdf", "application/pdf")])
    task_id = response.json()["tasks"][0]["id"]
    final, _ = wait_terminal(api, [task_id])
    assert final[task_id]["status"] == "failed"
    answer = api.get(f"/api/tasks/{task_id}/chunks")
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "no_chunks"
    assert "succeeded" in answer.json()["error"]["message"]


def test_a_replaced_version_s_chunks_are_gone_from_its_old_task(api):
    run = unique_word()
    first = _ingest(api, [txt(f"{run}.txt", f"First {run} version.")])[f"{run}.txt"]
    response, _ = upload(
        api,
        [txt(f"{run}.txt", f"Second {run} version, rewritten.")],
        document_id=first["document_id"],
    )
    second_id = response.json()["tasks"][0]["id"]
    wait_terminal(api, [second_id])
    old = api.get(f"/api/tasks/{first['id']}/chunks")
    assert old.status_code == 409 and "newer version" in old.json()["error"]["message"]
    new = get_json(api, f"/api/tasks/{second_id}/chunks")
    assert new["chunks"][0]["text"] == f"Second {run} version, rewritten."


def test_a_text_file_cut_in_its_last_character_is_ingested_with_a_warning(api):
    run = unique_word()
    with_word, word, _ = SENTENCES["chinese"]
    cut = (with_word * 3).encode("utf-8")[:-1]  # the last "。" keeps 2 of its 3 bytes
    task = _ingest(api, [(f"{run}-cut.txt", cut, "text/plain")])[f"{run}-cut.txt"]
    assert task["result"]["warnings"] == [
        "2 bytes that could not be decoded were replaced with “\ufffd”."
    ]
    assert any(hit["task_id"] == task["id"] for hit in _search(api, word))
    mostly, _ = upload(api, [(f"{run}-binary.txt", bytes(range(128, 256)) * 8, "text/plain")])
    assert mostly.status_code == 202, mostly.text  # named text: only reading it can tell
    (failed,) = wait_terminal(api, [mostly.json()["tasks"][0]["id"]])[0].values()
    assert (failed["status"], failed["error"]["type"], failed["attempts"]) == (
        "failed",
        "undecodable",
        1,
    )
