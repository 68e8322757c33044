"""A PDF read in page ranges (jobs.text.parsers: `ocr_split_at`, `ocr_only`, `with_pages_read`)
reads as the same PDF read in one go: the same blocks, pages, OCR'd pages and warnings."""

from __future__ import annotations

import pytest

from jobs.core.failures import PermanentError
from jobs.text import parse_reply
from jobs.text.parsers import ParsedDocument, ParseOptions, parse_document, with_pages_read
from tests.samples import make_pdf_pages, make_scan_pdf, merge_pdfs

TYPED = make_pdf_pages(["The harbour master keeps the tide tables."])
SCANNED = make_scan_pdf(
    [["Walrus sightings near the lighthouse"], None, ["Seals resting on the north rocks"]]
)
DOCUMENT = merge_pdfs(TYPED, SCANNED)  # page 1 typed, pages 2-4 scanned (page 3 blank)


def _ranges_read(data: bytes, plan: ParsedDocument, size: int) -> dict[int, str]:
    read: dict[int, str] = {}
    pending = plan.ocr_pending
    for start in range(0, len(pending), size):
        part = parse_document(
            data, "pdf", ParseOptions(ocr_only=tuple(pending[start : start + size]))
        )
        read.update({block.location["page"]: block.text for block in part.blocks})
    return read


def test_a_scan_split_at_its_pending_pages_is_its_text_layers_and_their_numbers():
    told: list[str] = []
    plan = parse_document(DOCUMENT, "pdf", ParseOptions(ocr_split_at=3, progress=told.append))
    assert plan.ocr_pending == [2, 3, 4]
    assert [(b.location, b.text) for b in plan.blocks] == [
        ({"page": 1}, "The harbour master keeps the tide tables.")
    ]
    assert (plan.pages, plan.ocr_pages, told) == (4, 0, [])  # nothing read by OCR yet


def test_fewer_pending_pages_than_the_split_are_read_at_once():
    parsed = parse_document(DOCUMENT, "pdf", ParseOptions(ocr_split_at=4))
    assert parsed.ocr_pending == [] and parsed.ocr_pages == 3


@pytest.mark.parametrize("size", [1, 2])
def test_ranges_put_together_read_as_the_document_read_in_one_go(size):
    whole = parse_document(DOCUMENT, "pdf", ParseOptions())
    plan = parse_document(DOCUMENT, "pdf", ParseOptions(ocr_split_at=2))
    together = with_pages_read(DOCUMENT, plan, _ranges_read(DOCUMENT, plan, size), ParseOptions())
    assert [(b.location, b.text) for b in together.blocks] == [
        (b.location, b.text) for b in whole.blocks
    ]
    assert (
        (together.pages, together.ocr_pages, together.warnings)
        == (whole.pages, whole.ocr_pages, whole.warnings)
        == (4, 3, ["OCR found no text on 1 page (3)."])
    )


def test_a_range_reads_only_its_pages_and_counts_them_in_its_progress():
    told: list[str] = []
    part = parse_document(DOCUMENT, "pdf", ParseOptions(ocr_only=(3, 4), progress=told.append))
    assert told == ["OCR page 1 of 2", "OCR page 2 of 2"]
    assert [(b.location, b.text) for b in part.blocks] == [
        ({"page": 4}, "Seals resting on the north rocks")
    ]  # a blank page gives no block


def test_a_range_naming_a_page_the_pdf_lacks_is_refused():
    with pytest.raises(PermanentError) as caught:
        parse_document(DOCUMENT, "pdf", ParseOptions(ocr_only=(5,)))
    assert caught.value.code == "corrupt"


def test_ranges_that_found_nothing_fail_the_scan_as_one_reading_would():
    blank = make_scan_pdf([None, None])
    plan = parse_document(blank, "pdf", ParseOptions(ocr_split_at=2))
    with pytest.raises(PermanentError) as caught:
        with_pages_read(blank, plan, {}, ParseOptions())
    assert caught.value.code == "no_text"
    assert "OCR read its 2 pages without finding any text" in caught.value.message


def test_the_pending_pages_travel_in_the_reply_of_the_reading_child():
    plan = parse_document(DOCUMENT, "pdf", ParseOptions(ocr_split_at=2))
    decoded = parse_reply.decode(parse_reply.encode(plan, 10_000), 10_000)
    assert decoded.ocr_pending == [2, 3, 4]
    assert [(b.location, b.text) for b in decoded.blocks] == [
        (b.location, b.text) for b in plan.blocks
    ]
