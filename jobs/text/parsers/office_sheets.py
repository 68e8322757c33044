"""Excel (XLSX): every non-empty sheet as one block of ``header: value`` rows, located by the
sheet's name.

Values, never formulas: the workbook is opened with ``data_only=True``, so a cell holds the
value Excel last computed; a formula that was never computed (no cached value) contributes
nothing rather than its source. A sheet is a part of its own (`boundary`): no chunk runs from
one sheet into the next. Read with openpyxl in read-only (streaming) mode, after the package
bounds of `jobs.text.parsers.office`; each sheet's stored dimensions are ignored (some writers get
them wrong, and openpyxl would then stop early), so every stored row is read.
"""

from __future__ import annotations

import datetime
import io
import warnings
from collections.abc import Iterator
from typing import Any

import openpyxl
from openpyxl.utils.exceptions import InvalidFileException

from jobs.core.failures import PermanentError
from jobs.text.parsers.document import (
    Block,
    ParsedDocument,
    ParseOptions,
    out_of_proportion,
    text_allowance,
)
from jobs.text.parsers.office import PACKAGE_ERRORS, corrupt, open_package
from jobs.text.parsers.tabular import rows_as_pairs

NOUN = "workbook"
#: Cells read per workbook at most, empty ones included: a sheet of a million rows of twenty
#: columns is read whole, while a row padded out to column XFD stops the read at once.
MAX_CELLS = 20_000_000
_ERRORS = PACKAGE_ERRORS + (InvalidFileException,)


def cell_text(value: Any) -> str:
    """A cell's value as a person reads it in Excel: 1200 not 1200.0, TRUE, 2024-03-31."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".15g")
    if isinstance(value, datetime.datetime) and value.time() == datetime.time():
        return value.date().isoformat()
    return str(value)


class _Tally:
    """Cells and characters read so far, across sheets, refused the moment either passes its
    bound: a row is as wide as its last cell (one value in column XFD makes 16,384 cells), and
    a shared string is stored once however many cells repeat it, so a small file can stand
    for billions of cells or characters that must never be read to the end."""

    def __init__(self, file_bytes: int) -> None:
        self.file_bytes, self.cells, self.chars = file_bytes, 0, 0
        self.max_chars = text_allowance(file_bytes)

    def row(self, texts: list[str]) -> None:
        self.cells += max(len(texts), 1)
        self.chars += sum(map(len, texts))
        if self.cells > MAX_CELLS:
            raise PermanentError(
                f"This {NOUN} has more than {MAX_CELLS:,} cells (counting the empty ones up to "
                "each row's last value), more than Intake reads.",
                code="too_large",
            )
        if self.chars > self.max_chars:
            raise out_of_proportion(self.file_bytes, self.chars)


def _rows(sheet: Any, tally: _Tally) -> Iterator[list[str]]:
    for row in sheet.iter_rows(values_only=True):
        texts = [cell_text(value) for value in row]
        tally.row(texts)
        yield texts


def _sheet_blocks(workbook: Any, tally: _Tally) -> list[Block]:
    blocks = []
    for sheet in workbook.worksheets:
        if hasattr(sheet, "reset_dimensions"):
            sheet.reset_dimensions()
        blocks.append(
            Block(rows_as_pairs(_rows(sheet, tally)), {"sheet": sheet.title}, boundary=True)
        )
    return blocks


def parse_xlsx(data: bytes, options: ParseOptions) -> ParsedDocument:
    """Each sheet's rows as ``header: value`` lines, one block per sheet ({"sheet": name}).

    Raises `PermanentError` (``encrypted``, ``corrupt``, ``too_large``, ``unsupported_type``).
    """
    open_package(data, NOUN)
    try:
        with warnings.catch_warnings():  # "extension is not supported": noise in a worker's log
            warnings.simplefilter("ignore")
            workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
            try:
                blocks = _sheet_blocks(workbook, _Tally(len(data)))
            finally:
                workbook.close()
    except _ERRORS:
        raise corrupt(NOUN) from None
    return ParsedDocument(blocks)
