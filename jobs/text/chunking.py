"""Split a document's text into overlapping chunks for embedding and search.

Search finds chunks, not documents, so a chunk should be a readable passage: it ends at a
paragraph break when one is near, else at a sentence end, else between words, and only as a last
resort in the middle of a word. Consecutive chunks share about `overlap` characters, starting on
a sentence or word boundary, so a sentence cut at a chunk's end is whole in the next. The split
is deterministic (the same text and settings always give the same chunks, which the pipeline
version relies on) and linear in the text's length. This module is pure: no rq, no redis.

A parsed document comes as blocks (jobs.text.parsers.document): `chunk_blocks` joins consecutive
blocks into one text until a block that starts a new part of the document (a slide, a sheet),
so no chunk spans two such parts, and gives each chunk the location of the block it starts in,
with `page_end` (the page of its last character) when it runs over a page break.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.text.parsers.document import Block

# Each pattern is matched from the lowest acceptable cut to the window's end; the greedy ``.*``
# makes it find the *last* boundary, scanning the window once in C.
_LAST_SENTENCE_END = re.compile(r".*(?:[.!?؟।॥][\"')\]’”]*(?=\s)|[。！？](?=.))", re.S)
_LAST_WHITESPACE = re.compile(r".*(?=\s)", re.S)
_SENTENCE_START = re.compile(r"(?:[.!?؟।॥][\"')\]’”]*\s+|[。！？]\s*)(?=\S)")
_WORD_START = re.compile(r"\s+(?=\S)")
_NON_SPACE = re.compile(r"\S")


_BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Chunk:
    """A passage to embed and search, and where in its document it is: where it starts, and
    `page_end` if it ends on a later page."""

    text: str
    location: dict[str, Any] = field(default_factory=dict)


def chunk_blocks(blocks: Iterable[Block], size: int = 1000, overlap: int = 150) -> list[Chunk]:
    """Chunk a document's blocks: blocks join (as paragraphs) until a `boundary` block, and each
    chunk is located where its first character is, plus `page_end` where its last character is
    on another page. Same rules and errors as `chunk_text`."""
    chunks: list[Chunk] = []
    for segment in _segments(blocks):
        text = _BLOCK_SEPARATOR.join(block.text for block in segment)
        starts, position = [], 0
        for block in segment:
            starts.append(position)
            position += len(block.text) + len(_BLOCK_SEPARATOR)
        for start, end in chunk_spans(text, size, overlap, anchors=starts):
            first = bisect_right(starts, start) - 1
            # `end` follows a non-space character (chunk_spans strips the end), so the block
            # holding `end - 1` is the last one the chunk has text of; a chunk cut at the
            # separator before a page holds none of that page.
            last = bisect_right(starts, end - 1) - 1
            chunks.append(Chunk(text[start:end], _location(segment[first], segment[last])))
    return chunks


def _location(first: Block, last: Block) -> dict[str, Any]:
    """Where a chunk is: the location of the block it starts in, and `page_end` when it runs on
    to a later page, so that a hit says "pages 1–2" and a reader does not stop at page 1."""
    location, page_end = dict(first.location), last.location.get("page")
    if "page" in location and page_end is not None and page_end != location["page"]:
        location["page_end"] = page_end
    return location


def _segments(blocks: Iterable[Block]) -> list[list[Block]]:
    """Runs of blocks that chunks may span: a boundary block starts a new run."""
    segments: list[list[Block]] = []
    for block in blocks:
        if block.boundary or not segments:
            segments.append([])
        segments[-1].append(block)
    return segments


def chunk_text(text: str, size: int = 1000, overlap: int = 150) -> list[str]:
    """Split `text` into chunks of at most `size` characters overlapping by about `overlap`.

    Whitespace-only text gives no chunks; no chunk is empty or blank. Raises ValueError unless
    ``size >= 1`` and ``0 <= overlap < size``.
    """
    return [text[start:end] for start, end in chunk_spans(text, size, overlap)]


def chunk_spans(
    text: str, size: int = 1000, overlap: int = 150, anchors: Sequence[int] = ()
) -> list[tuple[int, int]]:
    """The (start, end) offsets in `text` of the chunks `chunk_text` gives.

    `anchors` (sorted offsets: where each page or section starts): a chunk's overlap never
    reaches back before the start of the page its predecessor was cut in, so a chunk holding
    the top of page 2 starts there and says "page 2", not the page its overlap came from.
    """
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(
            f"chunk size {size} and overlap {overlap}: need size ≥ 1 and 0 ≤ overlap < size"
        )
    last = len(text.rstrip())
    start = _skip_space(text, 0, last)
    spans: list[tuple[int, int]] = []
    while start < last:
        if last - start <= size:
            spans.append((start, last))
            break
        end = _find_cut(text, start, size, overlap)
        spans.append((start, len(text[start:end].rstrip()) + start))
        following = _next_start(text, start, end, overlap)
        anchor = bisect_right(anchors, _skip_space(text, end, last)) - 1
        if anchor >= 0 and anchors[anchor] > following:
            following = anchors[anchor]
        start = _skip_space(text, following, last)
    return spans


def _find_cut(text: str, start: int, size: int, overlap: int) -> int:
    """Where the chunk starting at `start` ends: the best boundary in its window's last part.

    A cut is never earlier than half the window, nor so early that the next chunk (which starts
    `overlap` characters before the cut) would not move forward.
    """
    lowest = start + max(size // 2, overlap + 1)
    highest = start + size
    paragraph = text.rfind("\n\n", lowest, highest + 2)
    if paragraph != -1:
        return paragraph
    for pattern in (_LAST_SENTENCE_END, _LAST_WHITESPACE):
        found = pattern.match(text, lowest, highest + 1)
        if found:
            return found.end()
    return highest


def _next_start(text: str, start: int, end: int, overlap: int) -> int:
    """Start the next chunk about `overlap` characters before `end`, at a sentence or word start.

    Looks forward from ``end - overlap`` through half the overlap: the result is always after
    `start`, so the split always progresses.
    """
    target = end - overlap
    if overlap == 0:
        return end
    limit = min(end, target + overlap // 2)
    for pattern in (_SENTENCE_START, _WORD_START):
        found = pattern.search(text, max(target - 1, start + 1), limit)
        if found:
            return max(found.end(), target)
    return target


def _skip_space(text: str, position: int, last: int) -> int:
    """The first non-space position at or after `position` (or `last` when there is none)."""
    found = _NON_SPACE.search(text, position, last)
    return found.start() if found else last
