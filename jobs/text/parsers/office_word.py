"""Word (DOCX): the body's paragraphs and tables in order, each under its nearest heading, and
the text Word keeps outside the body: every section's headers and footers (first-page and
even-page ones too), footnotes and endnotes.

Why not `Document.iter_inner_content()` alone: it skips content controls (``w:sdt``, where Word
puts cover pages, tables of contents and many page-number footers) and text boxes, and
python-docx has no footnotes API. So the body, each header and footer, and each note are walked
here: paragraphs, tables and content controls in order, each paragraph's text boxes after it.
Footnotes and endnotes are found through the document's relationships (whatever their part
names) and parsed with python-docx's own XML parser, which resolves no entities.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import docx
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.exceptions import OpcError
from docx.oxml import parse_xml
from docx.oxml.exceptions import InvalidXmlError
from docx.oxml.ns import qn
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml import etree

from jobs.core.failures import PermanentError
from jobs.text.parsers.document import Block, ParsedDocument, ParseOptions
from jobs.text.parsers.office import PACKAGE_ERRORS, corrupt, open_package
from jobs.text.parsers.text import normalise_newlines

NOUN = "Word document"
_ERRORS = PACKAGE_ERRORS + (OpcError, InvalidXmlError)
_P, _TBL, _SDT, _SDT_CONTENT = qn("w:p"), qn("w:tbl"), qn("w:sdt"), qn("w:sdtContent")
_NS = {
    "w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "mc": "http://schemas.openxmlformats.org/markup-compatibility/2006",
}
# A text box is written twice (DrawingML and a VML fallback): the fallback is skipped.
_TEXT_BOX_PARAGRAPHS = etree.XPath(
    ".//w:txbxContent[not(ancestor::mc:Fallback)]/w:p", namespaces=_NS
)
_HEADER_FOOTERS = (
    "header",
    "first_page_header",
    "even_page_header",
    "footer",
    "first_page_footer",
    "even_page_footer",
)


def _table_text(table: Table) -> str:
    """A table as lines of tab-separated cells; a merged cell is written once per row
    (python-docx gives a cell spanning columns once per column, as the same object)."""
    rows = []
    for row in table.rows:
        cells, previous = [], None
        for cell in row.cells:
            if cell is not previous:
                cells.append(cell.text.strip())
            previous = cell
        if any(cells):
            rows.append("\t".join(cells))
    return "\n".join(rows)


def _items(container: Any, parent: Any) -> Iterator[Paragraph | Table]:
    """The paragraphs and tables of a body, header, footer, note or content control, in order;
    a paragraph's text boxes follow it."""
    for child in container.iterchildren():
        if child.tag == _P:
            yield Paragraph(child, parent)
            for inner in _TEXT_BOX_PARAGRAPHS(child):
                yield Paragraph(inner, parent)
        elif child.tag == _TBL:
            yield Table(child, parent)
        elif child.tag == _SDT:
            for content in child.iterchildren(_SDT_CONTENT):
                yield from _items(content, parent)


def _heading(paragraph: Paragraph) -> str | None:
    """The paragraph's text when its style is a heading ("Heading 2") or the title."""
    style = paragraph.style
    name = (style.name or "") if style is not None else ""
    if name != "Title" and not (name.startswith("Heading ") and name[8:].isdigit()):
        return None
    return " ".join(paragraph.text.split())[:200] or None


def _body_blocks(document: Any) -> list[Block]:
    """One block per heading's section: its paragraphs and tables, located by that heading."""
    blocks: list[Block] = []
    heading: str | None = None
    for item in _items(document.element.body, document):
        if isinstance(item, Table):
            text = _table_text(item)
        else:
            heading = _heading(item) or heading
            text = item.text
        if not text.strip():
            continue
        location = {"heading": heading} if heading else {}
        if blocks and blocks[-1].location == location:
            blocks[-1].text += "\n\n" + text
        else:
            blocks.append(Block(text, location))
    return blocks


def _story_text(container: Any, parent: Any) -> str:
    texts = (
        item.text if isinstance(item, Paragraph) else _table_text(item)
        for item in _items(container, parent)
    )
    return "\n\n".join(text for text in texts if text.strip())


def _header_footer_texts(document: Any, kinds: tuple[str, ...]) -> list[str]:
    """Each distinct header or footer of every section once (a linked one is its predecessor's)."""
    texts, seen = [], set()
    for section in document.sections:
        for kind in kinds:
            part_of = getattr(section, kind)
            if part_of.is_linked_to_previous or part_of.part.partname in seen:
                continue
            seen.add(part_of.part.partname)
            texts.append(_story_text(part_of.part.element, part_of))
    return texts


def _note_texts(document: Any, reltype: str, tag: str) -> list[str]:
    """The text of each footnote or endnote; the separator "notes" Word adds are skipped."""
    texts = []
    for rel in document.part.rels.values():
        if rel.reltype != reltype or rel.is_external:
            continue
        root = parse_xml(rel.target_part.blob)
        for note in root.iterchildren(qn(f"w:{tag}")):
            if note.get(qn("w:type"), "normal") == "normal":
                texts.append(_story_text(note, document))
    return texts


def parse_docx(data: bytes, options: ParseOptions) -> ParsedDocument:
    """Headers, then the body under its headings, then footers, footnotes and endnotes.

    Raises `PermanentError` (``encrypted``, ``corrupt``, ``too_large``, ``unsupported_type``).
    """
    open_package(data, NOUN)
    try:
        document = docx.Document(io.BytesIO(data))
        headers = _header_footer_texts(document, _HEADER_FOOTERS[:3])
        body = _body_blocks(document)
        notes = (
            _header_footer_texts(document, _HEADER_FOOTERS[3:])
            + _note_texts(document, RT.FOOTNOTES, "footnote")
            + _note_texts(document, RT.ENDNOTES, "endnote")
        )
    except PermanentError:
        raise
    except _ERRORS:
        raise corrupt(NOUN) from None
    blocks = [Block(text) for text in headers] + body + [Block(text) for text in notes]
    return ParsedDocument(
        [Block(normalise_newlines(b.text), b.location, b.boundary) for b in blocks]
    )
