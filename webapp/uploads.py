"""Turning a multipart request into accepted uploads and rejections, without parsing anything.

Each file is bounded, must not be empty, and must be a supported type by its content as well as
its extension. A document id defaults to the name as uploaded, with the relative folder a
folder upload or the CLI sends, NFC-normalised; it is cleaned only of what cannot be shown or
stored safely (control characters, bidi controls, `..`, leading slashes), and a name past its
length is cut before its extension, which still says its type.

Why files are read in pieces: a request may carry 1 GiB. Werkzeug spools each file part to a
temporary file once it passes a small size (`UploadRequest`, at most SPOOL_BUDGET_BYTES of a
request in memory), and each file is then read through once for its size, digest and first
bytes; only small files are held, larger ones are streamed to the store of originals after.
"""

from __future__ import annotations

import posixpath
import re
import tempfile
import unicodedata
from dataclasses import dataclass, field
from typing import IO, BinaryIO, cast

from flask import Request
from werkzeug.datastructures import FileStorage

from jobs import MIB, Settings, Upload, detect_kind, measure_upload, rejection_reason

SNIFF_BYTES = 4096
SPOOL_FILE_BYTES = 64 * 1024  # a file part larger than this goes to a temporary file
SPOOL_BUDGET_BYTES = 4 * MIB  # what one request's file parts may hold in memory
#: Longest document id (and uploaded path) kept, in characters.
MAX_PATH_CHARS = 512
#: Longest tail after a name's last dot that a cut keeps as its extension ("markdown" fits).
MAX_EXTENSION_CHARS = 16
# Control characters (C0, DEL, C1) and Unicode's Bidi_Control characters (marks, embeddings,
# overrides, isolates): a name holding U+202E shows "report\u202etxt.html" as "reportlmth.txt".
_UNSHOWN = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_STATUS_OF = {"file_too_large": 413, "empty_file": 400, "unsupported_type": 415}


class UploadRequest(Request):
    """Flask's request, spooling file parts to disk early so a request's memory is bounded.

    Werkzeug's default keeps up to 500 KB of every file part in memory: 500 small files would
    hold 250 MB. Here the first parts of a request may hold SPOOL_FILE_BYTES each until the
    request's SPOOL_BUDGET_BYTES are spent; every later part goes straight to a temporary file.
    """

    def _get_file_stream(
        self,
        total_content_length: int | None,
        content_type: str | None,
        filename: str | None = None,
        content_length: int | None = None,
    ) -> IO[bytes]:
        spent = getattr(self, "_spool_spent", 0)
        if spent + SPOOL_FILE_BYTES > SPOOL_BUDGET_BYTES:
            return tempfile.TemporaryFile("rb+")
        self._spool_spent = spent + SPOOL_FILE_BYTES
        return tempfile.SpooledTemporaryFile(max_size=SPOOL_FILE_BYTES, mode="rb+")


@dataclass
class Accepted:
    uploads: list[Upload] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)

    def refusal_status(self) -> int:
        """The status of a request in which nothing was acceptable: its first file's problem."""
        return _STATUS_OF.get(self.rejected[0]["code"], 400) if self.rejected else 400


def clean_path(raw: str) -> str:
    """A safe relative path from what the client sent: NFC, forward slashes, no `..` or root,
    no control or bidi characters, at most MAX_PATH_CHARS characters with its extension."""
    text = unicodedata.normalize("NFC", _UNSHOWN.sub("", raw or "")).replace("\\", "/")
    parts = [p.strip() for p in text.split("/")]
    parts = [p for p in parts if p and p not in (".", "..")]
    return _shortened("/".join(parts))


def _shortened(path: str) -> str:
    """`path` cut to MAX_PATH_CHARS, its extension kept: the type a file's extension claims is
    checked against its content, and a long `.txt` name cut in its extension was refused (415).
    """
    if len(path) <= MAX_PATH_CHARS:
        return path
    stem, extension = posixpath.splitext(path)
    if len(extension) > MAX_EXTENSION_CHARS:
        stem, extension = path, ""
    return stem[: MAX_PATH_CHARS - len(extension)].rstrip("/ ") + extension


def accept(files: list[FileStorage], document_ids: list[str], settings: Settings) -> Accepted:
    """Check each file, reading it through once; accepted ones keep their stream (the request's
    temporary file), to be stored from it."""
    result = Accepted()
    for position, storage in enumerate(files):
        path = clean_path(storage.filename or "") or f"upload-{position + 1}"
        filename = posixpath.basename(path)
        given = document_ids[position] if position < len(document_ids) else ""
        document_id = clean_path(given) or path
        # werkzeug types the stream IO[bytes]; it is the request's temporary file or a BytesIO.
        stream = cast(BinaryIO, storage.stream)
        measured = measure_upload(stream, settings.max_file_bytes, SNIFF_BYTES)
        kind = detect_kind(filename, measured.head)
        problem = _problem(filename, measured.size, measured.head, kind, settings)
        if problem is not None:
            result.rejected.append(
                {"filename": filename, "code": problem[0], "message": problem[1]}
            )
            continue
        assert kind is not None  # _problem refuses what detect_kind did not recognise
        result.uploads.append(
            Upload(
                filename=filename,
                document_id=document_id,
                kind=kind,
                size=measured.size,
                sha256=measured.sha256,
                data=measured.data,
                source=stream,
            )
        )
    return result


def _problem(
    filename: str, size: int, head: bytes, kind: str | None, settings: Settings
) -> tuple[str, str] | None:
    """(code, message) of why a file is refused, or None when it is acceptable; `kind` is what
    detect_kind made of it (None: an unsupported type, said only after size and emptiness)."""
    if size > settings.max_file_bytes:
        limit = settings.max_file_bytes / MIB
        return "file_too_large", f"“{filename}” is larger than the {limit:g} MiB limit per file."
    if not size:
        return "empty_file", f"“{filename}” is empty."
    if kind is None:
        return rejection_reason(filename, head)
    return None
