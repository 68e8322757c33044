"""The byte layout of the knowledge base's lexical index in Redis, built with numpy.

Why this layout: a million chunks hold ~100 million (term, chunk) pairs, so a sorted set per
term (~100 bytes an entry) would need ~10 GB, and a term found in most chunks would still cost
its whole posting list per query. Instead a term's postings are split by impact: its BM25L
term-frequency part in a chunk (`tf_part`), with L, the tenant's reference length, as the
average length, is quantised to one of 256 levels, and each (term, level) pair is one Redis
string of 4-byte chunk ids, appended to (APPEND is O(1)). A search reads a term's highest
levels first and stops once nothing unread can reach the top k (jobs.kb.retrieval).

What stays right as documents come and go: a level only orders a term's postings, so it is
computed once, with the fixed L, and never re-written. What bounds a level's scores is kept
beside it: the largest tf and the shortest chunk among its postings (the term's levels hash),
from which the search computes the most any of them scores with today's average length; where
all of a level's chunks are alike, that bound is their very score, and a search stops there. Each
chunk keeps its own row, ``length (4 bytes)`` then ``bucket (4) + tf (2) + level (1)`` per term
sorted by bucket, from which a candidate is scored exactly, with the inverse document frequencies
and the average length of the moment. Integers are big-endian so the search script can read them
with ``string.byte`` (fakeredis's Lua has no ``struct``).

Pure: no redis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jobs.text.terms import SparseRows

#: The ranking's parameters: tf saturation and how much length normalises (bm25s's and
#: Lucene's usual 1.5 and 0.75), and BM25L's shift of the normalised tf (Lv & Zhai's 0.5).
K1, B, DELTA = 1.5, 0.75, 0.5
#: The average chunk length (in terms) the levels are computed for, kept per tenant from its
#: first document on (jobs.kb.index): chunks of INTAKE_CHUNK_SIZE's default 1,000 characters
#: hold 60–110 terms. A tenant whose chunks grow longer on average only loosens the bounds.
REFERENCE_LENGTH = 100
LEVELS = 256
MAX_TF = 65535
ROW_HEADER = np.dtype(">u4")
ROW_RECORD = np.dtype([("bucket", ">u4"), ("tf", ">u2"), ("level", "u1")])
CHUNK_ID = np.dtype(">u4")


def tf_part(tf: np.ndarray, length: np.ndarray, average: float) -> np.ndarray:
    """BM25L's term-frequency part: with c = tf / (1 - b + b dl / avgdl),
    (k1 + 1)(c + δ) / (k1 + c + δ), less its value for a chunk without the term (so that a chunk
    lacking a word gains nothing from it). Grows with tf, shrinks with the chunk's length."""
    c = np.asarray(tf, np.float64) / (1 - B + B * np.asarray(length, np.float64) / average)
    return (K1 + 1) * (c + DELTA) / (K1 + c + DELTA) - (K1 + 1) * DELTA / (K1 + DELTA)


#: What tf_part tends to for an endless tf.
TF_PART_BOUND = (K1 + 1) * K1 / (K1 + DELTA)


def level_of(tf: np.ndarray, length: np.ndarray, reference: float) -> np.ndarray:
    """The impact level (0–255) of each (tf, chunk length): level L holds tf parts (with the
    reference length as the average) in [L/256, (L+1)/256) of their bound."""
    share = tf_part(tf, length, reference) / TF_PART_BOUND
    return np.clip(np.floor(share * LEVELS), 0, LEVELS - 1).astype(np.int64)


def bucket_name(bucket: int) -> str:
    """How a bucket appears in key names (the search script builds the same from its bytes)."""
    return f"{int(bucket):08x}"


@dataclass(frozen=True)
class Group:
    """The chunk ids of one document at one (term bucket, level), and what bounds their
    scores: the largest tf and the shortest chunk among them."""

    name: str
    level: int
    ids: bytes
    max_tf: int
    min_length: int


