import io
import zipfile

import pypdf
import pytest

from jobs.core.failures import PermanentError
from jobs.text.parsers import Block, ParsedDocument, ParseOptions, office, parse_document
from tests.samples import make_docx, make_html, make_pdf, make_pdf_no_text, make_pdf_pages

SENTENCE = "Intake reads the text layer of this PDF (really)."


def error_of(data, kind, options=None):
    with pytest.raises(PermanentError) as caught:
        parse_document(data, kind, options)
    assert caught.value.transient is False
    return caught.value


def encrypted_pdf(user_password, owner_password=None):
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(make_pdf(SENTENCE)))
    writer.encrypt(user_password, owner_password)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# -- samples -----------------------------------------------------------------------------------


def test_sample_pdf_is_read_by_pypdf_itself():
    reader = pypdf.PdfReader(io.BytesIO(make_pdf(SENTENCE)), strict=True)
    assert reader.pages[0].extract_text() == SENTENCE


# -- PDF ---------------------------------------------------------------------------------------


def test_pdf_text_layer():
    parsed = parse_document(make_pdf(SENTENCE), "pdf")
    assert parsed == ParsedDocument([Block(SENTENCE, {"page": 1})], pages=1)


def test_pdf_pages_counted_and_joined_by_blank_lines():
    parsed = parse_document(make_pdf_pages(["First page.", None, "Third page."]), "pdf")
    assert (parsed.text, parsed.pages) == ("First page.\n\nThird page.", 3)
    assert [block.location for block in parsed.blocks] == [{"page": 1}, {"page": 3}]


def test_a_word_hyphenated_at_a_line_end_is_whole_again():
    parsed = parse_document(make_pdf_pages(["It was a long and dan-\ngerous road home."]), "pdf")
    assert parsed.text == "It was a long and dangerous road home."


def test_pdf_without_text_layer_and_ocr_off():
    error = error_of(make_pdf_no_text(), "pdf", ParseOptions(ocr="off"))
    assert error.code == "no_text"
    assert error.message == (
        "This PDF has no text layer (scanned?). Intake cannot read images of text."
    )


def test_pdf_with_user_password_is_encrypted_error():
    error = error_of(encrypted_pdf("secret"), "pdf")
    assert error.code == "encrypted"
    assert error.message == "This PDF is password-protected; upload an unprotected copy."


def test_pdf_with_only_owner_password_is_read():
    assert parse_document(encrypted_pdf("", "owner"), "pdf").text == SENTENCE


