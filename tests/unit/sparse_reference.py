"""Exact dot products of sparse rows, in memory: the reference the tests hold the embedder's
rankings and the Redis search (jobs.kb.retrieval) to. It was the product's search until the index
moved into Redis.

Pure numpy: no redis.
"""
from __future__ import annotations

import numpy as np

from jobs.embedding.embedders import SparseRows


class InvertedIndex:
    """Postings sorted by bucket: ``bucket[i]`` occurs in chunk ``chunk[i]`` with ``value[i]``.

    Within one bucket, postings stay in chunk order (the sort is stable), so scores are summed
    in the same order every time and equal inputs give bit-equal scores.
    """

    def __init__(self, rows: SparseRows) -> None:
        self.dimension = rows.dimension
        self.size = len(rows)
        chunk_of = np.repeat(np.arange(self.size, dtype=np.int32), np.diff(rows.indptr))
        order = np.argsort(rows.indices, kind="stable")
        self.bucket = rows.indices[order]
        self.chunk = chunk_of[order]
        self.value = rows.values[order]

    def scores(self, query: SparseRows) -> np.ndarray:
        """Dot product of the query's first row with every chunk (float64, one per chunk)."""
        start, stop = query.indptr[0], query.indptr[1]
        buckets, weights = query.indices[start:stop], query.values[start:stop]
        lows = np.searchsorted(self.bucket, buckets, side="left")
        highs = np.searchsorted(self.bucket, buckets, side="right")
        hits = [(lo, hi, w) for lo, hi, w in zip(lows, highs, weights) if hi > lo]
        if not hits:
            return np.zeros(self.size)
        chunks = np.concatenate([self.chunk[lo:hi] for lo, hi, _ in hits])
        products = np.concatenate([self.value[lo:hi] * w for lo, hi, w in hits])
        return np.bincount(chunks, weights=products, minlength=self.size)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indexes of the `k` best positive scores, best first; ties go to the earlier chunk.

    ``argpartition`` alone would cut ties at the k-th place arbitrarily, so every chunk that
    reaches the k-th score is kept, then a lexicographic sort (score, then index) decides.
    """
    if k <= 0:
        return np.zeros(0, dtype=np.intp)
    candidates = np.flatnonzero(scores > 0)
    if len(candidates) > k:
        threshold = np.partition(scores[candidates], len(candidates) - k)[len(candidates) - k]
        candidates = candidates[scores[candidates] >= threshold]
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order[:k]]