@dataclass(frozen=True)
class Postings:
    """One document's lexical entries, ready to append."""

    groups: list[Group]
    #: One row per chunk (bytes), in chunk order.
    rows: list[bytes]

    @property
    def count(self) -> int:
        return sum(len(group.ids) // CHUNK_ID.itemsize for group in self.groups)


def encode(rows: SparseRows, first: int, reference: float = REFERENCE_LENGTH) -> Postings:
    """The postings and rows of `rows` (term counts), whose chunk ``i`` gets the id
    ``first + i``, their levels computed for the reference length."""
    counts = np.diff(rows.indptr)
    chunk = first + np.repeat(np.arange(len(rows), dtype=np.int64), counts)
    buckets = rows.indices.astype(np.int64)
    tf = np.clip(np.rint(rows.values), 1, MAX_TF).astype(np.int64)
    lengths = np.bincount(chunk - first, weights=tf, minlength=len(rows)).astype(np.int64)
    levels = level_of(tf, np.repeat(lengths, counts), reference)
    records = np.empty(len(buckets), dtype=ROW_RECORD)
    records["bucket"] = rows.indices
    records["tf"] = tf
    records["level"] = levels
    blob = records.tobytes()
    size = ROW_RECORD.itemsize
    row_bytes = [
        np.array(length, ROW_HEADER).tobytes() + blob[int(a) * size : int(b) * size]
        for length, a, b in zip(lengths.tolist(), rows.indptr[:-1], rows.indptr[1:])
    ]
    # Group by (bucket, level); within a group chunk ids ascend (lexsort is stable).
    order = np.lexsort((chunk, levels, buckets))
    keyed = buckets[order] * LEVELS + levels[order]
    ids = chunk[order].astype(CHUNK_ID).tobytes()
    starts = (
        np.flatnonzero(np.r_[True, keyed[1:] != keyed[:-1]])
        if len(keyed)
        else np.zeros(0, np.int64)
    )
    stops = np.r_[starts[1:], len(keyed)]
    max_tf = np.maximum.reduceat(tf[order], starts) if len(starts) else starts
    min_length = (
        np.minimum.reduceat(np.repeat(lengths, counts)[order], starts) if len(starts) else starts
    )
    width = CHUNK_ID.itemsize
    groups = [
        Group(
            bucket_name(keyed[a] // LEVELS),
            int(keyed[a] % LEVELS),
            ids[a * width : b * width],
            int(high),
            int(low),
        )
        for a, b, high, low in zip(
            starts.tolist(), stops.tolist(), max_tf.tolist(), min_length.tolist()
        )
    ]
    return Postings(groups, row_bytes)


def query_terms(query: SparseRows, limit: int = 128) -> list[tuple[bytes, int]]:
    """The query row's buckets (4 bytes each, as rows store them) and how often the query names
    each, at most `limit` of them (the most repeated first): a pasted page must not cost a read
    of every word it has."""
    start, stop = int(query.indptr[0]), int(query.indptr[1])
    buckets, counts = query.indices[start:stop], query.values[start:stop]
    order = np.argsort(-counts, kind="stable")[:limit]
    return [(int(buckets[i]).to_bytes(4, "big"), int(counts[i])) for i in order]


@dataclass(frozen=True)
class Dead:
    """What the rows of dead chunks held, to take out of the tenant's statistics and postings."""

    #: (bucket name, level, how many): which posting strings hold their ids.
    groups: list[tuple[str, int, int]]
    #: bucket name → in how many of the chunks it occurs (their share of its document frequency).
    frequencies: dict[str, int]
    chunks: int
    length: int


def dead_entries(rows: list[bytes]) -> Dead:
    """What stored rows hold: their posting groups, document frequencies, count and length."""
    if not rows:
        return Dead([], {}, 0, 0)
    header = ROW_HEADER.itemsize
    length = sum(int.from_bytes(row[:header], "big") for row in rows)
    records = np.frombuffer(b"".join(row[header:] for row in rows), dtype=ROW_RECORD)
    if not len(records):
        return Dead([], {}, len(rows), length)
    keyed, counts = np.unique(
        records["bucket"].astype(np.int64) * LEVELS + records["level"], return_counts=True
    )
    groups = [
        (bucket_name(k // LEVELS), int(k % LEVELS), int(c))
        for k, c in zip(keyed.tolist(), counts.tolist())
    ]
    buckets, frequencies = np.unique(records["bucket"], return_counts=True)
    return Dead(
        groups,
        {bucket_name(b): int(c) for b, c in zip(buckets.tolist(), frequencies.tolist())},
        len(rows),
        length,
    )
