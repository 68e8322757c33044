"""E-mail (EML): who wrote to whom, when and about what, then the message's text.

A first block holds the From, To, Cc, Date and Subject lines (a person searches mail by its
sender and subject as much as by its words); then the text/plain body, else the text/html body
through the same `html_blocks` as an HTML page. Read with the stdlib `email` package
(``policy.default``: headers decoded from their RFC 2047 words). Attachments are not read; the
result's `warnings` says how many there were. A file without any of the headers every message
has is not mail and fails. Pure: no rq, no redis.
"""

from __future__ import annotations

import email
import email.errors
import email.policy
from email.message import EmailMessage, MIMEPart
from typing import Any

from jobs.core.failures import PermanentError
from jobs.text.parsers.document import Block, ParsedDocument, ParseOptions
from jobs.text.parsers.text import (
    Decoded,
    decode_text,
    html_blocks,
    normalise_newlines,
    replaced_warning,
)

_HEADERS = ("From", "To", "Cc", "Date", "Subject")
_MAIL_HEADERS = ("from", "to", "date", "subject", "message-id")
_MAX_DEPTH = 50
_HEADER_ERRORS = (
    email.errors.MessageError,
    ValueError,
    IndexError,
    TypeError,
    AttributeError,
    LookupError,
)


def _readable(text: str) -> str:
    """Bytes the parser kept as surrogate escapes (raw 8-bit headers), read as UTF-8."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a lone surrogate that no byte stands for
        return text.encode("utf-8", "replace").decode("utf-8")


def _header(message: EmailMessage, name: str) -> str:
    try:
        value = message.get(name)
    except _HEADER_ERRORS:  # a header the parser cannot fold: keep what was written
        value = next((raw for key, raw in message.raw_items() if key.lower() == name.lower()), None)
    return " ".join(_readable(str(value)).split()) if value is not None else ""


def _header_block(message: EmailMessage) -> Block:
    lines = [f"{name}: {value}" for name in _HEADERS if (value := _header(message, name))]
    return Block("\n".join(lines))


def _text_of(part: MIMEPart) -> Decoded:
    """A text part's content in its declared charset when that reads it, else detected (mail
    often declares us-ascii and carries UTF-8)."""
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):  # None: no body (a text part is never multipart)
        payload = b""
    charset = part.get_content_charset()
    if charset:
        try:
            return _exact(payload.decode(charset))
        except (LookupError, UnicodeDecodeError):
            pass
    return decode_text(payload)


def _exact(text: str) -> Decoded:
    decoded = Decoded(text)
    decoded.replaced = 0
    return decoded


def _attachments(part: Any, body: Any, depth: int = 0) -> int:
    """How many parts besides the body and its alternatives are attachments (an inline image,
    a forwarded message and a file all count: none of them is read)."""
    if depth > _MAX_DEPTH:
        return 0
    if part.get_content_maintype() == "multipart":
        return sum(_attachments(inner, body, depth + 1) for inner in part.iter_parts())
    if part is body:
        return 0
    is_text = part.get_content_type() in ("text/plain", "text/html")
    return int(
        not is_text
        or part.get_content_disposition() == "attachment"
        or part.get_filename() is not None
    )


def _attachment_warning(count: int) -> list[str]:
    if not count:
        return []
    return [f"{count} attachment{'s were' if count != 1 else ' was'} not read."]


def parse_eml(data: bytes, options: ParseOptions) -> ParsedDocument:
    """The header lines, then the text (or HTML) body.

    Raises `PermanentError` (``unsupported_type`` for a file that is not mail, ``corrupt``).
    """
    try:
        message = email.message_from_bytes(data, policy=email.policy.default)
        if not any(name in _MAIL_HEADERS for name in map(str.lower, message.keys())):
            raise PermanentError(
                "This file is not an e-mail message: it has none of the From, "
                "To, Date or Subject headers.",
                code="unsupported_type",
            )
        body = message.get_body(preferencelist=("plain", "html"))
        text = _text_of(body) if body is not None else _exact("")
        attachments = _attachments(message, body)
        headers = _header_block(message)
    except PermanentError:
        raise
    except (RecursionError, *_HEADER_ERRORS):
        raise PermanentError(
            "This e-mail message is damaged and cannot be read.", code="corrupt"
        ) from None
    if body is not None and body.get_content_subtype() == "html":
        blocks = html_blocks(text)
    else:
        blocks = [Block(normalise_newlines(text))]
    warnings = replaced_warning(text.replaced) + _attachment_warning(attachments)
    return ParsedDocument([headers] + blocks, warnings=warnings)
