"""Streams that stand for an upload on its way: bytes made as they are read, none held
beforehand, so that a test can measure what a store holds while it copies them."""

from __future__ import annotations

import hashlib
import io

PIECE = 8 * 1024 * 1024


class MadeStream(io.RawIOBase):
    """`size` bytes repeating `pattern`; with `breaks`, reading past them raises
    ConnectionResetError (a client gone mid-upload) instead of ending. `digest` is the sha256
    of what was read."""

    def __init__(self, size: int, pattern: bytes = b"\0", *, breaks: bool = False) -> None:
        self.left, self.breaks = size, breaks
        self.digest = hashlib.sha256()
        self._piece = (pattern * (PIECE // len(pattern) + 1))[:PIECE]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.left <= 0:
            if self.breaks:
                raise ConnectionResetError("the client went away")
            return 0
        count = min(len(buffer), self.left, PIECE)
        piece = memoryview(self._piece)[:count]
        memoryview(buffer)[:count] = piece
        self.digest.update(piece)
        self.left -= count
        return count

    def buffered(self) -> io.BufferedReader:
        return io.BufferedReader(self)
