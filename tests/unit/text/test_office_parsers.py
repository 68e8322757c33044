"""DOCX, PPTX and XLSX: the words a person searches for, where each part of the text comes
from (heading, slide, sheet) and where no chunk may cross; and every hostile package (a zip
bomb, thousands of parts, password protection, truncation, random damage) refused with a
readable PermanentError, never another exception."""

import io
import random
import re
import struct

import pytest

from jobs.core.failures import PermanentError
from jobs.text.parsers import office, parse_document
from jobs.text.parsers.office_sheets import cell_text
from tests.samples import (
    make_docx,
    make_docx_with_parts,
    make_pptx,
    make_xlsx,
    rewrite_zip,
    zip_bomb,
)

NOUNS = {"docx": "Word document", "pptx": "presentation", "xlsx": "workbook"}


def error_of(data, kind):
    with pytest.raises(PermanentError) as caught:
        parse_document(data, kind)
    assert caught.value.transient is False and caught.value.message
    return caught.value


def sample(kind):
    if kind == "docx":
        return make_docx(["Some words in a paragraph."])
    if kind == "pptx":
        return make_pptx([{"title": "A slide", "notes": "Some notes"}])
    return make_xlsx({"Data": [["Name", "Qty"], ["Apples", 3]]})


# -- DOCX ----------------------------------------------------------------------------------------


def test_docx_keeps_headers_footers_notes_tables_and_headings():
    parsed = parse_document(make_docx_with_parts(), "docx")
    text = parsed.text
    for words in (
        "Acme Confidential",
        "Draft for review",
        "Left pages",
        "Annex",
        "Registered in Ruritania",
        "Cover sheet",
        "Verso",
        "zebra clause",
        "walrus schedule",
        "Widget\t42",
        "Cover page in a content control",
    ):
        assert words in text, words
    assert text.count("Boxed words") == 1  # the text box's VML fallback is not read twice
    assert text.count("Acme Confidential") == 1  # a linked header is its predecessor's
    located = {block.text.split("\n")[0]: block.location for block in parsed.blocks}
    assert located["Supply agreement"] == {"heading": "Supply agreement"}  # the Title style
    assert located["Payment terms"] == {"heading": "Payment terms"}
    payment = next(b for b in parsed.blocks if "thirty days" in b.text)
    assert "Item\tPrice" in payment.text and payment.location == {"heading": "Payment terms"}
    assert next(b for b in parsed.blocks if "walrus" in b.text).location == {}


def test_docx_separator_footnotes_add_nothing():
    blocks = parse_document(make_docx_with_parts(), "docx").blocks
    assert all(block.text.strip() for block in blocks)
    assert blocks[-1].text == "Endnote: see the walrus schedule."


# -- PPTX ----------------------------------------------------------------------------------------


def test_pptx_one_block_per_slide_with_tables_groups_and_notes():
    data = make_pptx(
        [
            {
                "title": "Quarterly review",
                "body": "Revenue grew in the north",
                "table": [["Region", "Sales"], ["North", "1200"]],
                "group": ["Grouped alpha", "Grouped beta"],
                "notes": "Mention the penguins",
            },
            {"body": "Second slide words"},
            {"title": "Third slide title", "notes": "Closing remarks"},
        ]
    )
    parsed = parse_document(data, "pptx")
    assert [b.location for b in parsed.blocks] == [{"slide": 1}, {"slide": 2}, {"slide": 3}]
    assert all(block.boundary for block in parsed.blocks)
    first = parsed.blocks[0].text
    for words in (
        "Quarterly review",
        "Revenue grew",
        "Region\tSales",
        "North\t1200",
        "Grouped alpha",
        "Grouped beta",
    ):
        assert words in first
    assert first.endswith("Notes: Mention the penguins")
    assert parsed.blocks[1].text == "Second slide words"
    assert parsed.blocks[2].text == "Third slide title\n\nNotes: Closing remarks"
    assert parsed.pages == 3


