"""What a parse's child process sends its parent (jobs.text.sandbox): progress lines, then one reply
carrying the whole ParsedDocument, in a form whose size the parent can bound before reading it.

Progress: `{"progress":"OCR page 3 of 9"}` lines, each short, before the reply. The reply: one
ASCII JSON header line (outcome, pages, ocr_pages, and the byte counts of what follows), then
the blocks' metadata as UTF-8 JSON (their distinct locations once each; per block its location,
boundary and length in characters; the warnings), then the blocks' texts back to back as UTF-8
with surrogates passed through. A str character never costs more than 4 bytes and the metadata
may take at most a fixed allowance plus 4 bytes per character, so an honest reply for
`max_chars` is at most `reply_limit(max_chars)` bytes: the parent stops reading past it. The
child refuses a too long text, or metadata past its allowance, itself, before sending it.
Pure: no rq, no redis.
"""

from __future__ import annotations

import json
from typing import Any

from jobs.core.failures import PermanentError
from jobs.core.settings import MIB
from jobs.text.parsers.document import Block, ParsedDocument

HEADER_MAX_BYTES = 64 * 1024  # a JSON line: outcome, counts, a message
MESSAGE_MAX_CHARS = 2000  # escaped as ASCII JSON: at most 6 bytes per UTF-16 unit
BYTES_PER_CHAR = 4  # UTF-8 with surrogatepass: 1 to 4 bytes per str character
META_BASE_BYTES = MIB  # room for the metadata of many pages with almost no text
PROGRESS_PREFIX = b'{"progress":'


class Garbled(ValueError):
    """The bytes are not a reply the child could have sent whole: it died or misbehaved."""


def meta_limit(max_chars: int) -> int:
    return META_BASE_BYTES + BYTES_PER_CHAR * max_chars


def reply_limit(max_chars: int) -> int:
    """The most bytes an honest reply for a text of at most `max_chars` characters takes."""
    return HEADER_MAX_BYTES + meta_limit(max_chars) + BYTES_PER_CHAR * max_chars


def too_long(chars: int, max_chars: int) -> PermanentError:
    return PermanentError(
        f"The text of this document is {chars:,} characters long; at most "
        f"{max_chars:,} characters per document are accepted.",
        code="too_large",
    )


def progress_line(detail: str) -> bytes:
    return _line({"progress": detail[:MESSAGE_MAX_CHARS]})


def failure(code: str, message: str) -> bytes:
    return _line({"ok": False, "code": code, "message": message[:MESSAGE_MAX_CHARS]})


def _line(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode("ascii") + b"\n"


def encode(parsed: ParsedDocument, max_chars: int) -> bytes:
    """The reply for `parsed`; PermanentError (too_large) when it is longer than `max_chars`
    or its metadata outgrows its allowance."""
    if parsed.characters > max_chars:
        raise too_long(parsed.characters, max_chars)
    indexes: dict[str, int] = {}
    entries = []
    for block in parsed.blocks:
        key = json.dumps(block.location, sort_keys=True, ensure_ascii=False)
        entries.append(
            [indexes.setdefault(key, len(indexes)), int(block.boundary), len(block.text)]
        )
    meta = json.dumps(
        {
            "locations": [json.loads(key) for key in indexes],
            "blocks": entries,
            "warnings": [str(w)[:MESSAGE_MAX_CHARS] for w in parsed.warnings],
            "pending": [int(page) for page in parsed.ocr_pending],
        },
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8", "surrogatepass")
    if len(meta) > meta_limit(max_chars):
        raise PermanentError(
            f"This document is cut into {len(entries):,} parts (pages, sheets, "
            f"sections), too many for its {parsed.characters:,} characters of "
            "text.",
            code="too_large",
        )
    body = "".join(block.text for block in parsed.blocks).encode("utf-8", "surrogatepass")
    header = _line(
        {
            "ok": True,
            "pages": parsed.pages,
            "ocr_pages": parsed.ocr_pages,
            "meta": len(meta),
            "bytes": len(body),
        }
    )
    return header + meta + body


def take_progress(buffer: bytearray) -> tuple[list[str], bool]:
    """Remove the complete progress lines at the start of `buffer` and return their details,
    and whether the reply itself has begun (then nothing more is taken from the buffer)."""
    details: list[str] = []
    while buffer.startswith(PROGRESS_PREFIX):
        end = buffer.find(b"\n")
        if end < 0:
            return details, False
        try:
            details.append(str(json.loads(buffer[:end])["progress"]))
        except (ValueError, KeyError, TypeError):
            return details, True  # not a line the child wrote whole: decode() will say so
        del buffer[: end + 1]
    started = bool(buffer) and not PROGRESS_PREFIX.startswith(bytes(buffer))
    return details, started


def decode(payload: bytes | bytearray, max_chars: int) -> ParsedDocument:
    """The ParsedDocument of a whole reply; the child's PermanentError for a failure reply;
    Garbled when the payload is not a complete, consistent reply."""
    try:
        newline = payload.find(b"\n")
        header = json.loads(payload[:newline]) if newline >= 0 else None
        if not isinstance(header, dict):
            raise Garbled("no reply header")
        if not header["ok"]:
            raise PermanentError(str(header["message"]), code=str(header["code"]))
        meta_end = newline + 1 + _count(header["meta"])
        if len(payload) != meta_end + _count(header["bytes"]):
            raise Garbled("reply cut short")
        view = memoryview(payload)
        meta = json.loads(str(view[newline + 1 : meta_end], "utf-8", "surrogatepass"))
        text = str(view[meta_end:], "utf-8", "surrogatepass")
        parsed = ParsedDocument(
            _blocks(meta, text),
            pages=_count(header["pages"]),
            ocr_pages=_count(header["ocr_pages"]),
            warnings=[str(w) for w in meta["warnings"]],
            ocr_pending=[_count(page) for page in meta.get("pending", [])],
        )
    except (ValueError, KeyError, TypeError, IndexError) as exc:  # UnicodeDecodeError, JSON too
        raise Garbled(str(exc)) from None
    if parsed.characters > max_chars:
        raise too_long(parsed.characters, max_chars)
    return parsed


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Garbled(f"not a count: {value!r}")
    return value


def _blocks(meta: dict[str, Any], text: str) -> list[Block]:
    locations = meta["locations"]
    if not all(isinstance(location, dict) for location in locations):
        raise Garbled("a location is not an object")
    blocks, start = [], 0
    for index, boundary, chars in meta["blocks"]:
        end = start + _count(chars)
        blocks.append(Block(text[start:end], dict(locations[_count(index)]), bool(boundary)))
        start = end
    if start != len(text):
        raise Garbled("block lengths do not add up to the text")
    return blocks
