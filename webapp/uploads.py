"""Turning a multipart request into accepted uploads and rejections, without parsing anything.

Each file is bounded, must not be empty, and must be a supported type by its content as well as
its extension. A document id defaults to the name as uploaded, with the relative folder a
folder upload or the CLI sends, NFC-normalised; it is cleaned only of what cannot be shown or
stored safely (control characters, `..`, leading slashes).
"""
from __future__ import annotations

import posixpath
import re
import unicodedata
from dataclasses import dataclass, field

from werkzeug.datastructures import FileStorage

from jobs import Settings, Upload, detect_kind, rejection_reason

SNIFF_BYTES = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_STATUS_OF = {"file_too_large": 413, "empty_file": 400, "unsupported_type": 415}


@dataclass
class Accepted:
    uploads: list[Upload] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)

    def refusal_status(self) -> int:
        """The status of a request in which nothing was acceptable: its first file's problem."""
        return _STATUS_OF.get(self.rejected[0]["code"], 400) if self.rejected else 400


def clean_path(raw: str) -> str:
    """A safe relative path from what the client sent: NFC, forward slashes, no `..` or root."""
    text = _CONTROL.sub("", unicodedata.normalize("NFC", raw or "")).replace("\\", "/")
    parts = [p.strip() for p in text.split("/")]
    parts = [p for p in parts if p and p not in (".", "..")]
    return "/".join(parts)[:512]


def accept(files: list[FileStorage], document_ids: list[str], settings: Settings) -> Accepted:
    """Check each file; the bytes of accepted ones are read into memory (bounded per file)."""
    result = Accepted()
    for position, storage in enumerate(files):
        path = clean_path(storage.filename or "") or f"upload-{position + 1}"
        filename = posixpath.basename(path)
        given = document_ids[position] if position < len(document_ids) else ""
        document_id = clean_path(given) or path
        data = storage.stream.read(settings.max_file_bytes + 1)
        kind = _kind_or_problem(filename, data, settings)
        if isinstance(kind, tuple):
            result.rejected.append({"filename": filename, "code": kind[0], "message": kind[1]})
            continue
        result.uploads.append(Upload(filename=filename, document_id=document_id, data=data,
                                     kind=kind))
    return result


def _kind_or_problem(filename: str, data: bytes, settings: Settings) -> str | tuple[str, str]:
    """The document kind of an acceptable file, or (code, message) of why it is refused."""
    if len(data) > settings.max_file_bytes:
        limit = settings.max_file_bytes / (1024 * 1024)
        return "file_too_large", f"“{filename}” is larger than the {limit:g} MiB limit per file."
    if not data:
        return "empty_file", f"“{filename}” is empty."
    head = data[:SNIFF_BYTES]
    return detect_kind(filename, head) or rejection_reason(filename, head)
