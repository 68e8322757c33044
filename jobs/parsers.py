"""Turn an uploaded document's bytes into plain text, or say in plain words why it cannot be read.

The parse step is where bad files meet the pipeline. Each supported kind is read with the
field-standard library for it (charset-normalizer, the stdlib HTML parser, pypdf, python-docx),
and every way a file can be unreadable (encrypted, damaged, no text, an unknown encoding)
becomes a `PermanentError` whose message a person understands: retrying the same bytes cannot
help. Nothing here fetches, executes or writes anything. This module is pure: no rq, no redis.
"""
from __future__ import annotations

import codecs
import io
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Callable

import charset_normalizer
import docx
import pypdf
from docx.opc.exceptions import OpcError
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml import etree
from pypdf.errors import DependencyError, PyPdfError

from jobs.failures import PermanentError
from jobs.filetypes import SUPPORTED_KINDS
from jobs.settings import MIB


#: A DOCX whose parts expand to more than this is refused before python-docx opens it.
DOCX_MAX_UNCOMPRESSED_BYTES = 256 * MIB
DOCX_MAX_ENTRIES = 5000

#: What pypdf and the libraries under it raise on a damaged file (it has no single base class).
_PDF_ERRORS: tuple[type[BaseException], ...] = (
    PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, AssertionError,
    struct.error, zlib.error, RecursionError,
)

_DOCX_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile, OpcError, etree.LxmlError, KeyError, ValueError, TypeError,
    AttributeError, IndexError, EOFError, NotImplementedError, zlib.error,
)

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

_NO_TEXT = {
    "pdf": "This PDF has no text layer (scanned?). Intake cannot read images of text.",
    "": "This document contains no text.",
}


@dataclass
class ParsedDocument:
    """The text of a document, and how many pages it had (1 for formats without pages)."""

    text: str
    pages: int


def parse_document(data: bytes, kind: str) -> ParsedDocument:
    """Extract the text of a document of `kind` (one of `SUPPORTED_KINDS`).

    Raises `PermanentError` with code ``unsupported_type``, ``encrypted``, ``corrupt``,
    ``no_text``, ``undecodable`` or ``too_large`` when the file cannot be read.
    """
    parser = _PARSERS.get(kind)
    if parser is None:
        raise PermanentError(
            f"“{kind}” is not a supported document type ({', '.join(SUPPORTED_KINDS)}).",
            code="unsupported_type")
    text, pages = parser(data)
    text = text.strip()
    if not text:
        raise PermanentError(_NO_TEXT.get(kind, _NO_TEXT[""]), code="no_text")
    return ParsedDocument(text=text, pages=pages)


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


# -- plain text and Markdown -------------------------------------------------------------------

