"""Plain text, Markdown and HTML: decoded whatever their encoding, with their headings kept as
the location of the text under them.

Why decoding is forgiving: a UTF-8 file whose last character was cut, or with a few bad bytes,
is still the document its owner meant; it is read with those bytes replaced (U+FFFD) and the
task's result says how many (`warnings`). Only a file that is mostly undecodable fails.
"""

from __future__ import annotations

import codecs
import re
from typing import Any

import charset_normalizer
from lxml import etree

from jobs.core.failures import PermanentError
from jobs.text.parsers.document import Block, ParsedDocument, ParseOptions

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# A UTF-8 file with at most this share of bad bytes is read as UTF-8, the bad ones replaced.
FEW_BAD_BYTES = 0.01
# Past this share of replaced bytes, a file is mostly undecodable: it fails.
MOSTLY_UNDECODABLE = 0.2


class Decoded(str):
    """Text, with how many undecodable bytes were replaced in it (`replaced`)."""

    replaced: int = 0


def _decoded(text: str, replaced: int = 0) -> Decoded:
    result = Decoded(text)
    result.replaced = replaced
    return result


def _with_replacements(data: bytes, encoding: str) -> Decoded:
    """`data` decoded with each undecodable sequence replaced by one U+FFFD, and how many bytes
    those sequences held (the valid rest, encoded again, is the same bytes)."""
    valid = data.decode(encoding, "ignore").encode(encoding)
    return _decoded(data.decode(encoding, "replace"), max(len(data) - len(valid), 0))


def decode_text(data: bytes, declared: str | None = None) -> Decoded:
    """Decode text of an unknown encoding.

    A byte-order mark wins; then UTF-8 (most files, and the fast path), with a few bad bytes
    replaced; then the `declared` encoding (an HTML page's <meta charset>), if any; then
    detection; then UTF-8 with its bad bytes replaced, unless that is most of the file.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _checked(_with_replacements(data, encoding), len(data), encoding.upper())
    try:
        return _decoded(data.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    as_utf8 = _with_replacements(data, "utf-8")
    if as_utf8.replaced <= FEW_BAD_BYTES * len(data):
        return as_utf8
    if declared:
        try:
            return _decoded(data.decode(declared))
        except (UnicodeDecodeError, LookupError):
            pass
    detected = _detect(data)
    if detected is not None:
        return _decoded(detected)
    return _checked(as_utf8, len(data), "UTF-8")


def _checked(text: Decoded, size: int, encoding: str) -> Decoded:
    if text.replaced > MOSTLY_UNDECODABLE * max(size, 1):
        raise PermanentError(
            f"Most of this file is not valid {encoding} text and its encoding could not be "
            "recognised; save it as UTF-8 and upload it again.",
            code="undecodable",
        )
    return text


def _detect(data: bytes) -> str | None:
    """The text of non-UTF-8 bytes in the encoding charset-normalizer finds most plausible.

    On short samples many single-byte code pages decode equally well; among those tied for
    best, Windows-1252 (the web's reading of Latin-1) is preferred, as browsers do.
    """
    matches = charset_normalizer.from_bytes(data)
    best = matches.best()
    if best is None:
        return None
    for match in matches:
        tied = match.chaos == best.chaos and match.coherence == best.coherence
        if tied and "cp1252" in match.could_be_from_charset:
            try:
                return data.decode("cp1252")
            except UnicodeDecodeError:
                break
    return str(best)


def replaced_warning(replaced: int) -> list[str]:
    if not replaced:
        return []
    return [
        f"{replaced:,} byte{'s' if replaced != 1 else ''} that could not be decoded "
        f"{'were' if replaced != 1 else 'was'} replaced with “\ufffd”."
    ]


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_text(data: bytes, options: ParseOptions) -> ParsedDocument:
    text = decode_text(data)
    return ParsedDocument.of_text(
        normalise_newlines(text), warnings=replaced_warning(text.replaced)
    )


# -- Markdown: ATX headings ("## Terms") start the block they name --------------------------------

# Linear on any input: each alternative consumes what the next cannot, so a failed match never
# re-scans a line (a lazy title followed by an optional closing run would, quadratically).
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+([^\n]*)$", re.M)
_CLOSING = re.compile(r"[ \t]#+$")
#: Past this many sections, a section shorter than `MIN_SECTION_CHARS` joins the one before it:
#: a file of nothing but headings (one every few bytes) cannot make a block per line, while every
#: heading of an ordinary document still starts its own block.
MAX_SECTIONS = 10_000
MIN_SECTION_CHARS = 64


def heading_title(line: str) -> str:
    """The title of an ATX heading's rest of line: its closing run of #s and spaces dropped."""
    title = line.rstrip(" \t")
    closing = _CLOSING.search(title) if title.endswith("#") else None
    if closing is not None:
        title = title[: closing.start()]
    elif title.strip("#") == "":
        title = ""
    return title.strip(" \t")


def parse_markdown(data: bytes, options: ParseOptions) -> ParsedDocument:
    decoded = decode_text(data)
    text = normalise_newlines(decoded)
    cuts: list[tuple[int, str | None]] = [(0, None)]
    for found in _ATX.finditer(text):
        title = heading_title(found.group(1))
        crowded = len(cuts) >= MAX_SECTIONS and found.start() - cuts[-1][0] < MIN_SECTION_CHARS
        if title and not crowded:
            cuts.append((found.start(), title))
    ends = [start for start, _ in cuts[1:]] + [len(text)]
    blocks = [Block(text[start:end], _at(heading)) for (start, heading), end in zip(cuts, ends)]
    return ParsedDocument(blocks, warnings=replaced_warning(decoded.replaced))


def _at(heading: str | None) -> dict[str, str]:
    return {"heading": heading[:200]} if heading else {}


# -- HTML ----------------------------------------------------------------------------------------

_HTML_SKIP = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas"}
)
_HTML_BLOCKS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "caption",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "title",
        "tr",
        "ul",
    }
)
_HTML_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_HTML_CELLS = frozenset({"td", "th"})
_SPACES = re.compile(r"\s+")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)


