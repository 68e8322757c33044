"""Tiny, valid documents built in memory for the tests.

Unit, integration and browser tests all need a real PDF, DOCX or HTML file; building them here,
byte for byte, keeps binary fixtures out of the repository and makes every sample's content
obvious from the test that uses it. The PDFs are written by hand (one object per line, a correct
xref table) so they do not depend on any PDF writer.
"""
from __future__ import annotations

import html
import io

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
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages))]
    for i, text in enumerate(pages):
        page = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
                b" /Resources << /Font << /F1 %d 0 R >> >>" % font)
        if text is not None:
            page += b" /Contents %d 0 R" % (4 + 2 * i)
            stream = _content_stream(text)
            contents = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
        else:
            contents = b"null"
        objects += [page + b" >>", contents]
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica"
                   b" /Encoding /WinAnsiEncoding >>")
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
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>"]
    if text is None:
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>")
    else:
        stream = _content_stream(text)
        objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
                    b" /Resources << /Font << /F1 6 0 R >> >> /Contents 5 0 R >>"]
    objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(filler), filler))
    if text is not None:
        objects += [b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
                    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica"
                    b" /Encoding /WinAnsiEncoding >>"]
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
    paragraphs = "".join(f"<p>{html.escape(part)}</p>\n"
                         for part in body_text.split("\n\n") if part.strip())
    page = (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n</head>\n<body>\n{paragraphs}</body>\n</html>\n")
    return page.encode("utf-8")
