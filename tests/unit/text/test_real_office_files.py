"""Real DOCX and PPTX files, saved by Word and PowerPoint (tests/fixtures/real, MIT-licensed test
files of python-docx and python-pptx): each one parses, and keeps the words of its headers,
footers, tables, groups and notes where a person would look for them."""

from pathlib import Path

import pytest

from jobs.text.parsers import parse_document

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
FILES = sorted(path for path in REAL.iterdir() if path.suffix in (".docx", ".pptx"))

EXPECTED_WORDS = {
    "hdr-header-footer.docx": [
        "Header for section-1",
        "Footer for section 1",
        "section with header",
    ],
    "doc-add-section.docx": [
        "Primary (Odd-Page) Header content",
        "First-page header content",
        "Even Page Header content",
        "Primary (Odd-Page) Footer content",
        "First Page Footer content",
        "Even Page Footer content",
    ],
    "sct-first-page-hdrftr.docx": [
        "Default (odd, primary) Header",
        "First Page Header (section 2)",
        "Page 6, Third page of section 2.",
    ],
    "doc-odd-even-hdrs.docx": ["Even page header.", "Odd page header."],
    "blk-paras-and-tables.docx": [
        "Left-side\tRight-side",
        "Copyright\tPage-number",
        "Lorem ipsum dolor sit amet",
    ],
    "par-known-styles.docx": ["Heading 1\n\nBody Text"],
    "docx-test.docx": ["python-docx was here!"],
    "test_slides.pptx": [
        "Test text",
        "Group test text",
        "Box 1",
        "Box 2",
        "Col head 1\tCol head 2\nCell text 1\tCell text 2",
    ],
    "tbl-cell.pptx": ["unladen swallows", "merged cell"],
    "sld-notes.pptx": ["Notes: Notes"],
    "txt-text.pptx": ["Foo Bar \n Baz Zoo \n1\nyahoo.com", "Text run in table cell"],
}


def test_the_fixtures_are_all_checked():
    assert {path.name for path in FILES} == set(EXPECTED_WORDS)


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_every_real_file_parses_and_keeps_its_words(path):
    parsed = parse_document(path.read_bytes(), path.suffix[1:])
    for words in EXPECTED_WORDS[path.name]:
        assert words in parsed.text, words
    assert "\v" not in parsed.text
    if path.suffix == ".pptx":
        assert all(block.boundary and "slide" in block.location for block in parsed.blocks)


def test_real_headings_and_slides_are_located():
    styles = parse_document((REAL / "par-known-styles.docx").read_bytes(), "docx")
    assert any(
        block.location == {"heading": "Heading 1"} and "Body Text" in block.text
        for block in styles.blocks
    )
    cells = parse_document((REAL / "tbl-cell.pptx").read_bytes(), "pptx")
    by_slide = {block.location["slide"]: block.text for block in cells.blocks}
    assert "unladen swallows" in by_slide[1] and "merged cell" in by_slide[2]
    text = parse_document((REAL / "txt-text.pptx").read_bytes(), "pptx")
    assert [block.location for block in text.blocks] == [{"slide": 1}, {"slide": 2}]
