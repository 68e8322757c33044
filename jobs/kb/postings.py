"""The byte layout of the knowledge base's lexical index in Redis, built with numpy.

Why this layout: a million chunks hold ~100 million (term, chunk) pairs, so a sorted set per
term (~100 bytes an entry) would need ~10 GB, and a term found in most chunks would still cost
its whole posting list per query. Instead a term's postings are split by impact: its weight in
a chunk is quantised to one of 256 levels, and each (term, level) pair is one Redis string of
4-byte chunk ids, appended to (APPEND is O(1)). A search reads a term's highest levels first and
stops once nothing unread can reach the top k (jobs.kb.retrieval). Each chunk also keeps its own
row, ``bucket (4 bytes) + weight (2 bytes)`` per term sorted by bucket, so a candidate found
through one term is scored exactly on all the query's terms. Integers are big-endian so the
search script can read them with ``string.byte`` (fakeredis's Lua has no ``struct``).

Pure: no redis.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jobs.embedding.embedders import SparseRows

LEVELS = 256
#: A weight is stored as round(w * WEIGHT_SCALE) in two bytes (w is in [0, 1]).
WEIGHT_SCALE = 65535
ROW_RECORD = np.dtype([("bucket", ">u4"), ("weight", ">u2")])
CHUNK_ID = np.dtype(">u4")


def level_of(weights: np.ndarray) -> np.ndarray:
    """The impact level (0–255) of each weight: level L holds weights in [L/256, (L+1)/256)."""
    return np.clip(np.floor(np.asarray(weights, np.float64) * LEVELS), 0, LEVELS - 1).astype(
        np.int64)


def bucket_name(bucket: int) -> str:
    """How a bucket appears in key names (the search script builds the same from its bytes)."""
    return f"{int(bucket):08x}"


@dataclass(frozen=True)
class Postings:
    """One document's lexical entries, ready to append: ``(bucket name, level, chunk ids)``."""

    groups: list[tuple[str, int, bytes]]
    #: One row per chunk (bytes), in chunk order.
    rows: list[bytes]

    @property
    def count(self) -> int:
        return sum(len(ids) // CHUNK_ID.itemsize for _, _, ids in self.groups)


def encode(rows: SparseRows, first: int) -> Postings:
    """The postings and rows of `rows`, whose chunk ``i`` gets the id ``first + i``."""
    counts = np.diff(rows.indptr)
    chunk = first + np.repeat(np.arange(len(rows), dtype=np.int64), counts)
    buckets = rows.indices.astype(np.int64)
    stored = np.rint(np.clip(rows.values, 0, 1) * WEIGHT_SCALE).astype(np.uint16)
    # The level of the weight as stored, so that a row read back names the same posting key.
    levels = level_of(stored / WEIGHT_SCALE)
    records = np.empty(len(buckets), dtype=ROW_RECORD)
    records["bucket"] = rows.indices
    records["weight"] = stored
    blob = records.tobytes()
    size = ROW_RECORD.itemsize
    row_bytes = [blob[int(a) * size:int(b) * size] for a, b in zip(rows.indptr[:-1],
                                                                    rows.indptr[1:])]
    # Group by (bucket, level); within a group chunk ids ascend (lexsort is stable).
    order = np.lexsort((chunk, levels, buckets))
    keyed = buckets[order] * LEVELS + levels[order]
    ids = chunk[order].astype(CHUNK_ID).tobytes()
    starts = np.flatnonzero(np.r_[True, keyed[1:] != keyed[:-1]]) if len(keyed) else np.zeros(
        0, np.int64)
    stops = np.r_[starts[1:], len(keyed)]
    width = CHUNK_ID.itemsize
    groups = [(bucket_name(keyed[a] // LEVELS), int(keyed[a] % LEVELS), ids[a * width:b * width])
              for a, b in zip(starts.tolist(), stops.tolist())]
    return Postings(groups, row_bytes)


def query_terms(query: SparseRows, limit: int = 32) -> list[tuple[bytes, float]]:
    """The query row's buckets (4 bytes each, as rows store them) and weights, heaviest first,
    at most `limit` of them: a pasted paragraph must not cost a read of every word it has."""
    start, stop = int(query.indptr[0]), int(query.indptr[1])
    buckets, weights = query.indices[start:stop], query.values[start:stop]
    order = np.argsort(-weights, kind="stable")[:limit]
    return [(int(buckets[i]).to_bytes(4, "big"), float(weights[i])) for i in order]


def posting_groups(rows: bytes) -> list[tuple[str, int, int]]:
    """(bucket name, level, how many) of the postings that stored rows (concatenated) made:
    which posting strings hold a dead chunk's ids, to count them for compaction."""
    records = np.frombuffer(rows, dtype=ROW_RECORD)
    if not len(records):
        return []
    levels = level_of(records["weight"].astype(np.float64) / WEIGHT_SCALE)
    keyed, counts = np.unique(records["bucket"].astype(np.int64) * LEVELS + levels,
                              return_counts=True)
    return [(bucket_name(k // LEVELS), int(k % LEVELS), int(c))
            for k, c in zip(keyed.tolist(), counts.tolist())]
