"""Real PDFs from pypdf's own test resources (tests/fixtures/real, BSD-licensed; see
LICENSE.md there), made by pdfTeX, LibreOffice, ImageMagick, a scanner's OCR and Acrobat: each
is read with its pages located, or refused for the reason a person would give, and the words
of every script in them are found by the search's own splitting (jobs.text.tokens)."""

from pathlib import Path

import pytest

from jobs.core.failures import PermanentError
from jobs.text.parsers import ParseOptions, parse_document
from jobs.text.tokens import terms

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
PDFS = sorted(path.name for path in REAL.glob("*.pdf"))

# name: (pages, words on a page, that page)
READABLE = {
    "crazyones.pdf": (1, "Heres to the crazy ones", 1),
    "multilang.pdf": (1, "你好世界", 1),
    "Seige_of_Vicksburg_Sample_OCR.pdf": (6, "THE SIEGE OF VICKSBURG. 55", 6),
    "pdflatex-outline.pdf": (4, "This text should contain all letters of the", 3),
    "two-different-pages.pdf": (2, "2", 2),
    "r2-owner-password.pdf": (1, "pdf encryption test", 1),  # an owner password only
}
# name: (code, message)
REFUSED = {
    "crazyones-encrypted-256.pdf": (
        "encrypted",
        "This PDF is password-protected; upload an unprotected copy.",
    ),
    "libreoffice-writer-password.pdf": (
        "encrypted",
        "This PDF is password-protected; upload an unprotected copy.",
    ),
    "r2-user-password.pdf": (
        "encrypted",
        "This PDF is password-protected; upload an unprotected copy.",
    ),
}
#: Six tiny images, four of them labelled "Background" in a text layer drawn outside the page's
#: box (which PDFium's bounded extraction leaves out).
IMAGES = "imagemagick-images.pdf"


def test_the_fixtures_are_all_checked():
    assert set(PDFS) == set(READABLE) | set(REFUSED) | {IMAGES}


def test_a_one_word_text_layer_beside_an_image_is_kept_and_the_pages_without_are_named():
    parsed = parse_document((REAL / IMAGES).read_bytes(), "pdf")
    assert parsed.pages == 6
    assert [(block.location, block.text) for block in parsed.blocks] == [
        ({"page": n}, "Background") for n in (1, 2, 3, 6)
    ]
    assert parsed.ocr_pages == 6  # the two without text, and the four with a word and an image
    assert parsed.warnings == ["OCR found no text on 2 pages (4, 5)."]


def test_short_pages_past_the_ocr_page_limit_keep_their_text_layer():
    # The two pages without text fill the limit: the four with a word are not OCR'd, and say so.
    parsed = parse_document((REAL / IMAGES).read_bytes(), "pdf", ParseOptions(ocr_max_pages=2))
    assert [(block.location, block.text) for block in parsed.blocks] == [
        ({"page": n}, "Background") for n in (1, 2, 3, 6)
    ]
    assert parsed.ocr_pages == 2
    assert parsed.warnings == [
        "OCR found no text on 2 pages (4, 5).",
        "4 pages with a few words beside an image were kept as their text layer, not read by "
        "OCR: OCR reads at most 2 pages per document.",
    ]


@pytest.mark.parametrize("name", sorted(READABLE))
def test_a_real_pdf_is_read_with_its_pages_located(name):
    pages, words, page = READABLE[name]
    parsed = parse_document((REAL / name).read_bytes(), "pdf")
    assert (parsed.pages, parsed.ocr_pages, parsed.warnings) == (pages, 0, [])
    assert [block.location for block in parsed.blocks] == [{"page": n} for n in range(1, pages + 1)]
    assert words in parsed.blocks[page - 1].text


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_real_pdf_that_cannot_be_read_says_why(name):
    with pytest.raises(PermanentError) as caught:
        parse_document((REAL / name).read_bytes(), "pdf")
    assert (caught.value.code, caught.value.message) == REFUSED[name]


def test_every_script_of_a_real_multilingual_pdf_is_searchable():
    text = parse_document((REAL / "multilang.pdf").read_bytes(), "pdf").text
    indexed = set(terms(text))
    for query in ("world", "мир", "بالعالم", "世界", "สวัสดี", "こんにちは"):
        assert set(terms(query)) <= indexed, query
