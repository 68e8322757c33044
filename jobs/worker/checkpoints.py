"""Outputs of completed steps, kept so that a retry resumes where the last attempt stopped.

One hash per task holds the chunks with their locations (and what the parse found: pages, OCR'd
pages, warnings) and each batch of dense vectors (a chunk's search terms are counted at
indexing, never kept here).
Chunking is fast and deterministic, so the parsed text itself is not kept. It is bounded
(chunks above MAX_CHUNK_CHARS in all are not kept: re-parsing is cheaper than holding them),
expires with the retention period, and is deleted in the transaction that marks the task
succeeded.
A checkpoint made under other chunk or embedder settings is ignored.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
from redis import Redis
from redis.client import Pipeline

from jobs.core import keys
from jobs.embedding.embedders import Embedding
from jobs.text.chunking import Chunk
from jobs.text.parsers import ParsedDocument

MAX_CHUNK_CHARS = 16_000_000


class Checkpoints:
    """Read and write one task's checkpoint hash, all of it tagged with the pipeline version."""

    def __init__(
        self,
        connection: Redis,
        task_id: str,
        version: str,
        ttl_seconds: int,
        stored: dict[bytes, bytes] | None = None,
    ) -> None:
        """`stored`: the hash as already read (with the attempt's start), else read when asked."""
        self.connection = connection
        self.key = keys.checkpoint(task_id)
        self.version = version
        self.ttl_seconds = ttl_seconds
        self._stored = None if stored is None else self._valid(stored)

    def _valid(self, stored: dict[bytes, bytes]) -> dict[bytes, bytes]:
        return stored if stored.get(b"version") == self.version.encode() else {}

    def _load(self) -> dict[bytes, bytes]:
        if self._stored is None:
            self._stored = self._valid(self.connection.hgetall(self.key))
        return self._stored

    def chunks(self) -> tuple[dict[str, Any], list[Chunk]] | None:
        """What the parse found (`summary`) and the chunks, if an attempt got that far."""
        stored = self._load()
        if b"chunks" not in stored:
            return None
        chunks = [Chunk(text, location) for text, location in json.loads(stored[b"chunks"])]
        return json.loads(stored[b"parsed"]), chunks

    def save_chunks(
        self, summary: dict[str, Any], chunks: list[Chunk], pipe: Pipeline | None = None
    ) -> None:
        """Keep the chunks; with `pipe`, the write is queued there for the caller to send."""
        if sum(len(chunk.text) for chunk in chunks) > MAX_CHUNK_CHARS:
            return
        self._write(
            {
                "version": self.version,
                "parsed": json.dumps(summary),
                "chunks": json.dumps([[chunk.text, chunk.location] for chunk in chunks]),
            },
            pipe,
        )

    def embedding(self, start: int) -> Embedding | None:
        raw = self._load().get(f"embedding:{start}".encode())
        return decode_embedding(raw) if raw is not None else None

    def save_embedding(self, start: int, block: Embedding, pipe: Pipeline | None = None) -> None:
        """Keep one embedding batch; with `pipe`, the write is queued there for the caller."""
        self._write({"version": self.version, f"embedding:{start}": encode_embedding(block)}, pipe)

    def _write(self, fields: dict[str, Any], pipe: Pipeline | None) -> None:
        own = pipe is None
        if pipe is None:
            pipe = self.connection.pipeline()
        pipe.hset(self.key, mapping=fields)
        pipe.expire(self.key, self.ttl_seconds)
        if own:
            pipe.execute()


def summary(parsed: ParsedDocument) -> dict[str, Any]:
    """What a task's `result` says of its parse, kept with the chunks so a retry can say it too."""
    return {
        "pages": parsed.pages,
        "characters": parsed.characters,
        "ocr_pages": parsed.ocr_pages,
        "warnings": list(parsed.warnings),
    }


#: The start of an embedding batch as `encode_embedding` writes it; np.savez's zip format is
#: read too (what a worker of an earlier release left, which a retry after an upgrade may find).
_MAGIC = b"intake-embedding-1\n"


def encode_embedding(block: Embedding) -> bytes:
    """Arrays only (no pickle): a dense matrix as raw little-endian bytes behind a JSON header.
    Not np.savez: its zip writer costs more than the rest of a small document's checkpoint (in
    a forked work-horse above all)."""
    dense = np.asarray(block, dtype="<f4")
    head = json.dumps({"form": "dense", "shape": list(dense.shape)}).encode()
    return b"".join(
        [_MAGIC, len(head).to_bytes(4, "big"), head, np.ascontiguousarray(dense).tobytes()]
    )


def decode_embedding(raw: bytes) -> Embedding | None:
    """The dense batch `raw` holds; None for the sparse rows the local embedder of an earlier
    release kept here (its terms are counted at indexing now: nothing of them is reused)."""
    if not raw.startswith(_MAGIC):
        return _decode_npz(raw)
    at = len(_MAGIC) + 4
    end = at + int.from_bytes(raw[len(_MAGIC) : at], "big")
    header = json.loads(raw[at:end])
    if header["form"] != "dense":
        return None
    rows, columns = header["shape"]
    return (
        np.frombuffer(raw, dtype="<f4", count=rows * columns, offset=end)
        .reshape(rows, columns)
        .copy()
    )


def _decode_npz(raw: bytes) -> Embedding | None:
    with np.load(io.BytesIO(raw), allow_pickle=False) as arrays:
        return arrays["dense"] if "dense" in arrays else None
