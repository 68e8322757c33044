"""Excel (XLSX): every non-empty sheet as one block of ``header: value`` rows, located by the
sheet's name.

Values, never formulas: the workbook is opened with ``data_only=True``, so a cell holds the
value Excel last computed; a formula that was never computed (no cached value) contributes
nothing rather than its source. A sheet is a part of its own (`boundary`): no chunk runs from
one sheet into the next. Read with openpyxl in read-only (streaming) mode, after the package
bounds of `jobs.parsers.office`; each sheet's stored dimensions are ignored (some writers get
them wrong, and openpyxl would then stop early), so every stored row is read.
"""
from __future__ import annotations

import datetime
import io
import warnings
from typing import Any, Iterator

import openpyxl
from openpyxl.utils.exceptions import InvalidFileException

from jobs.parsers.document import Block, ParsedDocument, ParseOptions
from jobs.parsers.office import PACKAGE_ERRORS, corrupt, open_package
from jobs.parsers.tabular import rows_as_pairs

NOUN = "workbook"
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


def _rows(sheet: Any) -> Iterator[list[str]]:
    for row in sheet.iter_rows(values_only=True):
        yield [cell_text(value) for value in row]


def _sheet_blocks(workbook: Any) -> list[Block]:
    blocks = []
    for sheet in workbook.worksheets:
        if hasattr(sheet, "reset_dimensions"):
            sheet.reset_dimensions()
        blocks.append(Block(rows_as_pairs(_rows(sheet)), {"sheet": sheet.title}, boundary=True))
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
                blocks = _sheet_blocks(workbook)
            finally:
                workbook.close()
    except _ERRORS:
        raise corrupt(NOUN) from None
    return ParsedDocument(blocks)