def decode_text(data: bytes, declared: str | None = None) -> str:
    """Decode text of an unknown encoding.

    A byte-order mark wins; then strict UTF-8 (most files, and the fast path); then the
    `declared` encoding (an HTML page's <meta charset>), if any; then detection.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                raise PermanentError(
                    f"This file starts with a {encoding.upper()} byte-order mark but is not "
                    f"valid {encoding.upper()} text.", code="undecodable") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if declared:
        try:
            return data.decode(declared)
        except UnicodeDecodeError:
            pass
    return _detect_and_decode(data)


def _detect_and_decode(data: bytes) -> str:
    """Decode non-UTF-8 bytes with the encoding charset-normalizer finds most plausible.

    On short samples many single-byte code pages decode equally well; among those tied for
    best, Windows-1252 (the web's reading of Latin-1) is preferred, as browsers do.
    """
    matches = charset_normalizer.from_bytes(data)
    best = matches.best()
    if best is None:
        raise PermanentError(
            "The text encoding of this file could not be recognised; save it as UTF-8 and "
            "upload it again.", code="undecodable")
    for match in matches:
        tied = match.chaos == best.chaos and match.coherence == best.coherence
        if tied and "cp1252" in match.could_be_from_charset:
            try:
                return data.decode("cp1252")
            except UnicodeDecodeError:
                break
    return str(best)


def _parse_text(data: bytes) -> tuple[str, int]:
    return _normalise_newlines(decode_text(data)), 1


# -- HTML --------------------------------------------------------------------------------------

_HTML_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "math", "iframe",
                        "object", "canvas"})
_HTML_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "caption", "dd", "details", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
    "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table",
    "title", "tr", "ul",
})
_HTML_CELLS = frozenset({"td", "th"})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)


class _TextExtractor(HTMLParser):
    """Collects the visible text of a page as paragraphs; never fetches or runs anything."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._buffer: list[str] = []
        self._skip_depth = 0
        self._pre_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HTML_SKIP:
            self._skip_depth += 1
        elif tag == "br":
            self._buffer.append("\n")
        elif tag in _HTML_BLOCKS:
            self._flush()
            self._pre_depth += tag == "pre"

    def handle_endtag(self, tag: str) -> None:
        if tag in _HTML_SKIP:
            self._skip_depth = max(self._skip_depth - 1, 0)
        elif tag in _HTML_CELLS:
            self._buffer.append(" ")
        elif tag in _HTML_BLOCKS:
            self._flush()
            if tag == "pre":
                self._pre_depth = max(self._pre_depth - 1, 0)

    def handle_data(self, data: str) -> None:
        if self._skip_depth:
            return
        if self._pre_depth:
            self._buffer.append(_normalise_newlines(data))
        else:
            self._buffer.append(re.sub(r"\s+", " ", data))

    def close(self) -> None:
        super().close()
        self._flush()

    def _flush(self) -> None:
        """End the current paragraph: collapse spaces (outside <pre>), drop blank lines."""
        raw, self._buffer = "".join(self._buffer), []
        if self._pre_depth:
            lines = [line.rstrip() for line in raw.split("\n")]
        else:
            lines = [" ".join(line.split()) for line in raw.split("\n")]
        paragraph = "\n".join(line for line in lines if line.strip())
        if paragraph:
            self.paragraphs.append(paragraph)


def _declared_charset(data: bytes) -> str | None:
    """The single-byte or multi-byte encoding a page declares in a <meta> tag near its top.

    As in browsers, Latin-1 and ASCII mean Windows-1252, and a UTF-16/32 declaration inside
    the bytes it describes is ignored (only a byte-order mark can say that).
    """
    found = _META_CHARSET.search(data, 0, 2048)
    if not found:
        return None
    try:
        name = codecs.lookup(found.group(1).decode("ascii")).name
    except (LookupError, UnicodeDecodeError):
        return None
    if name in ("iso8859-1", "ascii"):
        return "cp1252"
    return None if name.startswith(("utf-16", "utf-32")) else name


def html_to_text(markup: str) -> str:
    """The visible text of an HTML page, blocks separated by blank lines."""
    extractor = _TextExtractor()
    extractor.feed(markup)
    extractor.close()
    return "\n\n".join(extractor.paragraphs)


def _parse_html(data: bytes) -> tuple[str, int]:
    return html_to_text(decode_text(data, _declared_charset(data))), 1


# -- PDF ---------------------------------------------------------------------------------------

def _corrupt(what: str) -> PermanentError:
    return PermanentError(f"This {what} is damaged or truncated and cannot be read.",
                          code="corrupt")


def _open_pdf(data: bytes) -> pypdf.PdfReader:
    """Open a PDF, unlocking it when it has only an owner password (an empty user password)."""
    reader = pypdf.PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        try:
            unlocked = reader.decrypt("")
        except DependencyError:
            raise PermanentError(
                "This PDF uses an encryption Intake cannot open; upload an unprotected copy.",
                code="encrypted") from None
        if not unlocked:
            raise PermanentError("This PDF is password-protected; upload an unprotected copy.",
                                 code="encrypted")
    return reader


def _parse_pdf(data: bytes) -> tuple[str, int]:
    try:
        reader = _open_pdf(data)
        texts = [(page.extract_text() or "").strip() for page in reader.pages]
    except _PDF_ERRORS:
        raise _corrupt("PDF") from None
    text = "\n\n".join(_normalise_newlines(t).replace("\x00", "") for t in texts if t)
    if not text.strip() and b"%%EOF" not in data[-8192:]:
        raise _corrupt("PDF")  # recovered from a cut-off file: "no text layer" would mislead
    return text, len(texts)


# -- DOCX --------------------------------------------------------------------------------------

def _check_docx_bounds(data: bytes, limit: int = DOCX_MAX_UNCOMPRESSED_BYTES) -> None:
    """Refuse a DOCX whose parts would expand past `limit` bytes (a zip bomb) before opening it.

    The sizes come from the zip's central directory; `zipfile` never reads a member past its
    declared size, so they bound what python-docx can inflate.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, EOFError, ValueError, OSError):
        raise _corrupt("Word document") from None
    if len(members) > DOCX_MAX_ENTRIES:
        raise PermanentError(f"This Word document has {len(members)} parts, more than the "
                             f"{DOCX_MAX_ENTRIES} Intake accepts.", code="too_large")
    total = sum(member.file_size for member in members)
    if total > limit:
        raise PermanentError(
            f"This Word document expands to {total // MIB} MiB, more than the "
            f"{limit // MIB} MiB Intake accepts.", code="too_large")


def _table_text(table: Table) -> str:
    """A table as lines of tab-separated cells; a merged cell is written once per row."""
    rows = []
    for row in table.rows:
        cells, previous = [], None
        for cell in row.cells:
            if cell._tc is not previous:
                cells.append(cell.text.strip())
            previous = cell._tc
        if any(cells):
            rows.append("\t".join(cells))
    return "\n".join(rows)


def _parse_docx(data: bytes) -> tuple[str, int]:
    _check_docx_bounds(data)
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = [block.text if isinstance(block, Paragraph)
                  else _table_text(block) for block in document.iter_inner_content()]
    except _DOCX_ERRORS:
        raise _corrupt("Word document") from None
    text = "\n\n".join(block.strip() for block in blocks if block.strip())
    return _normalise_newlines(text), 1


_PARSERS: dict[str, Callable[[bytes], tuple[str, int]]] = {
    "txt": _parse_text,
    "md": _parse_text,
    "html": _parse_html,
    "pdf": _parse_pdf,
    "docx": _parse_docx,
}
