"""CSV and TSV rows as ``header: value``, EML headers and bodies, EPUB chapters in spine order;
and each hostile input (a zip bomb e-book, a truncated one, a file that is not mail) refused
with a readable PermanentError, never another exception."""

import random
import struct

import pytest

from jobs.core.failures import PermanentError
from jobs.text.parsers import office, parse_document
from jobs.text.parsers.tabular import column_letter, rows_as_pairs
from tests.samples import make_eml, make_epub, rewrite_zip


def error_of(data, kind):
    with pytest.raises(PermanentError) as caught:
        parse_document(data, kind)
    assert caught.value.transient is False and caught.value.message
    return caught.value


# -- CSV and TSV ---------------------------------------------------------------------------------


def test_csv_rows_as_header_value_pairs():
    data = b'Region,Q1,,Q2\r\nNorth,1200,x,1350\r\n,,,\r\nSouth,"9,000",,"multi\nline"\r\n'
    parsed = parse_document(data, "csv")
    assert parsed.blocks[0].location == {}
    assert parsed.text == (
        "Region: North; Q1: 1200; C: x; Q2: 1350\nRegion: South; Q1: 9,000; Q2: multi line"
    )


@pytest.mark.parametrize(
    "data", [b"name;city\nAda;London\n", b"name|city\nAda|London\n", b"name\tcity\nAda\tLondon\n"]
)
def test_csv_delimiter_is_sniffed(data):
    assert parse_document(data, "csv").text == "name: Ada; city: London"


def test_tsv_and_encodings():
    data = "Name\tStadt\nJürgen\tKöln\n".encode("cp1252")
    assert parse_document(data, "tsv").text == "Name: Jürgen; Stadt: Köln"
    utf8_bom = "\ufeffName\tCity\nZoë\tOslo\n".encode("utf-8")
    assert parse_document(utf8_bom, "tsv").text == "Name: Zoë; City: Oslo"


def test_csv_with_a_few_bad_bytes_says_so():
    data = ("Word,Meaning\n" + "".join(f"w{n},meaning {n}\n" for n in range(200))).encode()
    parsed = parse_document(data[:100] + b"\xff" + data[100:], "csv")
    assert "w199" in parsed.text
    assert parsed.warnings == ["1 byte that could not be decoded was replaced with “\ufffd”."]


def test_csv_with_a_stray_quote_is_still_read():
    data = b'a,b\n"unclosed,x\n' + b"word,other\n" * 20_000 + b"last,row\n"
    assert "a: last; b: row" in parse_document(data, "csv").text
    one_huge_field = b"a,b\n" + b"x" * 200_000 + b"\n"
    error = error_of(one_huge_field, "csv")
    assert (error.code, error.message) == (
        "corrupt",
        "This table file has a field too long to read as CSV; check its quotes and delimiters.",
    )


def test_a_table_with_only_a_header_row_keeps_its_words():
    assert rows_as_pairs([["Lonely", "", "header"]]) == "Lonely; header"
    assert [column_letter(n) for n in (0, 25, 26, 701, 702)] == ["A", "Z", "AA", "ZZ", "AAA"]


def test_blank_csv_has_no_text():
    assert error_of(b",,\n,,\n", "csv").code == "no_text"


# -- EML -----------------------------------------------------------------------------------------


def test_eml_headers_then_the_text_body():
    data = make_eml(
        subject="Quarterly numbers – café",
        body="Please find the figures.",
        html_body="<p>HTML version</p>",
        attachments=2,
    )
    parsed = parse_document(data, "eml")
    assert parsed.blocks[0].text == (
        "From: Ann Example <ann@example.org>\nTo: Bob Example <bob@example.org>\n"
        "Cc: Carol <carol@example.org>\nDate: Tue, 04 Mar 2025 10:15:00 +0000\n"
        "Subject: Quarterly numbers – café"
    )
    assert parsed.blocks[1].text == "Please find the figures."
    assert "HTML version" not in parsed.text and "secret attachment" not in parsed.text
    assert parsed.warnings == ["2 attachments were not read."]


def test_eml_html_body_keeps_its_headings():
    data = make_eml(
        subject="Agenda",
        body="",
        html_body="<h1>Budget</h1><p>Numbers</p>",
        plain=False,
        attachments=1,
    )
    parsed = parse_document(data, "eml")
    assert parsed.blocks[-1].text == "Budget\n\nNumbers"
    assert parsed.blocks[-1].location == {"heading": "Budget"}
    assert parsed.warnings == ["1 attachment was not read."]


