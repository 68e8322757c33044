"""Turn an uploaded document's bytes into blocks of text, or say in plain words why it cannot be
read.

The parse step is where bad files meet the pipeline. Each kind is read by the module of its
format family (text, pdf, images, office, tabular, ebook, mail), each with the field-standard
library for it, and every way a file can be unreadable (encrypted, damaged, no text, an unknown
encoding, too large once expanded) becomes a `PermanentError` whose message a person
understands: retrying the same bytes cannot help. Nothing here fetches, executes or writes
anything. Pure: no rq, no redis.
"""

from __future__ import annotations

from collections.abc import Callable

from jobs.core.failures import PermanentError
from jobs.text.filetypes import SUPPORTED_KINDS
from jobs.text.parsers.document import (
    Block,
    ParsedDocument,
    ParseOptions,
    out_of_proportion,
    text_allowance,
    word_boundaries,
)

__all__ = ["Block", "ParseOptions", "ParsedDocument", "parse_document", "with_pages_read"]

Parser = Callable[[bytes, ParseOptions], ParsedDocument]
_NO_TEXT = "This document contains no text."


def _parsers() -> dict[str, Parser]:
    """Imported when first needed: a worker imports what it parses with, the web does not."""
    from jobs.text.parsers import (
        ebook,
        images,
        mail,
        office_sheets,
        office_slides,
        office_word,
        pdf,
        tabular,
        text,
    )

    return {
        "txt": text.parse_text,
        "md": text.parse_markdown,
        "html": text.parse_html,
        "pdf": pdf.parse_pdf,
        "docx": office_word.parse_docx,
        "pptx": office_slides.parse_pptx,
        "xlsx": office_sheets.parse_xlsx,
        "csv": tabular.parse_csv,
        "tsv": tabular.parse_tsv,
        "epub": ebook.parse_epub,
        "eml": mail.parse_eml,
        "png": images.parse_png,
        "jpeg": images.parse_jpeg,
        "tiff": images.parse_tiff,
        "webp": images.parse_webp,
    }


def import_parsers() -> None:
    """Import every parser's library now (a worker before its first fork), not in each child."""
    _parsers()


def parse_document(data: bytes, kind: str, options: ParseOptions | None = None) -> ParsedDocument:
    """The blocks of a document of `kind` (one of `SUPPORTED_KINDS`).

    Raises `PermanentError` with code ``unsupported_type``, ``encrypted``, ``corrupt``,
    ``no_text``, ``undecodable`` or ``too_large`` (expanded past its bounds, or to more text
    than `text_allowance` gives a file of its size) when the file cannot be read.
    """
    parser = _parsers().get(kind)
    if parser is None:
        raise PermanentError(
            f"“{kind}” is not a supported document type ({', '.join(SUPPORTED_KINDS)}).",
            code="unsupported_type",
        )
    options = options or ParseOptions()
    parsed = _stripped(parser(data, options))
    if options.ocr_only or parsed.ocr_pending:  # a part of a reading: the whole is judged later
        return parsed
    return _judged(parsed, len(data))


def with_pages_read(
    data: bytes, plan: ParsedDocument, read: dict[int, str], options: ParseOptions
) -> ParsedDocument:
    """A PDF read in page ranges, whole: its text layers (`plan`, which names the pages left to
    OCR) and what OCR read on those pages (`read`, by page), judged as `parse_document` judges
    a reading in one piece (PermanentError no_text or too_large)."""
    from jobs.text.parsers import pdf

    return _judged(_stripped(pdf.with_pages_read(data, plan, read, options)), len(data))


def _stripped(parsed: ParsedDocument) -> ParsedDocument:
    """Each block's text with its words apart (`word_boundaries`) and stripped; empty ones go."""
    blocks = [Block(word_boundaries(b.text).strip(), b.location, b.boundary) for b in parsed.blocks]
    parsed.blocks = [block for block in blocks if block.text]
    return parsed


def _judged(parsed: ParsedDocument, file_bytes: int) -> ParsedDocument:
    if not parsed.blocks:
        raise PermanentError(_NO_TEXT, code="no_text")
    if parsed.characters > text_allowance(file_bytes):
        raise out_of_proportion(file_bytes, parsed.characters)
    return parsed
