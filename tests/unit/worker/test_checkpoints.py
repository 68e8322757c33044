"""An embedding batch's checkpoint gives back exactly what was embedded, in either format a
retry may find; the sparse rows an earlier release's local embedder kept are not reused (the
terms are counted at indexing now)."""

from __future__ import annotations

import io
import json

import numpy as np

from jobs.text.terms import SparseRows, TermCounter
from jobs.worker.checkpoints import decode_embedding, encode_embedding


def _sparse_checkpoint(rows: SparseRows) -> bytes:
    """A batch of sparse rows as an earlier release wrote it."""
    arrays = [rows.indptr.astype("<i8"), rows.indices.astype("<u4"), rows.values.astype("<f4")]
    head = json.dumps(
        {
            "form": "sparse",
            "dimension": int(rows.dimension),
            "lengths": [len(array) for array in arrays],
        }
    ).encode()
    return b"".join(
        [
            b"intake-embedding-1\n",
            len(head).to_bytes(4, "big"),
            head,
            *(array.tobytes() for array in arrays),
        ]
    )


def test_an_earlier_release_s_sparse_rows_are_not_reused():
    rows = TermCounter().count(["Valves inspected, valves passed.", "", "死信队列 queue"])
    assert decode_embedding(_sparse_checkpoint(rows)) is None


def test_dense_vectors_come_back_exactly():
    vectors = np.random.default_rng(7).random((5, 384), dtype=np.float32)
    back = decode_embedding(encode_embedding(vectors))
    assert back.dtype == np.float32 and np.array_equal(back, vectors)
    back.flags.writeable = True  # a copy, not a view of Redis's bytes


def test_a_checkpoint_in_numpys_zip_format_is_read_too():
    rows = TermCounter().count(["older checkpoint"])
    dense = np.arange(6, dtype=np.float32).reshape(2, 3)
    sparse_zip, dense_zip = io.BytesIO(), io.BytesIO()
    np.savez(
        sparse_zip,
        indptr=rows.indptr,
        indices=rows.indices,
        values=rows.values,
        dimension=np.array(rows.dimension, dtype=np.int64),
    )
    np.savez(dense_zip, dense=dense)
    assert decode_embedding(sparse_zip.getvalue()) is None
    assert np.array_equal(decode_embedding(dense_zip.getvalue()), dense)