def test_eml_charsets_and_raw_8bit_headers():
    latin = (
        b"Subject: x\nContent-Type: text/plain; charset=iso-8859-1\n"
        b"Content-Transfer-Encoding: quoted-printable\n\ncaf=E9"
    )
    assert parse_document(latin, "eml").text == "Subject: x\n\ncafé"
    raw = b"From: J\xc3\xbcrgen <j@example.de>\nSubject: Gr\xc3\xbc\xc3\x9fe\n\nHallo \xc3\xa4\n"
    assert parse_document(raw, "eml").text == (
        "From: Jürgen <j@example.de>\nSubject: Grüße\n\nHallo ä"
    )
    unknown = b"Subject: x\nContent-Type: text/plain; charset=no-such-charset\n\nplain words"
    assert parse_document(unknown, "eml").text.endswith("plain words")


@pytest.mark.parametrize(
    "data",
    [b"Just some prose, not mail.\nSecond line.", b"\x00\x01\x02", b"", b"Hello: world\n\nbody"],
)
def test_a_file_that_is_not_mail(data):
    error = error_of(data, "eml")
    assert (error.code, error.message) == (
        "unsupported_type",
        (
            "This file is not an e-mail message: it has none of the From, To, Date or Subject "
            "headers."
        ),
    )


def test_malformed_mail_never_raises_anything_else():
    rng = random.Random(7)
    data = make_eml(subject="S", body="B", html_body="<p>h</p>", attachments=1)
    for _ in range(100):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 20)):
            damaged[rng.randrange(len(damaged))] = rng.choice(b'\x00\n:;<>=?"\\-')
        try:
            parse_document(bytes(damaged), "eml")
        except PermanentError:
            pass
    deep = b"Subject: deep\nContent-Type: multipart/mixed; boundary=b\n\n" + (
        b"--b\nContent-Type: multipart/mixed; boundary=b\n\n" * 1200
    )  # past the recursion limit
    assert parse_document(deep, "eml").text == "Subject: deep"


# -- EPUB ----------------------------------------------------------------------------------------

CHAPTERS = [
    ("Chapter One", "The sun was shining on the sea."),
    ("Chapter Two", "The time has come to talk of many things."),
    ("Chapter Three", "Of shoes and ships and sealing wax."),
]


def test_epub_chapters_in_spine_order_under_their_headings():
    parsed = parse_document(make_epub("The Walrus Book", "Lewis Carroll", CHAPTERS), "epub")
    assert parsed.blocks[0].text == "Title: The Walrus Book\nAuthor: Lewis Carroll"
    chapters = parsed.blocks[1:]
    assert [block.location for block in chapters] == [{"heading": h} for h, _ in CHAPTERS]
    assert [block.text for block in chapters] == [f"{h}\n\n{p}" for h, p in CHAPTERS]


def test_epub_bombs_and_damage():
    data = make_epub("T", "A", CHAPTERS)
    at = data.index(b"PK\x01\x02")
    huge = data[: at + 24] + struct.pack("<I", 0xFFFFFFF0) + data[at + 28 :]
    assert error_of(huge, "epub").code == "too_large"
    many = rewrite_zip(data, {f"x/{n}": (lambda _: b"") for n in range(office.ZIP_MAX_ENTRIES)})
    assert "e-book has" in error_of(many, "epub").message
    for broken in (
        data[: len(data) // 2],
        b"PK\x03\x04",
        rewrite_zip(data, {"META-INF/container.xml": lambda _: None}),
    ):
        error = error_of(broken, "epub")
        assert (error.code, error.message) == (
            "corrupt",
            "This e-book is damaged or truncated and cannot be read.",
        )


def test_epub_random_damage_is_a_permanent_error_or_readable():
    data, rng = make_epub("T", "A", CHAPTERS), random.Random(3)
    names = ["META-INF/container.xml", "EPUB/content.opf", "EPUB/chapter1.xhtml"]
    for _ in range(60):

        def damage(old):
            cut = rng.randrange(len(old))
            return old[:cut] + bytes([rng.choice(b'<>"&/=')]) + old[cut + rng.randint(0, 30) :]

        try:
            parse_document(rewrite_zip(data, {rng.choice(names): damage}), "epub")
        except PermanentError as error:
            assert error.code in {"corrupt", "no_text"}


def _with_encryption(data: bytes, algorithm: str) -> bytes:
    xml = (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        f'<enc:EncryptionMethod Algorithm="{algorithm}"/><enc:CipherData>'
        '<enc:CipherReference URI="EPUB/chapter1.xhtml"/></enc:CipherData>'
        "</enc:EncryptedData></encryption>"
    )
    return rewrite_zip(data, {"META-INF/encryption.xml": lambda _: xml.encode()})


def test_epub_with_drm_is_encrypted_but_obfuscated_fonts_are_fine():
    data = make_epub("T", "A", CHAPTERS)
    error = error_of(_with_encryption(data, "http://www.w3.org/2001/04/xmlenc#aes128-cbc"), "epub")
    assert (error.code, error.message) == (
        "encrypted",
        (
            "This e-book is protected by DRM (its chapters are encrypted); upload a copy without "
            "DRM."
        ),
    )
    fonts = _with_encryption(data, "http://www.idpf.org/2008/embedding")
    assert "sealing wax" in parse_document(fonts, "epub").text
