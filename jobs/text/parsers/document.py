"""What a parser gives: a document's text as blocks, each knowing where it is in the document.

Why blocks: search results say where a chunk comes from ("page 12", "slide 3", "sheet Q3", the
nearest heading), and a chunk must never run from one slide or sheet into the next. So a
parser cuts the text where the document itself has parts; chunking (jobs.text.chunking) joins
blocks until a block starts a new part (`boundary`) and gives each chunk the location of the
block it starts in (with `page_end` when it runs on to a later page). Pure: no rq, no redis.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobs.core.failures import PermanentError

#: Text is refused when it is out of all proportion to its file: a few kilobytes of workbook
#: whose one long shared string every row repeats, or a PDF that draws one text object on
#: every page, would otherwise turn a small upload into tens of thousands of chunks. Real
#: documents give from under one to a few tens of characters per byte of file (Excel's shared
#: strings and repeated headers at most); anything may give `TEXT_FREE_CHARS`.
TEXT_PER_FILE_BYTE = 100
TEXT_FREE_CHARS = 1_000_000

#: C0 and C1 control characters and DEL, ordinary whitespace (\t \n \v \f \r) aside.
CONTROLS = "\x00-\x08\x0e-\x1f\x7f-\x9f"
#: Format characters that stand between words: zero width space, bidi marks, embeddings,
#: overrides and isolates, invisible operators, interlinear annotation. Not those that join
#: within a word: ZWNJ and ZWJ (Persian, Indic scripts, emoji), the word joiners U+2060 and
#: U+FEFF, the Mongolian vowel separator, the signs written before digits (U+0600–U+0605 …), tags.
FORMATS = "\u061c\u200b\u200e\u200f\u202a-\u202e\u2061-\u2064\u2066-\u206f\ufff9-\ufffb"
_SOFT_HYPHEN = "\u00ad"
_INVISIBLE = re.compile(f"[{CONTROLS}{FORMATS}{_SOFT_HYPHEN}]+")
_CONTROL = re.compile(f"[{CONTROLS}]")


@dataclass
class Block:
    """A run of a document's text. `location`: {"page": 3}, {"slide": 2}, {"sheet": "Q3"},
    {"heading": "Terms"} or {}; `boundary`: no chunk spans into it from the block before."""

    text: str
    location: dict[str, Any] = field(default_factory=dict)
    boundary: bool = False


@dataclass
class ParsedDocument:
    """A document's blocks; how many pages it had (1 for formats without pages), how many of
    them were read by OCR, and what a person should know about the reading (`warnings`)."""

    blocks: list[Block]
    pages: int = 1
    ocr_pages: int = 0
    warnings: list[str] = field(default_factory=list)
    #: The pages (1-based) still to read by OCR, when the reading was asked to leave them to
    #: page ranges (`ParseOptions.ocr_split_at`): then `blocks` are the text layers alone.
    ocr_pending: list[int] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n\n".join(block.text for block in self.blocks)

    @property
    def characters(self) -> int:
        return sum(len(block.text) for block in self.blocks) + 2 * max(len(self.blocks) - 1, 0)

    @classmethod
    def of_text(cls, text: str, pages: int = 1, **kwargs: Any) -> ParsedDocument:
        return cls([Block(text)] if text else [], pages, **kwargs)


@dataclass(frozen=True)
class ParseOptions:
    """How to read: OCR (`ocr` "auto" or "off", its languages, the most pages it reads, the
    seconds one page may take), and whom to tell of progress (`progress("OCR page 3 of 9")`).

    Page ranges (a scan read by many workers at once): with `ocr_split_at` > 0, a PDF with at
    least that many pages to read by OCR is read up to its text layers only and names the pages
    left (`ParsedDocument.ocr_pending`); with `ocr_only`, only those pages of a PDF are read,
    by OCR, each page's text a block located at its page. `parsers.with_pages_read` puts the
    two together as one reading would have."""

    ocr: str = "auto"
    ocr_languages: tuple[str, ...] = ("en", "zh")
    ocr_max_pages: int = 200
    ocr_page_seconds: float = 60.0
    progress: Callable[[str], None] | None = None
    ocr_split_at: int = 0
    ocr_only: tuple[int, ...] = ()

    def tell(self, detail: str) -> None:
        if self.progress is not None:
            self.progress(detail)


def word_boundaries(text: str) -> str:
    """`text` with each run of control and format characters between two words made one space.

    Why: such a character is invisible, so a reader sees two words where it stands, but a
    search term ran them together ("ϲΒϴΒ\\x03habibi" was stored as "ϲΒϴΒhabibi" and "habibi"
    found nothing). A control character elsewhere carries nothing and is dropped; a format
    character elsewhere (a bidi mark beside a space) still orders the text around it and stays.
    A soft hyphen only says where a word may break: it goes, and the word is whole.
    """
    return _INVISIBLE.sub(_boundary, text)


def _boundary(found: re.Match[str]) -> str:
    run = found.group().replace(_SOFT_HYPHEN, "")
    text, start, end = found.string, found.start(), found.end()
    if run and start and end < len(text) and _in_word(text[start - 1]) and _in_word(text[end]):
        return " "
    return _CONTROL.sub("", run)


def _in_word(char: str) -> bool:
    """A letter, a combining mark or a digit."""
    return unicodedata.category(char)[0] in "LMN"


def text_allowance(file_bytes: int) -> int:
    """The most characters of text a file of `file_bytes` bytes may give."""
    return max(TEXT_FREE_CHARS, TEXT_PER_FILE_BYTE * file_bytes)


def out_of_proportion(file_bytes: int, at_least: int) -> PermanentError:
    """The error for a file whose text passed `text_allowance` (`at_least` characters so far)."""
    return PermanentError(
        f"This file of {file_bytes:,} bytes expands to at least {at_least:,} characters of text, "
        f"more than the {text_allowance(file_bytes):,} Intake accepts from a file of its size "
        "(the same text repeated many times over, as a decompression bomb does).",
        code="too_large",
    )
