"""Tiny, valid documents built in memory for the tests.

Unit, integration and browser tests all need a real PDF, DOCX or HTML file; building them here,
byte for byte, keeps binary fixtures out of the repository and makes every sample's content
obvious from the test that uses it. The PDFs are written by hand (one object per line, a correct
xref table) so they do not depend on any PDF writer.
"""

from __future__ import annotations

import html
import io
import zipfile
from collections.abc import Callable

import docx


def _pdf_string(line: str) -> bytes:
    """A PDF literal string: cp1252 bytes with backslashes and parentheses escaped."""
    raw = line.encode("cp1252")
    raw = raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    return b"(" + raw + b")"


def _content_stream(text: str) -> bytes:
    """Operators that show `text` in 12 pt Helvetica, one Tj per line."""
    ops = [b"BT", b"/F1 12 Tf", b"14 TL", b"72 720 Td"]
    for number, line in enumerate(text.split("\n")):
        if number:
            ops.append(b"T*")
        ops.append(_pdf_string(line) + b" Tj")
    ops.append(b"ET")
    return b"\n".join(ops)


def _serialise(objects: list[bytes]) -> bytes:
    """Number `objects` from 1 and write them with an xref table; object 1 is the catalog."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1))
    out.write(b"startxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


def make_pdf_pages(pages: list[str | None]) -> bytes:
    """A PDF with one page per item: a text layer with that text, or no content at all for None."""
    font = 3 + 2 * len(pages)
    kids = b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(len(pages)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages)),
    ]
    for i, text in enumerate(pages):
        page = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
            b" /Resources << /Font << /F1 %d 0 R >> >>" % font
        )
        if text is not None:
            page += b" /Contents %d 0 R" % (4 + 2 * i)
            stream = _content_stream(text)
            contents = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
        else:
            contents = b"null"
        objects += [page + b" >>", contents]
    objects.append(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    )
    return _serialise(objects)


def make_pdf(text: str) -> bytes:
    """A valid one-page PDF whose text layer holds `text` ("\\n" starts a new line)."""
    return make_pdf_pages([text])


def make_pdf_no_text() -> bytes:
    """A valid one-page PDF without a content stream, like a scan with no OCR layer."""
    return make_pdf_pages([None])


def make_pdf_of_size(size: int, text: str | None = None, seed: str = "") -> bytes:
    """A PDF of about `size` bytes: one page (with `text` as its text layer, or none, like a
    scan) and an image-sized stream of filler that no page uses, so reading it stays quick.
    `seed` makes the filler, and so the file, unique."""
    filler = (seed.encode() + b"\x00\xff") * max(1, size // (len(seed) + 2))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>"]
    if text is None:
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>")
    else:
        stream = _content_stream(text)
        objects += [
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
            b" /Resources << /Font << /F1 6 0 R >> >> /Contents 5 0 R >>"
        ]
    objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(filler), filler))
    if text is not None:
        objects += [
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        ]
    return _serialise(objects)


def make_scan_of_size(size: int, seed: str = "") -> bytes:
    """A PDF of about `size` bytes with no text layer, like a large scan."""
    return make_pdf_of_size(size, None, seed)


def make_docx(paragraphs: list[str]) -> bytes:
    """A Word document with one paragraph per item, written by python-docx."""
    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_html(title: str, body_text: str) -> bytes:
    """A UTF-8 HTML page; blank lines in `body_text` separate its <p> paragraphs."""
    paragraphs = "".join(
        f"<p>{html.escape(part)}</p>\n" for part in body_text.split("\n\n") if part.strip()
    )
    page = (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n</head>\n<body>\n{paragraphs}</body>\n</html>\n"
    )
    return page.encode("utf-8")


# -- office, e-book and mail samples -------------------------------------------------------------


def rewrite_zip(data: bytes, changes: dict[str, Callable[[bytes | None], bytes | None]]) -> bytes:
    """A copy of the zip `data` in which each named member is replaced by what its function
    returns for the old content (None for a new member); returning None drops the member."""
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        names = source.namelist() + [name for name in changes if name not in source.namelist()]
        for name in names:
            content = source.read(name) if name in source.namelist() else None
            if name in changes:
                content = changes[name](content)
            if content is not None:
                target.writestr(name, content)
    return out.getvalue()


_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_NOTES = (
    '<w:{kind}s xmlns:w="' + _W + '">'
    '<w:{kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{kind}>'
    '<w:{kind} w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/>'
    "</w:r></w:p></w:{kind}>"
    '<w:{kind} w:id="1"><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:{kind}></w:{kind}s>'
)
_REL_BASE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
_CT_BASE = "application/vnd.openxmlformats-officedocument.wordprocessingml."


def _with_notes(data: bytes, footnote: str, endnote: str) -> bytes:
    """Add a footnotes and an endnotes part (each with Word's separator notes) to a DOCX."""

    def rels(old: bytes | None) -> bytes:
        extra = "".join(
            f'<Relationship Id="rIdNote{kind}" Type="{_REL_BASE}{kind}s" Target="{kind}s.xml"/>'
            for kind in ("footnote", "endnote")
        )
        return old.replace(b"</Relationships>", extra.encode() + b"</Relationships>")

    def types(old: bytes | None) -> bytes:
        extra = "".join(
            f'<Override PartName="/word/{kind}s.xml" ContentType="{_CT_BASE}{kind}s+xml"/>'
            for kind in ("footnote", "endnote")
        )
        return old.replace(b"</Types>", extra.encode() + b"</Types>")

    return rewrite_zip(
        data,
        {
            "word/_rels/document.xml.rels": rels,
            "[Content_Types].xml": types,
            "word/footnotes.xml": lambda _: _NOTES.format(kind="footnote", text=footnote).encode(),
            "word/endnotes.xml": lambda _: _NOTES.format(kind="endnote", text=endnote).encode(),
        },
    )


_BODY_EXTRAS = (
    '<w:sdt xmlns:w="' + _W + '"><w:sdtContent><w:p><w:r><w:t>Cover page in a content control'
    "</w:t></w:r></w:p></w:sdtContent></w:sdt>",
    '<w:p xmlns:w="'
    + _W
    + '" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
    ' xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"'
    ' xmlns:v="urn:schemas-microsoft-com:vml"><w:r><mc:AlternateContent>'
    '<mc:Choice Requires="wps"><w:drawing><wps:txbx><w:txbxContent><w:p><w:r><w:t>Boxed words'
    "</w:t></w:r></w:p></w:txbxContent></wps:txbx></w:drawing></mc:Choice><mc:Fallback><w:pict>"
    "<v:textbox><w:txbxContent><w:p><w:r><w:t>Boxed words</w:t></w:r></w:p></w:txbxContent>"
    "</v:textbox></w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>",
)


def make_docx_with_parts() -> bytes:
    """A DOCX with every part a person searches: a title and headings, a table, a content
    control and a text box in the body; default, first-page and even-page headers and footers
    in two sections; a footnote and an endnote."""
    from docx.oxml import parse_xml

    document = docx.Document()
    document.settings.odd_and_even_pages_header_footer = True
    document.add_heading("Supply agreement", level=0)
    document.add_paragraph("Opening words before any section heading.")
    document.add_heading("Payment terms", level=1)
    document.add_paragraph("Invoices are paid within thirty days.")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate([["Item", "Price"], ["Widget", "42"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_heading("Termination", level=2)
    document.add_paragraph("Either party may end this agreement.")
    for extra in _BODY_EXTRAS:
        document.element.body.sectPr.addprevious(parse_xml(extra))
    first = document.sections[0]
    first.different_first_page_header_footer = True
    first.header.paragraphs[0].text = "Primary header: Acme Confidential"
    first.first_page_header.paragraphs[0].text = "First page header: Draft for review"
    first.even_page_header.paragraphs[0].text = "Even page header: Left pages"
    first.footer.paragraphs[0].text = "Primary footer: Registered in Ruritania"
    first.first_page_footer.paragraphs[0].text = "First page footer: Cover sheet"
    first.even_page_footer.paragraphs[0].text = "Even page footer: Verso"
    second = document.add_section()
    document.add_paragraph("Annex text in the second section.")
    second.header.is_linked_to_previous = False
    second.header.paragraphs[0].text = "Second section header: Annex"
    out = io.BytesIO()
    document.save(out)
    return _with_notes(
        out.getvalue(), "Footnote: the zebra clause applies.", "Endnote: see the walrus schedule."
    )


def make_pptx(slides: list[dict]) -> bytes:
    """A presentation with one slide per item: "title", "body", "table" (rows of cells),
    "group" (texts of shapes in one group) and "notes", each optional."""
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    for spec in slides:
        slide = presentation.slides.add_slide(presentation.slide_layouts[5])  # title only
        if "title" in spec:
            slide.shapes.title.text = spec["title"]
        else:
            slide.shapes.title.element.getparent().remove(slide.shapes.title.element)
        if "body" in spec:
            box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1))
            box.text_frame.text = spec["body"]
        if "table" in spec:
            rows = spec["table"]
            shape = slide.shapes.add_table(
                len(rows), len(rows[0]), Inches(1), Inches(3), Inches(6), Inches(2)
            )
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    shape.table.cell(r, c).text = value
        if "group" in spec:
            group = slide.shapes.add_group_shape()
            for i, text in enumerate(spec["group"]):
                group.shapes.add_textbox(
                    Inches(1 + i), Inches(5), Inches(1), Inches(1)
                ).text_frame.text = text
        if "notes" in spec:
            slide.notes_slide.notes_text_frame.text = spec["notes"]
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def make_xlsx(sheets: dict[str, list[list]], cached: dict[str, str] | None = None) -> bytes:
    """A workbook with one sheet per item (rows of values; a string starting with "=" is a
    formula). openpyxl stores no computed value for a formula; `cached` gives some, as Excel
    would have saved them: {"A2*2": "2400"}."""
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    workbook.save(out)
    data = out.getvalue()
    if not cached:
        return data

    def with_values(old: bytes | None) -> bytes:
        for formula, value in cached.items():
            old = old.replace(
                f"<f>{formula}</f><v></v>".encode(), f"<f>{formula}</f><v>{value}</v>".encode()
            )
        return old

    names = [f"xl/worksheets/sheet{n}.xml" for n in range(1, len(sheets) + 1)]
    return rewrite_zip(data, dict.fromkeys(names, with_values))


def make_epub(title: str, author: str, chapters: list[tuple[str, str]]) -> bytes:
    """An EPUB 3 written by EbookLib: chapters as (heading, paragraph) in spine order, added to
    the manifest in reverse so that only the spine can give their order."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("intake-sample")
    book.set_title(title)
    book.set_language("en")
    book.add_author(author)
    items = []
    for number, (heading, paragraph) in enumerate(chapters, start=1):
        item = epub.EpubHtml(title=heading, file_name=f"chapter{number}.xhtml", lang="en")
        item.content = (
            f"<html><body><h1>{html.escape(heading)}</h1>"
            f"<p>{html.escape(paragraph)}</p></body></html>"
        )
        items.append(item)
    for item in reversed(items):
        book.add_item(item)
    book.toc = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav"] + items
    out = io.BytesIO()
    epub.write_epub(out, book)
    return out.getvalue()


def make_eml(
    *,
    subject: str,
    body: str,
    html_body: str | None = None,
    attachments: int = 0,
    plain: bool = True,
) -> bytes:
    """An e-mail message written by the stdlib: a text body (and an HTML alternative), or only
    an HTML body when `plain` is false; `attachments` small files attached."""
    from email.message import EmailMessage

    message = EmailMessage()
    message["From"] = "Ann Example <ann@example.org>"
    message["To"] = "Bob Example <bob@example.org>"
    message["Cc"] = "Carol <carol@example.org>"
    message["Date"] = "Tue, 04 Mar 2025 10:15:00 +0000"
    message["Subject"] = subject
    if plain:
        message.set_content(body)
        if html_body is not None:
            message.add_alternative(html_body, subtype="html")
    else:
        message.set_content(html_body or body, subtype="html")
    for number in range(attachments):
        message.add_attachment(
            b"secret attachment words",
            maintype="application",
            subtype="octet-stream",
            filename=f"file{number}.bin",
        )
    return message.as_bytes()


# -- images and scans, for OCR -------------------------------------------------------------------


def make_text_image(lines: list[str], image_format: str = "PNG", size: int = 48) -> bytes:
    """An image of `lines`, black on white, in Pillow's built-in font (no system font needed)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size)
    image = Image.new(
        "L",
        (
            40 + int(0.62 * size * max(map(len, lines), default=1)),
            40 + int(1.6 * size) * max(len(lines), 1),
        ),
        "white",
    )
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        draw.text((20, 20 + int(1.6 * size) * number), line, font=font, fill="black")
    out = io.BytesIO()
    image.save(out, image_format)
    return out.getvalue()


def make_scan_pdf(pages: list[list[str] | None], dpi: int = 200) -> bytes:
    """A PDF of page images and no text layer, as a scanner writes: each page an image of its
    lines (14 pt) on a white letter-sized page at `dpi` (None: a blank page)."""
    from PIL import Image, ImageDraw, ImageFont

    font, images = ImageFont.load_default(size=dpi * 14 // 72), []
    for lines in pages:
        image = Image.new("L", (dpi * 17 // 2, dpi * 11), "white")
        draw = ImageDraw.Draw(image)
        for number, line in enumerate(lines or []):
            draw.text((dpi, dpi + dpi * number // 3), line, font=font, fill="black")
        images.append(image)
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=dpi, save_all=True, append_images=images[1:])
    return out.getvalue()


def merge_pdfs(*pdfs: bytes) -> bytes:
    """One PDF of the pages of `pdfs`, in order (typed pages beside scanned ones, as a scanner's
    output and a word processor's export are put together)."""
    import pypdf

    writer = pypdf.PdfWriter()
    for pdf in pdfs:
        writer.append(pypdf.PdfReader(io.BytesIO(pdf)))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def zip_bomb(data: bytes, member: str) -> bytes:
    """The zip package `data` with `member` replaced by 300 MiB of zeros, about 1 MiB deflated."""
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as target:
        for name in source.namelist():
            if name != member:
                target.writestr(name, source.read(name))
        with target.open(member, "w", force_zip64=True) as bomb:
            for _ in range(300):
                bomb.write(bytes(1 << 20))
    return out.getvalue()
