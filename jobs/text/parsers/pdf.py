"""PDF: each page's text layer as a block located by its page number; pages without one are
rendered and read by OCR (jobs.text.ocr), and so are pages with an image and only a few words
of text layer (fewer than SHORT_TEXT characters: a scan with a stamp, a label, a page number),
whose OCR text is added after their text layer, never put in its place. A text layer is read
whole, the text drawn outside the page's box included (ImageMagick writes a page's label
there): a word a PDF holds is never thrown away.

Why pypdfium2 (PDFium, the engine of Chrome's PDF viewer) and not pypdf: on the same files it
extracts the same text 2.5 to 13 times as fast (docs/benchmarks.md, "PDF text extraction"),
opens AES-encrypted files without a cryptography package, recovers a file cut before its
cross-reference table where pypdf gives up, and it is the renderer OCR needs anyway: one
library reads and renders. A file PDFium cannot open is damaged (or locked by a password).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from jobs.core.failures import PermanentError
from jobs.text import ocr
from jobs.text.parsers.document import CONTROLS, FORMATS, Block, ParsedDocument, ParseOptions
from jobs.text.parsers.text import normalise_newlines

if TYPE_CHECKING:
    from PIL import Image

NO_TEXT_LAYER = "This PDF has no text layer (scanned?). Intake cannot read images of text."
#: Resolution pages are rendered at for OCR (at most ocr.MAX_SIDE pixels on a side).
RENDER_DPI = 200
#: A page with an image and a text layer shorter than this (in characters) is read by OCR too.
SHORT_TEXT = 100
_PROTECTED = "This PDF is password-protected; upload an unprotected copy."
_UNSUPPORTED_SECURITY = (
    "This PDF uses an encryption Intake cannot open; upload an unprotected copy."
)
_CORRUPT = "This PDF is damaged or truncated and cannot be read."
_INVISIBLE = re.compile(f"[{CONTROLS}{FORMATS}]")


def parse_pdf(data: bytes, options: ParseOptions) -> ParsedDocument:
    document = _open(data)
    try:
        if options.ocr_only:
            return _read_range(document, options)
        texts = [_page_text(document, index) for index in range(len(document))]
        unread = [n for n, text in enumerate(texts, start=1) if not text]
        short = [
            n
            for n, text in enumerate(texts, start=1)
            if 0 < len(text) < SHORT_TEXT and _has_image(document, n)
        ]
        # Short pages take what the OCR page limit leaves: past it they keep their text layer.
        room = max(options.ocr_max_pages - len(unread), 0)
        short, unreached = short[:room], short[room:]
        unreached_warning = _unreached_warning(unreached if options.ocr == "auto" else [], options)
        if options.ocr == "auto":
            ocr.check_page_count(
                len(unread),
                options.ocr_max_pages,
                f"This scan has {len(unread):,} pages without text",
            )
        pending = sorted(unread + short) if options.ocr == "auto" else []
        if 0 < options.ocr_split_at <= len(pending):
            return ParsedDocument(
                _blocks(texts), pages=len(texts), ocr_pending=pending, warnings=unreached_warning
            )
        ocr_texts = _ocr(document, pending, options)
    except pdfium.PdfiumError:
        raise PermanentError(_CORRUPT, code="corrupt") from None
    finally:
        document.close()
    return _assembled(data, texts, unread, ocr_texts, options, unreached_warning)


def with_pages_read(
    data: bytes, plan: ParsedDocument, read: dict[int, str], options: ParseOptions
) -> ParsedDocument:
    """The document `parse_pdf` would have given, from its text layers (`plan`, read with
    `ocr_split_at`) and the OCR text of its pending pages (`read`, by page, from `ocr_only`
    readings of its ranges)."""
    layers = {int(block.location["page"]): block.text for block in plan.blocks}
    texts = [layers.get(n, "") for n in range(1, plan.pages + 1)]
    unread = [n for n in plan.ocr_pending if not layers.get(n)]
    ocr_texts = {n: read.get(n, "") for n in plan.ocr_pending}
    return _assembled(data, texts, unread, ocr_texts, options, list(plan.warnings))


def _assembled(
    data: bytes,
    texts: list[str],
    unread: list[int],
    ocr_texts: dict[int, str],
    options: ParseOptions,
    warnings: list[str],
) -> ParsedDocument:
    texts = [_with_ocr(text, ocr_texts.get(n, "")) for n, text in enumerate(texts, start=1)]
    blocks = _blocks(texts)
    if not blocks:
        raise _nothing_read(data, len(texts), len(ocr_texts))
    return ParsedDocument(
        blocks,
        pages=len(texts),
        ocr_pages=len(ocr_texts),
        warnings=_warnings(unread, ocr_texts, options) + warnings,
    )


def _blocks(texts: list[str]) -> list[Block]:
    return [Block(text, {"page": n}) for n, text in enumerate(texts, start=1) if text]


def _read_range(document: pdfium.PdfDocument, options: ParseOptions) -> ParsedDocument:
    """Only the pages `options.ocr_only` names, read by OCR: one range of a scan."""
    pages = list(options.ocr_only)
    if any(not 1 <= n <= len(document) for n in pages):
        raise PermanentError(_CORRUPT, code="corrupt")
    renders = [_renderer(document, n) for n in pages]
    read = ocr.read_pages(renders, options.tell, options.ocr_languages)
    return ParsedDocument(
        [Block(text, {"page": n}) for n, text in zip(pages, read) if text],
        pages=len(document),
        ocr_pages=len(pages),
    )


def _open(data: bytes) -> pdfium.PdfDocument:
    """Open a PDF; one with only an owner password (an empty user password) opens as it is."""
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            raise PermanentError(_PROTECTED, code="encrypted") from None
        if exc.err_code == pdfium_c.FPDF_ERR_SECURITY:
            raise PermanentError(_UNSUPPORTED_SECURITY, code="encrypted") from None
        raise PermanentError(_CORRUPT, code="corrupt") from None


def _page_text(document: pdfium.PdfDocument, index: int) -> str:
    page = document[index]
    try:
        textpage = page.get_textpage()
        try:
            text = textpage.get_text_range()  # all of it, outside the page's box too
            dropped = _dropped_controls(textpage) if len(text) < textpage.count_chars() else []
        finally:
            textpage.close()
    finally:
        page.close()
    pieces: list[str] = []
    start = 0
    for at, controls in dropped:
        pieces += [_cleaned(text[start:at]), controls]
        start = at
    return "".join(pieces + [_cleaned(text[start:])]).strip()


def _cleaned(text: str) -> str:
    # PDFium writes a hyphen that breaks a word at a line's end as U+0002 (bounded extraction)
    # or U+FFFE (a range) and drops the line break: the word is whole again, as a person reads
    # (and searches for) it.
    return normalise_newlines(text).replace("\x00", "").replace("\x02", "").replace("\ufffe", "")


def _dropped_controls(textpage: pdfium.PdfTextPage) -> list[tuple[int, str]]:
    """The control characters PDFium leaves out of a page's text (U+0002, U+0003 and a few C1
    controls that are not a hyphen), each run with the index in the text it stood before.

    Why put them back: where one stands between two words, it is all that keeps them apart
    (py-pdf's habibi.pdf: "ϲΒϴΒ\\x03habibi"); `parsers.word_boundaries` then makes it a space.
    Only a page whose text is shorter than its characters is looked at one character at a time.
    """
    dropped: list[tuple[int, str]] = []
    run: list[str] = []
    for char_index in range(textpage.count_chars()):
        at = pdfium_c.FPDFText_GetTextIndexFromCharIndex(textpage, char_index)
        if at >= 0:
            if run:
                dropped.append((at, "".join(run)))
                run = []
            continue
        code = pdfium_c.FPDFText_GetUnicode(textpage, char_index)
        if 0 < code < 0x110000 and _INVISIBLE.fullmatch(chr(code)):
            run.append(chr(code))
    return dropped


def _with_ocr(layer: str, read: str) -> str:
    """A page's text layer, then the lines OCR read on it that the layer does not already
    hold (OCR reads the layer's words too where they are drawn)."""
    held = {line.strip() for line in layer.split("\n")}
    added = [line for line in read.split("\n") if line.strip() and line.strip() not in held]
    return "\n".join(([layer] if layer else []) + added)


def _has_image(document: pdfium.PdfDocument, number: int) -> bool:
    page = document[number - 1]
    try:
        return any(True for _ in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE]))
    finally:
        page.close()


