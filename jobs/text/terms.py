"""A chunk's search terms and how often each occurs: the analysis step of chunking, made once
for every chunk whatever embedder runs after it.

Why here and not in jobs/embedding: the lexical index is the knowledge base's own search,
there with or without a dense model, and its rows are no vectors of a model but the chunk's
terms (jobs.text.tokens: stemmed, without stop words; CJK by characters and pairs) with their
counts. The index step counts them (jobs.kb.index.stage), for every embedder alike; the search
counts a query's the same way. Pure: no rq, no redis.

The space is the whole CRC-32 range (2**32 buckets): a bucket is the term's CRC-32, the same in
every process and on every machine, and with this many buckets two terms rarely share one,
which is why the rows are sparse (`SparseRows`): a chunk touches ~100 buckets, not a million.
The values are term frequencies, not weights: what a term weighs depends on the collection (how
rare it is, how long chunks are on average), which changes as documents come and go, so the
knowledge base computes BM25 at search time from these counts (jobs.kb.retrieval).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jobs.text.tokens import document_terms, query_terms

#: Buckets of the hashed term space: every uint32.
TERM_SPACE = 2**32


@dataclass(frozen=True, eq=False)
class SparseRows:
    """Rows of a very large hashed space, stored CSR-style: only the buckets a row touches.

    Row ``i`` has the buckets ``indices[indptr[i]:indptr[i + 1]]`` (uint32, sorted and unique
    within the row) with ``values[...]`` (float32: term counts).
    A text without words is an empty row. (``eq=False``: arrays have no truth value, so rows
    compare by identity.)
    """

    indptr: np.ndarray  # int64, len(rows) + 1, starts at 0
    indices: np.ndarray  # uint32 bucket ids
    values: np.ndarray  # float32
    dimension: int

    def __post_init__(self) -> None:
        indptr = np.asarray(self.indptr, dtype=np.int64)
        indices = np.asarray(self.indices, dtype=np.uint32)
        values = np.asarray(self.values, dtype=np.float32)
        if (
            indptr.ndim != 1
            or len(indptr) == 0
            or indptr[0] != 0
            or indptr[-1] != len(indices)
            or len(indices) != len(values)
        ):
            raise ValueError("SparseRows arrays do not describe the same rows")
        object.__setattr__(self, "indptr", indptr)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "values", values)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    @classmethod
    def empty(cls, dimension: int) -> SparseRows:
        """No rows at all (an empty batch)."""
        return cls(
            np.zeros(1, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.float32), dimension
        )

    @classmethod
    def concatenate(cls, blocks: Sequence[SparseRows]) -> SparseRows:
        """The rows of every block, in order."""
        if not blocks:
            raise ValueError("nothing to concatenate")
        dimension = blocks[0].dimension
        if any(block.dimension != dimension for block in blocks):
            raise ValueError("cannot concatenate SparseRows of different dimensions")
        offsets = np.cumsum([0] + [len(block.indices) for block in blocks])
        indptr = np.concatenate(
            [np.zeros(1, np.int64)]
            + [block.indptr[1:] + offset for block, offset in zip(blocks, offsets)]
        )
        return cls(
            indptr,
            np.concatenate([block.indices for block in blocks]),
            np.concatenate([block.values for block in blocks]),
            dimension,
        )

    def to_bytes(self) -> tuple[bytes, bytes, bytes]:
        """``(indptr, indices, values)`` as raw little-endian-native bytes, for Redis."""
        return self.indptr.tobytes(), self.indices.tobytes(), self.values.tobytes()

    @classmethod
    def from_bytes(cls, indptr: bytes, indices: bytes, values: bytes, dimension: int) -> SparseRows:
        """The inverse of `to_bytes` (read-only views on the bytes, no copy)."""
        return cls(
            np.frombuffer(indptr, dtype=np.int64),
            np.frombuffer(indices, dtype=np.uint32),
            np.frombuffer(values, dtype=np.float32),
            dimension,
        )


class TermCounter:
    """Each chunk's terms, feature-hashed into `dimension` buckets with their counts, as sparse
    rows; a query's the same way.

    `model` names the analysis: where no dense model is configured it is the name the pipeline
    version carries (jobs.embedding.embedders.LocalEmbedder), so it changes only with the terms
    a chunk yields. A query's terms are not in it: searching by more of what chunks already hold
    (issue 40 gave queries the characters of their spaceless runs) indexes nothing again.
    """

    model = "local-bm25-v1"

    def __init__(self, dimension: int = TERM_SPACE) -> None:
        if not 0 < dimension <= TERM_SPACE:
            raise ValueError("dimension must be between 1 and 2**32 (uint32 bucket ids)")
        self.dimension = dimension

    def count(self, texts: Sequence[str]) -> SparseRows:
        """One row per chunk: its terms' buckets and how often each occurs."""
        return self._counted([document_terms(text) for text in texts])

    def count_query(self, query: str) -> SparseRows:
        """One row: the query's terms and how often it names each (a word asked twice weighs
        twice, as in Lucene's BM25)."""
        return self._counted([query_terms(query)])

    def _counted(self, term_lists: list[list[str]]) -> SparseRows:
        hashes: list[int] = []
        rows: list[int] = []
        for row, words in enumerate(term_lists):
            hashes.extend(zlib.crc32(word.encode("utf-8")) for word in words)
            rows.extend([row] * len(words))
        buckets = np.array(hashes, dtype=np.int64) % self.dimension
        # One (row, bucket) key per occurrence; np.unique sorts by row, then bucket, and counts.
        cells, counts = np.unique(
            np.array(rows, dtype=np.int64) << 32 | buckets, return_counts=True
        )
        cell_rows = cells >> 32
        indptr = np.zeros(len(term_lists) + 1, dtype=np.int64)
        np.cumsum(np.bincount(cell_rows, minlength=len(term_lists)), out=indptr[1:])
        return SparseRows(
            indptr,
            (cells & 0xFFFFFFFF).astype(np.uint32),
            counts.astype(np.float32),
            self.dimension,
        )


#: The counter every index write and every search uses.
TERMS = TermCounter()
