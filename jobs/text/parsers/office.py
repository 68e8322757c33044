"""What every zip-packaged document (DOCX, PPTX, XLSX, EPUB) goes through before a library
opens it.

A zip's central directory declares how many members it has and how large each expands; those
figures are checked first, so a zip bomb (a member declared huge, or thousands of members) is
refused without being inflated. `zipfile` never inflates a member past its declared size (it
fails the CRC check instead), so the declared total bounds what python-docx, python-pptx,
openpyxl or EbookLib can inflate. A password-protected Office file is not a zip at all: Office
wraps the encrypted package in an OLE compound file, which is recognised by its magic and
refused as "encrypted" with a message that names the kind of document.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from xml.etree.ElementTree import ParseError

from lxml import etree

from jobs.core.failures import PermanentError
from jobs.core.settings import MIB

#: A document whose parts expand to more than this is refused before it is opened.
ZIP_MAX_UNCOMPRESSED_BYTES = 256 * MIB
#: Past `ZIP_EXPANSION_FREE_BYTES`, parts may expand to at most this many times the file's size.
#: Office XML deflates about 5 to 30 times and images hardly at all, while a bomb of repeated
#: XML reaches hundreds: refused from its directory, before a library builds a tree of it that
#: would take many times its size in memory.
ZIP_MAX_EXPANSION = 200
ZIP_EXPANSION_FREE_BYTES = 32 * MIB
ZIP_MAX_ENTRIES = 5000

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
#: The stream an encrypted OOXML package is stored in, as its OLE directory spells it (UTF-16).
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")
_ZIP_ENCRYPTED = 0x1  # general-purpose flag bit 0: the member is encrypted
_LEGACY_EXTENSIONS = {"Word document": ".doc", "presentation": ".ppt", "workbook": ".xls"}

#: What the zip and XML layers under every package library raise on damaged bytes (the stdlib's
#: expat, which openpyxl streams sheets with, also refuses an entity-expansion bomb this way).
PACKAGE_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    etree.LxmlError,
    KeyError,
    ValueError,
    TypeError,
    AttributeError,
    IndexError,
    EOFError,
    NotImplementedError,
    OSError,
    zlib.error,
    struct.error,
    RecursionError,
    AssertionError,
    RuntimeError,
    ParseError,
)


def corrupt(noun: str) -> PermanentError:
    """The error for a `noun` ("workbook") whose bytes cannot be read."""
    return PermanentError(
        f"This {noun} is damaged or truncated and cannot be read.", code="corrupt"
    )


def refuse_ole(data: bytes, noun: str) -> None:
    """Refuse an Office file stored as an OLE compound file instead of a zip.

    Such a file is either password-protected (OOXML inside an ``EncryptedPackage`` stream) or
    of the Office 97–2003 format renamed; each gets the message that says what to do.
    """
    if not data.startswith(OLE_MAGIC):
        return
    if _ENCRYPTED_PACKAGE in data or noun not in _LEGACY_EXTENSIONS:
        raise PermanentError(
            f"This {noun} is password-protected; upload an unprotected copy.", code="encrypted"
        )
    old = _LEGACY_EXTENSIONS[noun]
    raise PermanentError(
        f"This {noun} is in the old Office 97–2003 format ({old}); save it in the current "
        f"format ({old}x) and upload it again.",
        code="unsupported_type",
    )


def check_zip_bounds(data: bytes, noun: str, limit: int | None = None) -> None:
    """Refuse a zip-packaged `noun` that is not a zip, has more than `ZIP_MAX_ENTRIES`
    members, or whose members would expand past `limit` bytes (`ZIP_MAX_UNCOMPRESSED_BYTES`
    unless given) or out of proportion to the file (`ZIP_MAX_EXPANSION`), before anything
    inflates it."""
    limit = ZIP_MAX_UNCOMPRESSED_BYTES if limit is None else limit
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        EOFError,
        ValueError,
        OSError,
        struct.error,
        NotImplementedError,
    ):
        raise corrupt(noun) from None
    if any(member.flag_bits & _ZIP_ENCRYPTED for member in members):
        raise PermanentError(
            f"This {noun} is password-protected; upload an unprotected copy.", code="encrypted"
        )
    if len(members) > ZIP_MAX_ENTRIES:
        raise PermanentError(
            f"This {noun} has {len(members):,} parts, more than the "
            f"{ZIP_MAX_ENTRIES:,} Intake accepts.",
            code="too_large",
        )
    total = sum(member.file_size for member in members)
    if total > limit:
        raise PermanentError(
            f"This {noun} expands to {total // MIB:,} MiB, more than the "
            f"{limit // MIB} MiB Intake accepts.",
            code="too_large",
        )
    if total > max(ZIP_EXPANSION_FREE_BYTES, ZIP_MAX_EXPANSION * len(data)):
        raise PermanentError(
            f"This {noun} expands to {total // MIB:,} MiB from {len(data) / MIB:.1f} MiB, more "
            f"than {ZIP_MAX_EXPANSION} times its size: Intake does not open such a package.",
            code="too_large",
        )


def open_package(data: bytes, noun: str) -> None:
    """The checks every Office package passes before its library opens it."""
    refuse_ole(data, noun)
    check_zip_bounds(data, noun)
