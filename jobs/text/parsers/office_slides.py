"""PowerPoint (PPTX): one block per slide, in the presentation's order, located by its number.

A slide is a unit a person remembers ("it was on slide 3"), so each slide's block starts a new
part (`boundary`) and no chunk runs from one slide into the next. A block holds the text of
every shape in the slide's order (text frames, shapes inside groups, tables as rows of
tab-separated cells, charts as their series), then the speaker's notes as "Notes: …". Read
with python-pptx, the field-standard library, after the package bounds of
`jobs.text.parsers.office`.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any

import pptx
from pptx.exc import PythonPptxError
from pptx.shapes.group import GroupShape

from jobs.core.failures import PermanentError
from jobs.text.parsers.document import Block, ParsedDocument, ParseOptions
from jobs.text.parsers.office import PACKAGE_ERRORS, corrupt, open_package
from jobs.text.parsers.office_sheets import cell_text
from jobs.text.parsers.text import normalise_newlines

NOUN = "presentation"
_ERRORS = PACKAGE_ERRORS + (PythonPptxError,)


def _table_text(table: Any) -> str:
    """A table as lines of tab-separated cells; a merged-over cell is left out."""
    rows = []
    for row in table.rows:
        cells = [cell.text.strip() for cell in row.cells if not cell.is_spanned]
        if any(cells):
            rows.append("\t".join(cells))
    return "\n".join(rows)


def _shape_texts(shapes: Iterable[Any]) -> Iterator[str]:
    """The text of each shape in order, a group's shapes where the group stands."""
    for shape in shapes:
        if isinstance(shape, GroupShape):
            yield from _shape_texts(shape.shapes)
        elif shape.has_text_frame:
            yield shape.text_frame.text
        elif shape.has_table:
            yield _table_text(shape.table)
        elif shape.has_chart:
            yield _chart_text(shape.chart)


def _chart_text(chart: Any) -> str:
    """A chart's title, then each series as "name: category value; …"; a chart python-pptx
    cannot read is left out rather than failing its presentation."""
    try:
        lines = [chart.chart_title.text_frame.text] if chart.has_title else []
        categories = (
            [cell_text(label) for label in chart.plots[0].categories] if len(chart.plots) else []
        )
        for series in chart.series:
            values = [cell_text(value) for value in series.values]
            labels = categories if len(categories) == len(values) else [""] * len(values)
            pairs = [f"{label} {value}".strip() for label, value in zip(labels, values) if value]
            lines.append(f"{series.name}: {'; '.join(pairs)}")
    except _ERRORS:
        return ""
    return "\n".join(line for line in lines if line.strip())


def _notes(slide: Any) -> str:
    if not slide.has_notes_slide:
        return ""
    frame = slide.notes_slide.notes_text_frame
    text = frame.text.strip() if frame is not None else ""
    return f"Notes: {text}" if text else ""


def _slide_text(slide: Any) -> str:
    parts = [text.strip() for text in _shape_texts(slide.shapes)] + [_notes(slide)]
    # python-pptx writes a line break inside a paragraph (a:br) as a vertical tab.
    return normalise_newlines("\n\n".join(part for part in parts if part)).replace("\v", "\n")


def parse_pptx(data: bytes, options: ParseOptions) -> ParsedDocument:
    """Each slide's shapes and notes, as one block per slide ({"slide": n}, a boundary).

    Raises `PermanentError` (``encrypted``, ``corrupt``, ``too_large``, ``unsupported_type``).
    """
    open_package(data, NOUN)
    try:
        slides = pptx.Presentation(io.BytesIO(data)).slides
        blocks = [
            Block(_slide_text(slide), {"slide": number}, boundary=True)
            for number, slide in enumerate(slides, start=1)
        ]
    except PermanentError:
        raise
    except _ERRORS:
        raise corrupt(NOUN) from None
    return ParsedDocument(blocks, pages=max(len(blocks), 1))
