"""A control or format character between two words of a document is a word boundary
(docs/architecture.md, "Parsing"): py-pdf's sample 015-arabic/habibi.pdf holds "…\\x03habibi",
which PDFium drops, and a search for "habibi" missed the document.
"""

import pytest

from jobs.text.parsers import parse_document
from jobs.text.parsers.document import word_boundaries
from jobs.text.tokens import document_terms, query_terms
from tests.samples import make_docx, make_html, make_pdf, make_pdf_pages


def test_a_control_character_between_two_words_of_a_pdf_is_a_boundary():
    parsed = parse_document(make_pdf("Salaam abc\x03habibi, welcome."), "pdf")
    assert parsed.text == "Salaam abc habibi, welcome."
    assert query_terms("habibi")[0] in document_terms(parsed.text)


def test_the_control_characters_pdfium_leaves_out_keep_words_apart_on_every_line():
    parsed = parse_document(make_pdf_pages(["one\x03\x03two \x03three\x03", "four\x03five"]), "pdf")
    assert [block.text for block in parsed.blocks] == ["one two three", "four five"]


def test_a_control_character_pdfium_keeps_is_a_boundary_too():
    parsed = parse_document(make_pdf("left\x01right and up\x1fdown"), "pdf")
    assert parsed.text == "left right and up down"


def test_a_pdf_hyphen_at_a_line_end_still_joins_its_word():
    parsed = parse_document(make_pdf_pages(["a long and dan-\ngerous\x03road"]), "pdf")
    assert parsed.text == "a long and dangerous road"


@pytest.mark.parametrize(
    "kind, data",
    [
        ("txt", b"Salaam abc\x03habibi, welcome."),
        ("md", b"# Hello\n\nSalaam abc\x03habibi, welcome."),
        ("html", make_html("Greeting", "Salaam abc\x03habibi, welcome.")),
        ("html", b"<p>Salaam abc&#3;habibi, welcome.</p>"),
        ("csv", b"greeting\nSalaam abc\x03habibi\n"),
        ("docx", make_docx(["Salaam abc\u200bhabibi, welcome."])),
    ],
)
def test_every_kind_of_document_shows_the_two_words_apart(kind, data):
    assert "abc habibi" in parse_document(data, kind).text


@pytest.mark.parametrize(
    "between",
    [
        "\x03",
        "\x00",
        "\x1b",
        "\x7f",
        "\x85",
        "\x9c",  # C0 and C1 controls, DEL
        "\u200b",  # zero width space
        "\u200e",
        "\u200f",
        "\u061c",
        "\u202e",
        "\u2067",  # bidi marks, overrides, isolates
        "\u2062",
        "\ufffa",  # invisible times, annotation separator
        "\x03\u200f\x03",  # a run is one boundary
    ],
)
def test_a_control_or_format_character_between_two_words_is_one_space(between):
    assert word_boundaries(f"abc{between}habibi") == "abc habibi"


@pytest.mark.parametrize(
    "word",
    [
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: a ZWNJ inside the word
        "\u0915\u094d\u200d\u0937",  # Devanagari: a ZWJ asks for a half form
        "\U0001f469\u200d\U0001f4bb",  # an emoji sequence
        "no\u2060break",  # word joiner
        "\u0600\u0661\u0662",  # Arabic number sign before its digits
    ],
)
def test_a_character_that_joins_within_a_word_stays(word):
    assert word_boundaries(f"say {word} now") == f"say {word} now"


def test_a_soft_hyphen_is_a_place_a_word_may_break_so_the_word_is_whole():
    text = parse_document("Their co\xadoper\xadation ended.".encode(), "txt").text
    assert text == "Their cooperation ended."
    assert query_terms("cooperation")[0] in document_terms(text)


def test_a_boundary_may_follow_a_combining_mark_or_a_digit():
    assert word_boundaries("cafe\u0301\x03noir 42\x03habibi") == "cafe\u0301 noir 42 habibi"


def test_a_control_character_not_between_words_is_dropped_and_a_format_character_kept():
    assert word_boundaries("end \x03start.\x03Next\x03 \x1b") == "end start.Next "
    assert word_boundaries("\u200fabc \u202bdef\u202c.") == "\u200fabc \u202bdef\u202c."


def test_ordinary_whitespace_is_left_as_it_is():
    assert word_boundaries("a\tb\nc\r\nd\x0be\x0cf") == "a\tb\nc\r\nd\x0be\x0cf"