def test_pptx_without_any_text():
    assert error_of(make_pptx([{}]), "pptx").code == "no_text"


# -- XLSX ----------------------------------------------------------------------------------------


def test_xlsx_every_sheet_as_header_value_rows_with_values_never_formulas():
    data = make_xlsx(
        {
            "Q3": [
                ["Region", "Q1", None, "Total"],
                ["North", 1200, 5, "=B2*2"],
                [None] * 4,
                ["South", 1.5, True, "=B4*2"],
            ],
            "Empty": [],
            "Staff": [["Name"], ["Ada"]],
        },
        cached={"B2*2": "2400"},
    )
    parsed = parse_document(data, "xlsx")
    assert [(b.location, b.boundary) for b in parsed.blocks] == [
        ({"sheet": "Q3"}, True),
        ({"sheet": "Staff"}, True),
    ]
    assert parsed.blocks[0].text == (
        "Region: North; Q1: 1200; C: 5; Total: 2400\nRegion: South; Q1: 1.5; C: TRUE"
    )
    assert "B2" not in parsed.text and "=" not in parsed.text
    assert parsed.blocks[1].text == "Name: Ada"


def test_xlsx_formula_without_cached_value_contributes_nothing():
    parsed = parse_document(make_xlsx({"S": [["Total", "Label"], ["=1+1", "kept"]]}), "xlsx")
    assert parsed.text == "Label: kept"


def test_cell_text_reads_as_excel_shows():
    import datetime

    assert [cell_text(v) for v in (None, 3.0, 0.1 + 0.2, False, "x")] == [
        "",
        "3",
        "0.3",
        "FALSE",
        "x",
    ]
    assert cell_text(datetime.datetime(2024, 3, 31)) == "2024-03-31"
    assert cell_text(datetime.datetime(2024, 3, 31, 9, 30)) == "2024-03-31 09:30:00"


def test_xlsx_with_only_empty_sheets_has_no_text():
    assert error_of(make_xlsx({"A": [], "B": [[None, ""]]}), "xlsx").code == "no_text"


# -- hostile packages ----------------------------------------------------------------------------


def declared_huge(data: bytes) -> bytes:
    """The zip with its first member's uncompressed size, in the central directory, ~4 GiB."""
    at = data.index(b"PK\x01\x02")
    return data[: at + 24] + struct.pack("<I", 0xFFFFFFF0) + data[at + 28 :]


def many_parts(data: bytes, count: int = office.ZIP_MAX_ENTRIES + 1) -> bytes:
    return rewrite_zip(data, {f"junk/{n}.xml": (lambda _: b"<x/>") for n in range(count)})


@pytest.mark.parametrize("kind", ["docx", "pptx", "xlsx"])
def test_zip_bombs_are_refused_before_opening(kind):
    error = error_of(declared_huge(sample(kind)), kind)
    assert error.code == "too_large"
    assert error.message == (
        f"This {NOUNS[kind]} expands to 4,096 MiB, more than the 256 MiB Intake accepts."
    )
    error = error_of(many_parts(sample(kind)), kind)
    assert error.code == "too_large"
    assert re.fullmatch(
        f"This {NOUNS[kind]} has 5,0[0-9]{{2}} parts, more than the 5,000 "
        r"Intake accepts\.",
        error.message,
    ), error.message


def test_a_genuine_bomb_is_refused_without_inflating_it():
    bomb = zip_bomb(sample("xlsx"), "xl/worksheets/sheet1.xml")
    assert len(bomb) < 3 * 1024 * 1024
    assert error_of(bomb, "xlsx").code == "too_large"


@pytest.mark.parametrize("kind", ["docx", "pptx", "xlsx"])
def test_password_protected_office_files(kind):
    ole = office.OLE_MAGIC + bytes(504) + "EncryptionInfo\0EncryptedPackage".encode("utf-16-le")
    error = error_of(ole + bytes(1024), kind)
    assert (error.code, error.message) == (
        "encrypted",
        f"This {NOUNS[kind]} is password-protected; upload an unprotected copy.",
    )


