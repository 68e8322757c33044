"""An embedding batch's checkpoint gives back exactly what was embedded, in either format a
retry may find."""

from __future__ import annotations

import io

import numpy as np

from jobs.embedding.embedders import LocalEmbedder, SparseRows
from jobs.worker.checkpoints import decode_embedding, encode_embedding


def _same_rows(a: SparseRows, b: SparseRows) -> bool:
    return (
        a.dimension == b.dimension
        and np.array_equal(a.indptr, b.indptr)
        and np.array_equal(a.indices, b.indices)
        and np.array_equal(a.values, b.values)
    )


def test_sparse_rows_come_back_exactly():
    rows = LocalEmbedder().embed(["Valves inspected, valves passed.", "", "死信队列 queue"])
    back = decode_embedding(encode_embedding(rows))
    assert isinstance(back, SparseRows) and _same_rows(back, rows)


def test_dense_vectors_come_back_exactly():
    vectors = np.random.default_rng(7).random((5, 384), dtype=np.float32)
    back = decode_embedding(encode_embedding(vectors))
    assert back.dtype == np.float32 and np.array_equal(back, vectors)
    back.flags.writeable = True  # a copy, not a view of Redis's bytes


def test_a_checkpoint_in_numpys_zip_format_is_read_too():
    rows = LocalEmbedder().embed(["older checkpoint"])
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
    assert _same_rows(decode_embedding(sparse_zip.getvalue()), rows)
    assert np.array_equal(decode_embedding(dense_zip.getvalue()), dense)