def _ocr(document: pdfium.PdfDocument, pages: list[int], options: ParseOptions) -> dict[int, str]:
    """The text OCR reads on `pages` (1-based): those without text and those with a short
    text layer beside an image (already within the page limit)."""
    if not pages:
        return {}
    renders = [_renderer(document, n) for n in pages]
    return dict(zip(pages, ocr.read_pages(renders, options.tell, options.ocr_languages)))


def _renderer(document: pdfium.PdfDocument, number: int) -> Callable[[], Image.Image]:
    def render() -> Image.Image:
        page = document[number - 1]
        try:
            width, height = page.get_size()
            scale = min(RENDER_DPI / 72, ocr.MAX_SIDE / max(width, height, 1))
            bitmap = page.render(scale=scale, grayscale=True)
            return bitmap.to_pil()
        finally:
            page.close()

    return render


def _nothing_read(data: bytes, pages: int, ocr_pages: int) -> PermanentError:
    if b"%%EOF" not in data[-8192:]:  # recovered from a cut-off file: "no text" would mislead
        return PermanentError(_CORRUPT, code="corrupt")
    if not ocr_pages:
        return PermanentError(NO_TEXT_LAYER, code="no_text")
    each = "its page" if ocr_pages == 1 else f"its {ocr_pages:,} pages"
    return PermanentError(
        f"This PDF has no text layer, and OCR read {each} without finding "
        "any text (blank pages, or a scan too faint to read?).",
        code="no_text",
    )


def _warnings(unread: list[int], ocr_texts: dict[int, str], options: ParseOptions) -> list[str]:
    if options.ocr != "auto" and unread:
        return [
            f"{_count(unread)} without text {'was' if len(unread) == 1 else 'were'} "
            "not read: OCR is turned off (INTAKE_OCR=off)."
        ]
    empty = [n for n in unread if not ocr_texts.get(n)]
    if empty:
        shown = ", ".join(map(str, empty[:10])) + (" …" if len(empty) > 10 else "")
        return [f"OCR found no text on {_count(empty)} ({shown})."]
    return []


def _unreached_warning(pages: list[int], options: ParseOptions) -> list[str]:
    if not pages:
        return []
    one = len(pages) == 1
    return [
        f"{_count(pages)} with a few words beside an image {'was' if one else 'were'} kept "
        f"as {'its' if one else 'their'} text layer, not read by OCR: OCR reads at most "
        f"{options.ocr_max_pages:,} pages per document."
    ]


def _count(pages: list[int]) -> str:
    return "1 page" if len(pages) == 1 else f"{len(pages):,} pages"