def test_old_format_office_file_renamed():
    error = error_of(office.OLE_MAGIC + bytes(2048), "xlsx")
    assert error.code == "unsupported_type"
    assert "old Office 97–2003 format (.xls)" in error.message


@pytest.mark.parametrize("kind", ["docx", "pptx", "xlsx"])
def test_truncated_or_not_a_package(kind):
    data = sample(kind)
    for broken in (data[: len(data) // 2], data[:100], b"PK\x03\x04 not a zip", b""):
        error = error_of(broken, kind)
        assert (error.code, error.message) == (
            "corrupt",
            f"This {NOUNS[kind]} is damaged or truncated and cannot be read.",
        )
    assert (
        error_of(rewrite_zip(data, {"[Content_Types].xml": lambda _: None}), kind).code == "corrupt"
    )


@pytest.mark.parametrize("kind", ["docx", "pptx", "xlsx"])
def test_random_damage_is_a_permanent_error_or_readable(kind):
    data, rng = sample(kind), random.Random(kind)
    for _ in range(40):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 12)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            parse_document(bytes(damaged), kind)
        except PermanentError as error:  # a flipped bit can mark a member encrypted
            assert error.code in {"corrupt", "encrypted", "no_text", "too_large"}, error.code


def test_bounds_limit_is_read_when_checking(monkeypatch):
    monkeypatch.setattr(office, "ZIP_MAX_UNCOMPRESSED_BYTES", 1000)
    assert error_of(sample("docx"), "docx").code == "too_large"


def test_pptx_chart_keeps_its_title_series_and_categories():
    import pptx
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    data = CategoryChartData()
    data.categories = ["1st Qtr", "2nd Qtr"]
    data.add_series("Penguin sales", (8.2, 3.0))
    chart = slide.shapes.add_chart(
        XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(1), Inches(6), Inches(4), data
    ).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Sales by quarter"
    out = io.BytesIO()
    presentation.save(out)
    parsed = parse_document(out.getvalue(), "pptx")
    assert parsed.blocks[0].text == "Sales by quarter\nPenguin sales: 1st Qtr 8.2; 2nd Qtr 3"


def test_zip_level_password_is_encrypted():
    data = bytearray(sample("pptx"))
    at = data.index(b"PK\x01\x02")
    data[at + 8] |= 0x1  # the central directory's "encrypted" flag of the first member
    error = error_of(bytes(data), "pptx")
    assert (error.code, error.message) == (
        "encrypted",
        "This presentation is password-protected; upload an unprotected copy.",
    )


def test_docx_merged_cells_are_written_once():
    import docx

    document = docx.Document()
    table = document.add_table(rows=2, cols=3)
    table.cell(0, 0).merge(table.cell(0, 1)).text = "Merged head"
    for column, value in enumerate("Cab"):
        table.cell(1 if column else 0, 2 if not column else column - 1).text = value
    table.cell(1, 2).text = "c"
    out = io.BytesIO()
    document.save(out)
    assert parse_document(out.getvalue(), "docx").text == "Merged head\tC\na\tb\tc"


def test_xlsx_entity_expansion_bomb_is_refused():
    entities = "".join(
        f'<!ENTITY e{n} "{f"&e{n - 1};" * 10 if n else "lol" * 10}">' for n in range(9)
    )
    doctype = f'<?xml version="1.0"?><!DOCTYPE worksheet [{entities}]>'.encode()
    data = rewrite_zip(
        make_xlsx({"S": [["h"], [1]]}),
        {
            "xl/worksheets/sheet1.xml": (
                lambda old: doctype + old.replace(b"<t>h</t>", b"<t>&e8;</t>")
            )
        },
    )
    assert error_of(data, "xlsx").code == "corrupt"
