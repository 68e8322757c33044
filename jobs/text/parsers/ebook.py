"""EPUB: the book's title and authors, then its chapters in reading (spine) order, each
chapter's headings kept as the location of the text under them.

Read with EbookLib, the field-standard EPUB library: it opens any file-like object (it hands
it to `zipfile`), so the bytes are read from memory, never through a temporary file, and it
parses the container and package documents with entity resolution off. The zip's bounds are
checked first (`jobs.text.parsers.office`), since EbookLib reads every member into memory, and a
book whose chapters are encrypted (DRM, declared in META-INF/encryption.xml) is refused as
such rather than read as noise. Each chapter's XHTML goes through the same `html_blocks` as an
uploaded HTML page; the navigation document (a table of contents) is left out, as it repeats
the chapters' headings, and so is each chapter's <head>, whose <title> repeats a name.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

import ebooklib
from ebooklib import epub
from lxml import etree

from jobs.core.failures import PermanentError
from jobs.text.parsers.document import Block, ParsedDocument, ParseOptions
from jobs.text.parsers.office import PACKAGE_ERRORS, check_zip_bounds, corrupt
from jobs.text.parsers.text import decode_text, html_blocks, replaced_warning

NOUN = "e-book"
_BODY = re.compile(r"<body[\s>]", re.I)
_ENCRYPTION = "META-INF/encryption.xml"
#: Font obfuscation (IDPF's and Adobe's) hides only embedded fonts; anything else is DRM.
_FONT_OBFUSCATION = frozenset(
    {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
)
_SAFE_XML = etree.XMLParser(resolve_entities=False, no_network=True)
_ERRORS = PACKAGE_ERRORS + (epub.EpubException,)


def _metadata_block(book: Any) -> Block:
    lines = []
    for label, name in (("Title", "title"), ("Author", "creator")):
        values = [value for value, _ in book.get_metadata("DC", name) if value and value.strip()]
        if values:
            lines.append(f"{label}: {'; '.join(' '.join(v.split()) for v in values)}")
    return Block("\n".join(lines))


def _chapters(book: Any) -> list[Any]:
    """The spine's documents in reading order, without the navigation document."""
    chapters = []
    for entry in book.spine:
        idref = entry[0] if isinstance(entry, (tuple, list)) else entry
        item = book.get_item_with_id(idref)
        if (
            item is not None
            and item.get_type() == ebooklib.ITEM_DOCUMENT
            and not isinstance(item, epub.EpubNav)
        ):
            chapters.append(item)
    return chapters


def _body(markup: str) -> str:
    """A chapter from its <body> on: the <title> in its head repeats a name the book gives."""
    found = _BODY.search(markup)
    return markup[found.start() :] if found else markup


def _refuse_drm(data: bytes) -> None:
    """Refuse an e-book whose chapters are encrypted (DRM): they would read as noise."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        if _ENCRYPTION not in archive.namelist():
            return
        root = etree.fromstring(archive.read(_ENCRYPTION), _SAFE_XML)
    methods = {method.get("Algorithm") for method in root.iter("{*}EncryptionMethod")}
    if methods - _FONT_OBFUSCATION:
        raise PermanentError(
            "This e-book is protected by DRM (its chapters are encrypted); "
            "upload a copy without DRM.",
            code="encrypted",
        )


def parse_epub(data: bytes, options: ParseOptions) -> ParsedDocument:
    """The title and authors, then each chapter's blocks (located by their headings).

    Raises `PermanentError` (``corrupt``, ``too_large``, ``encrypted`` for DRM).
    """
    check_zip_bounds(data, NOUN)
    try:
        _refuse_drm(data)
        book = epub.read_epub(io.BytesIO(data), {"ignore_ncx": True})
        chapters = [decode_text(item.content or b"") for item in _chapters(book)]
        blocks = [block for chapter in chapters for block in html_blocks(_body(chapter))]
        metadata = _metadata_block(book)
    except PermanentError:
        raise
    except _ERRORS:
        raise corrupt(NOUN) from None
    replaced = sum(chapter.replaced for chapter in chapters)
    return ParsedDocument(
        [metadata] + blocks if blocks else [], warnings=replaced_warning(replaced)
    )