class _TextExtractor:
    """Collects the visible text of a page as paragraphs, each under the heading before it;
    never fetches or runs anything. A parser target of libxml2's HTML parser (through lxml),
    which reads any markup in linear time, as browsers' parsers do: the standard library's
    rescans an unclosed tag to the end of the page, quadratically."""

    def __init__(self) -> None:
        self.paragraphs: list[tuple[str, str | None]] = []  # (text, heading it is under)
        self.heading: str | None = None
        self._buffer: list[str] = []
        self._skip_depth = 0
        self._pre_depth = 0
        self._in_heading = False

    def start(self, tag: str, attrib: Any) -> None:
        if tag in _HTML_SKIP:
            self._skip_depth += 1
        elif tag == "br":
            self._buffer.append("\n")
        elif tag in _HTML_BLOCKS:
            self._flush()
            self._pre_depth += tag == "pre"
            self._in_heading = tag in _HTML_HEADINGS

    def end(self, tag: str) -> None:
        if tag in _HTML_SKIP:
            self._skip_depth = max(self._skip_depth - 1, 0)
        elif tag in _HTML_CELLS:
            self._buffer.append(" ")
        elif tag in _HTML_BLOCKS:
            self._flush()
            if tag == "pre":
                self._pre_depth = max(self._pre_depth - 1, 0)

    def data(self, data: str) -> None:
        if self._skip_depth:
            return
        if self._pre_depth:
            self._buffer.append(normalise_newlines(data))
        else:
            self._buffer.append(_SPACES.sub(" ", data))

    def comment(self, text: str) -> None:
        """Comments are not text."""

    def close(self) -> None:
        self._flush()

    def _flush(self) -> None:
        """End the current paragraph: collapse spaces (outside <pre>), drop blank lines."""
        raw, self._buffer = "".join(self._buffer), []
        if self._pre_depth:
            lines = [line.rstrip() for line in raw.split("\n")]
        else:
            lines = [" ".join(line.split()) for line in raw.split("\n")]
        paragraph = "\n".join(line for line in lines if line.strip())
        if paragraph and self._in_heading:
            self.heading = " ".join(paragraph.split())
        if paragraph:
            self.paragraphs.append((paragraph, self.heading))
        self._in_heading = False


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


def html_blocks(markup: str) -> list[Block]:
    """The visible text of an HTML page as blocks, one per heading's section."""
    extractor = _TextExtractor()
    if markup.strip():
        parser = etree.HTMLParser(target=extractor, huge_tree=True, no_network=True)
        parser.feed(markup)
        try:
            parser.close()
        except etree.XMLSyntaxError:  # nothing the parser could call a document: no text
            extractor.close()
    blocks: list[Block] = []
    for paragraph, heading in extractor.paragraphs:
        if blocks and blocks[-1].location == _at(heading):
            blocks[-1].text += "\n\n" + paragraph
        else:
            blocks.append(Block(paragraph, _at(heading)))
    return blocks


def html_to_text(markup: str) -> str:
    """The visible text of an HTML page, blocks separated by blank lines."""
    return "\n\n".join(block.text for block in html_blocks(markup))


def parse_html(data: bytes, options: ParseOptions) -> ParsedDocument:
    decoded = decode_text(data, _declared_charset(data))
    return ParsedDocument(html_blocks(decoded), warnings=replaced_warning(decoded.replaced))