@pytest.mark.parametrize(
    "data",
    [
        make_pdf(SENTENCE)[: len(make_pdf(SENTENCE)) // 2],
        b"%PDF-1.4\n",
        b"%PDF-1.7 nothing else here at all",
        b"",
    ],
)
def test_truncated_or_corrupt_pdf(data):
    error = error_of(data, "pdf")
    assert error.code == "corrupt"
    assert error.message == "This PDF is damaged or truncated and cannot be read."


# -- DOCX --------------------------------------------------------------------------------------


def test_docx_paragraphs():
    parsed = parse_document(make_docx(["First paragraph.", "", "Second — ünïcode."]), "docx")
    assert (parsed.text, parsed.pages) == ("First paragraph.\n\nSecond — ünïcode.", 1)


def test_docx_tables_in_document_order():
    import docx

    document = docx.Document()
    document.add_paragraph("Before the table.")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate([["Name", "Qty"], ["Apples", "3"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_paragraph("After the table.")
    out = io.BytesIO()
    document.save(out)
    text = parse_document(out.getvalue(), "docx").text
    assert text == "Before the table.\n\nName\tQty\nApples\t3\n\nAfter the table."


@pytest.mark.parametrize(
    "data",
    [
        make_docx(["Some text"])[:3000],
        b"PK\x03\x04 not really a zip",
        make_pdf("not a docx"),
    ],
)
def test_truncated_or_corrupt_docx(data):
    error = error_of(data, "docx")
    assert error.code == "corrupt"
    assert "damaged or truncated" in error.message


def test_zip_that_is_not_a_word_document():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("hello.txt", "hi")
    assert error_of(out.getvalue(), "docx").code == "corrupt"


def test_docx_expanding_past_the_bound_is_refused(monkeypatch):
    data = make_docx(["x"])
    monkeypatch.setattr(office, "ZIP_MAX_UNCOMPRESSED_BYTES", 1000)
    error = error_of(data, "docx")
    assert error.code == "too_large"


def test_empty_docx_has_no_text():
    error = error_of(make_docx([]), "docx")
    assert (error.code, error.message) == ("no_text", "This document contains no text.")


# -- text and Markdown -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, text",
    [
        (b"plain ascii", "plain ascii"),
        ("naïve café ✓".encode(), "naïve café ✓"),
        ("\ufeffwith bom".encode("utf-8"), "with bom"),
        ("wide café".encode("utf-16"), "wide café"),
        ("wide café".encode("utf-16-be").join([b"\xfe\xff", b""]), "wide café"),
        ("wider café".encode("utf-32"), "wider café"),
        ("café".encode("latin-1"), "café"),
        ("Le café est très bon, à bientôt.".encode("latin-1"), "Le café est très bon, à bientôt."),
        ("Grüße aus München".encode("cp1252"), "Grüße aus München"),
        (
            "Привет, как дела? Это тест кодировки.".encode("cp1251"),
            "Привет, как дела? Это тест кодировки.",
        ),
    ],
)
def test_text_encodings(data, text):
    parsed = parse_document(data, "txt")
    assert (parsed.text, parsed.pages, parsed.warnings) == (text, 1, [])


def test_newlines_normalised_and_markdown_kept():
    data = b"# Title\r\n\r\nSome *emphasis* and `code`.\rLast line\n"
    assert parse_document(data, "md").text == "# Title\n\nSome *emphasis* and `code`.\nLast line"


@pytest.mark.parametrize("data", [b"", b"   \n\t  ", "\ufeff".encode("utf-8")])
def test_blank_text_has_no_text(data):
    assert error_of(data, "txt").code == "no_text"


def test_utf8_cut_in_its_last_character_is_read_with_a_warning():
    data = "任务失败三次以后会被转入死信队列。".encode()[:-1]
    parsed = parse_document(data, "txt")
    assert parsed.text == "任务失败三次以后会被转入死信队列\ufffd"
    assert parsed.warnings == ["2 bytes that could not be decoded were replaced with “\ufffd”."]


def test_a_few_bad_bytes_are_replaced_and_counted():
    data = ("A long enough line of plain text. " * 40).encode() + b"\xff" + b" The end."
    parsed = parse_document(data, "md")
    assert "\ufffd The end." in parsed.text
    assert parsed.warnings == ["1 byte that could not be decoded was replaced with “\ufffd”."]


def test_a_mostly_undecodable_file_fails():
    error = error_of(bytes(range(128, 256)) * 20, "txt")
    assert error.code == "undecodable" and error.message.endswith(
        "save it as UTF-8 and upload it again."
    )


def test_broken_utf16_is_undecodable():
    error = error_of(b"\xff\xfe\x41", "txt")
    assert error.code == "undecodable"


# -- HTML --------------------------------------------------------------------------------------


def test_html_sample():
    parsed = parse_document(make_html("My <Title>", "First & only.\n\nSecond one."), "html")
    assert parsed.text == "My <Title>\n\nFirst & only.\n\nSecond one."


def test_html_visible_text_only():
    page = b"""<!doctype html><html><head><title>Page</title>
    <style>p { color: red }</style><script>var secret = "do not index";</script></head>
    <body><h1>Heading</h1><p>Tom &amp; Jerry&nbsp;&#x263A;   went
    <b>out</b>.</p><noscript><p>Enable JS</p></noscript>
    <template><p>templated</p></template>
    <div>one<br>two</div><ul><li>alpha</li><li>beta</li></ul>
    <table><tr><td>a</td><td>b</td></tr></table>
    <pre>  indented
      code</pre><script src="x.js"></script>tail</body></html>"""
    text = parse_document(page, "html").text
    assert text == (
        "Page\n\nHeading\n\nTom & Jerry \u263a went out.\n\none\ntwo\n\nalpha\n\nbeta"
        "\n\na b\n\n  indented\n      code\n\ntail"
    )
    for hidden in ("secret", "color", "Enable JS", "templated"):
        assert hidden not in text


def test_html_declared_charset_used_when_not_utf8():
    page = '<meta charset="iso-8859-1"><p>Prix : 5 € – café</p>'.encode("cp1252")
    assert parse_document(page, "html").text == "Prix : 5 € – café"


def test_html_without_visible_text():
    error = error_of(b"<html><script>only()</script></html>", "html")
    assert (error.code, error.message) == ("no_text", "This document contains no text.")


def test_unsupported_kind():
    error = error_of(b"data", "exe")
    assert error.code == "unsupported_type"
    assert "not a supported document type" in error.message
