"""CSV and TSV: each row as ``header: value`` pairs, the way XLSX sheets are read too.

Why pairs: a bare row "North,1200,1350" is found by a search for "North" but says nothing about
what 1200 is; "Region: North; Q1: 1200; Q2: 1350" keeps each value next to its column's name,
in the chunk and in the search result. The header row is the first non-empty row; a cell
without a header is named by its column letter (A, B … AA), as a spreadsheet would. Decoded
whatever the encoding (`decode_text`), split by the stdlib `csv` module; a CSV's delimiter
(comma, semicolon, tab or bar) is found by `csv.Sniffer`. Pure: no rq, no redis.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

from jobs.core.failures import PermanentError
from jobs.text.parsers.document import Block, ParsedDocument, ParseOptions
from jobs.text.parsers.text import decode_text, replaced_warning

_SNIFF_CHARS = 4096
_CSV_DELIMITERS = ",;\t|"


def column_letter(index: int) -> str:
    """The spreadsheet name of the 0-based column `index`: A … Z, AA, AB …"""
    letters = ""
    index += 1
    while index:
        index, remainder = divmod(index - 1, 26)
        letters = chr(ord("A") + remainder) + letters
    return letters


def _clean(value: str) -> str:
    return " ".join(value.split())


def rows_as_pairs(rows: Iterable[Sequence[str]]) -> str:
    """Rows of cell texts as lines of ``header: value`` pairs joined by "; ", empty cells left
    out; the first non-empty row is the header. A table that is only a header row is kept as
    its values, so its words stay searchable."""
    header: list[str] | None = None
    lines: list[str] = []
    for row in rows:
        cells = [_clean(cell) for cell in row]
        if not any(cells):
            continue
        if header is None:
            header = cells
            continue
        pairs = [
            f"{header[i] if i < len(header) and header[i] else column_letter(i)}: {value}"
            for i, value in enumerate(cells)
            if value
        ]
        lines.append("; ".join(pairs))
    if header is not None and not lines:
        lines.append("; ".join(cell for cell in header if cell))
    return "\n".join(lines)


def _delimiter(text: str) -> str:
    try:
        return csv.Sniffer().sniff(text[:_SNIFF_CHARS], _CSV_DELIMITERS).delimiter
    except csv.Error:
        return ","


def _rows(text: str, delimiter: str) -> str:
    """The rows of `text` as pairs; a field that swallows the rest of the file (a stray quote)
    makes the rows be read again with quotes taken literally."""
    for quoting in (csv.QUOTE_MINIMAL, csv.QUOTE_NONE):
        try:
            reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting)
            return rows_as_pairs(reader)
        except csv.Error:
            continue
    raise PermanentError(
        "This table file has a field too long to read as CSV; check its quotes and delimiters.",
        code="corrupt",
    )


def _parse(data: bytes, delimiter: str | None) -> ParsedDocument:
    decoded = decode_text(data)
    text = str(decoded).replace("\x00", "")
    rows = _rows(text, delimiter or _delimiter(text))
    return ParsedDocument([Block(rows)], warnings=replaced_warning(decoded.replaced))


def parse_csv(data: bytes, options: ParseOptions) -> ParsedDocument:
    """A CSV file's rows as ``header: value`` lines, in one block.

    Raises `PermanentError` (``undecodable``, ``corrupt``)."""
    return _parse(data, None)


def parse_tsv(data: bytes, options: ParseOptions) -> ParsedDocument:
    """A tab-separated file's rows as ``header: value`` lines, in one block.

    Raises `PermanentError` (``undecodable``, ``corrupt``)."""
    return _parse(data, "\t")
