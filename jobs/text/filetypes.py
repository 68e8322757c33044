"""Decide what kind of document an upload is, from its name and its first bytes together.

An extension alone is a claim made by whoever named the file; the content's first bytes are
evidence. The upload endpoint accepts a file only when both agree, so an executable renamed
``.pdf`` or a PDF renamed ``.txt`` is refused at once, with a message a person can act on,
instead of failing later inside a parser. This module is pure: no rq, no redis, no flask.
"""

from __future__ import annotations

import codecs

SUPPORTED_KINDS: tuple[str, ...] = (
    "txt",
    "md",
    "html",
    "pdf",
    "docx",
    "pptx",
    "xlsx",
    "csv",
    "tsv",
    "epub",
    "eml",
    "png",
    "jpeg",
    "tiff",
    "webp",
)

#: How many bytes of the content the caller passes at least (all of it when the file is shorter).
HEAD_BYTES = 4096

_EXTENSIONS: dict[str, str] = {
    "txt": "txt",
    "text": "txt",
    "md": "md",
    "markdown": "md",
    "html": "html",
    "htm": "html",
    "pdf": "pdf",
    "docx": "docx",
    "pptx": "pptx",
    "xlsx": "xlsx",
    "csv": "csv",
    "tsv": "tsv",
    "epub": "epub",
    "eml": "eml",
    "png": "png",
    "jpg": "jpeg",
    "jpeg": "jpeg",
    "tif": "tiff",
    "tiff": "tiff",
    "webp": "webp",
}
#: Every extension a supported kind goes by, dot first: what a file picker offers (the content
#: is checked all the same, `detect_kind`).
EXTENSIONS: tuple[str, ...] = tuple(f".{extension}" for extension in _EXTENSIONS)

_KIND_NAMES: dict[str, str] = {
    "txt": "a text file",
    "md": "a Markdown file",
    "html": "an HTML page",
    "pdf": "a PDF",
    "docx": "a Word document",
    "pptx": "a PowerPoint presentation",
    "xlsx": "an Excel workbook",
    "csv": "a CSV file",
    "tsv": "a tab-separated (TSV) file",
    "epub": "an EPUB e-book",
    "eml": "an e-mail message (EML)",
    "png": "a PNG image",
    "jpeg": "a JPEG image",
    "tiff": "a TIFF image",
    "webp": "a WebP image",
}

#: The media type of each kind, as a download or a listing states it.
_MEDIA_TYPES: dict[str, str] = {
    "txt": "text/plain",
    "md": "text/markdown",
    "html": "text/html",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
    "epub": "application/epub+zip",
    "eml": "message/rfc822",
    "png": "image/png",
    "jpeg": "image/jpeg",
    "tiff": "image/tiff",
    "webp": "image/webp",
}
UNKNOWN_MEDIA_TYPE = "application/octet-stream"

#: A password-protected DOCX, PPTX or XLSX is an OLE compound file, not a zip: it is accepted
#: here so that the parser can say "password-protected" instead of "not a Word document".
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

#: Signatures of binary formats that a text document can never start with.
_BINARY_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"PK\x05\x06", "a ZIP archive"),
    (b"\x7fELF", "an executable program"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (_OLE_MAGIC, "an old-format or password-protected Office file"),
)

#: Text with these byte-order marks legitimately contains NUL bytes.
_WIDE_BOMS: tuple[bytes, ...] = (
    codecs.BOM_UTF32_LE,
    codecs.BOM_UTF32_BE,
    codecs.BOM_UTF16_LE,
    codecs.BOM_UTF16_BE,
)

_PDF_WHITESPACE = b" \t\r\n\f\x00"
_PDF_HEADER_WINDOW = 1024
_ZIP_MAGIC = b"PK\x03\x04"
_OFFICE_KINDS = frozenset({"docx", "pptx", "xlsx"})
_TEXT_KINDS = frozenset({"txt", "md", "html", "csv", "tsv", "eml"})
_IMAGE_MAGIC: dict[str, tuple[bytes, ...]] = {
    "png": (b"\x89PNG\r\n\x1a\n",),
    "jpeg": (b"\xff\xd8\xff",),
    "tiff": (b"II*\x00", b"MM\x00*"),
}


