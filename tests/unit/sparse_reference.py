"""BM25L over term-count rows, in memory: the reference the tests hold the Redis search
(jobs.kb.retrieval) to. Written from the formula (Lv and Zhai, 2011), not from the product's code:
score(q, d) = Σ_t qtf · ln((N + 1) / (df + 0.5)) · (f(c) − f(0)), c = tf / (1 − b + b dl / avgdl),
f(c) = (k1 + 1)(c + δ) / (k1 + c + δ).

Pure numpy: no redis.
"""

from __future__ import annotations

import numpy as np

from jobs.text.terms import SparseRows

K1, B, DELTA = 1.5, 0.75, 0.5


class InvertedIndex:
    """The chunks' rows (term counts) by bucket, with N, df and the average length."""

    def __init__(self, rows: SparseRows) -> None:
        self.size = len(rows)
        chunk_of = np.repeat(np.arange(self.size, dtype=np.int64), np.diff(rows.indptr))
        self.lengths = np.bincount(chunk_of, weights=rows.values, minlength=self.size)
        self.average = float(self.lengths.mean()) if self.size else 0.0
        order = np.argsort(rows.indices, kind="stable")
        self.bucket = rows.indices[order]
        self.chunk = chunk_of[order]
        self.tf = rows.values[order].astype(np.float64)

    def scores(self, query: SparseRows) -> np.ndarray:
        """BM25L of the query's first row (its terms' counts) against every chunk."""
        start, stop = query.indptr[0], query.indptr[1]
        total = np.zeros(self.size)
        for bucket, count in zip(query.indices[start:stop], query.values[start:stop]):
            lo = np.searchsorted(self.bucket, bucket, side="left")
            hi = np.searchsorted(self.bucket, bucket, side="right")
            if hi == lo:
                continue
            df = hi - lo
            idf = np.log((self.size + 1) / (df + 0.5))
            chunks, tf = self.chunk[lo:hi], self.tf[lo:hi]
            c = tf / (1 - B + B * self.lengths[chunks] / self.average)
            gain = (K1 + 1) * (c + DELTA) / (K1 + c + DELTA) - (K1 + 1) * DELTA / (K1 + DELTA)
            total[chunks] += float(count) * idf * gain
        return total


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
