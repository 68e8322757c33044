"""Split a document's text into overlapping chunks for embedding and search.

Search finds chunks, not documents, so a chunk should be a readable passage: it ends at a
paragraph break when one is near, else at a sentence end, else between words, and only as a last
resort in the middle of a word. Consecutive chunks share about `overlap` characters, starting on
a sentence or word boundary, so a sentence cut at a chunk's end is whole in the next. The split
is deterministic (the same text and settings always give the same chunks, which the pipeline
version relies on) and linear in the text's length. This module is pure: no rq, no redis.
"""
from __future__ import annotations

import re

# Each pattern is matched from the lowest acceptable cut to the window's end; the greedy ``.*``
# makes it find the *last* boundary, scanning the window once in C.
_LAST_SENTENCE_END = re.compile(r".*(?:[.!?][\"')\]’”]*(?=\s)|[。！？](?=.))", re.S)
_LAST_WHITESPACE = re.compile(r".*(?=\s)", re.S)
_SENTENCE_START = re.compile(r"(?:[.!?][\"')\]’”]*\s+|[。！？]\s*)(?=\S)")
_WORD_START = re.compile(r"\s+(?=\S)")
_NON_SPACE = re.compile(r"\S")


def chunk_text(text: str, size: int = 1000, overlap: int = 150) -> list[str]:
    """Split `text` into chunks of at most `size` characters overlapping by about `overlap`.

    Whitespace-only text gives no chunks; no chunk is empty or blank. Raises ValueError unless
    ``size >= 1`` and ``0 <= overlap < size``.
    """
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"chunk size {size} and overlap {overlap}: need size ≥ 1 and "
                         f"0 ≤ overlap < size")
    last = len(text.rstrip())
    start = _skip_space(text, 0, last)
    chunks: list[str] = []
    while start < last:
        if last - start <= size:
            chunks.append(text[start:last])
            break
        end = _find_cut(text, start, size, overlap)
        chunks.append(text[start:end].rstrip())
        start = _skip_space(text, _next_start(text, start, end, overlap), last)
    return chunks


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