def extension_kind(filename: str) -> str | None:
    """The kind a file's extension claims, or None; folders in the name are ignored."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    stem, dot, extension = base.rpartition(".")
    if not dot or not stem:
        return None
    return _EXTENSIONS.get(extension.lower())


def _is_pdf(head: bytes) -> bool:
    """PDF content: ``%PDF-`` after at most 1024 bytes of whitespace."""
    start = len(head) - len(head.lstrip(_PDF_WHITESPACE))
    return start <= _PDF_HEADER_WINDOW and head.startswith(b"%PDF-", start)


def _is_webp(head: bytes) -> bool:
    """WebP content: a RIFF container (``RIFF``, a 4-byte size) whose form type is ``WEBP``."""
    return head.startswith(b"RIFF") and head[8:12] == b"WEBP"


def _binary_signature(head: bytes) -> str | None:
    """What binary format `head` starts with, as words ("a PNG image"), or None."""
    for magic, description in _BINARY_MAGIC:
        if head.startswith(magic):
            return description
    if _is_webp(head):
        return "a WebP image"
    if _is_pdf(head):
        return "a PDF"
    # "MZ" alone could begin a sentence; a DOS/Windows header has NUL bytes right after it.
    if head.startswith(b"MZ") and b"\x00" in head[:64]:
        return "an executable program"
    return None


def _looks_like_text(head: bytes) -> bool:
    """No binary signature, and no NUL byte unless a UTF-16/32 byte-order mark explains it."""
    if _binary_signature(head) is not None:
        return False
    return b"\x00" not in head or head.startswith(_WIDE_BOMS)


def _content_matches(kind: str, head: bytes) -> bool:
    if kind == "pdf":
        return _is_pdf(head)
    if kind in _OFFICE_KINDS:
        return head.startswith((_ZIP_MAGIC, _OLE_MAGIC))
    if kind == "epub":
        return head.startswith(_ZIP_MAGIC)
    if kind in _IMAGE_MAGIC:
        return head.startswith(_IMAGE_MAGIC[kind])
    if kind == "webp":
        return _is_webp(head)
    return _looks_like_text(head)


def detect_kind(filename: str, head: bytes) -> str | None:
    """The document kind of an upload, when its extension and its content agree; else None.

    `head` is at least the first 4096 bytes of the content, or all of it for a shorter file.
    """
    kind = extension_kind(filename)
    if kind is None or not _content_matches(kind, head):
        return None
    return kind


def media_type(kind: str | None) -> str:
    """The media type of a kind `detect_kind` gave; application/octet-stream for anything else
    (a record of a release that did not keep the kind)."""
    return _MEDIA_TYPES.get(kind or "", UNKNOWN_MEDIA_TYPE)


def rejection_reason(filename: str, head: bytes) -> tuple[str, str]:
    """``(code, message)`` explaining why `detect_kind` refused a file, for a person to read.

    The filename is kept as given; whoever renders the message escapes it.
    """
    supported = ", ".join(SUPPORTED_KINDS)
    kind = extension_kind(filename)
    if kind is None:
        return ("unsupported_type", f"“{filename}” is not a supported document type ({supported}).")
    if kind not in _TEXT_KINDS:
        return (
            "unsupported_type",
            f"“{filename}” does not contain {_KIND_NAMES[kind]} "
            f"(its content does not match its extension).",
        )
    found = _binary_signature(head)
    detail = f"its content is {found}" if found else "its content is binary, not text"
    return (
        "unsupported_type",
        f"“{filename}” is not {_KIND_NAMES[kind]} ({detail}, which does not match its extension).",
    )
