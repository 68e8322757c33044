"""jobs.kb.vectors.VectorStore against a real PostgreSQL with pgvector (pgserver's, one per session:
tests/integration/postgres.py). No mocks: every answer comes from the server.

Each test uses its own tenants, so the tests share the per-dimension tables as tenants of one
deployment do. Sizes are kept small enough for the file to run in well under 30 s on two cores
(pgserver's pgvector 0.6 maintains its HNSW index at milliseconds per row).
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from jobs.core.failures import TransientError
from jobs.kb.vectors import VectorStore, nearest_query
from runner.processes import free_port

ROOT = Path(__file__).resolve().parents[3]
DIM = 32
COUNT = 3000


def unit_rows(count: int, dim: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def near(vector: np.ndarray, seed: int, noise: float = 0.05) -> np.ndarray:
    """`vector` nudged a little, still unit length: its own row must stay the nearest."""
    moved = vector + noise * np.random.default_rng(seed).standard_normal(vector.shape)
    return (moved / np.linalg.norm(moved)).astype(np.float32)


def tenant_name() -> str:
    return f"tenant-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def store(postgres_url: str) -> Iterator[VectorStore]:
    with VectorStore(postgres_url) as vector_store:
        yield vector_store


@pytest.fixture(scope="module")
def corpus(store: VectorStore) -> tuple[str, np.ndarray]:
    """COUNT random unit vectors of one tenant, chunks 0 … COUNT-1, written once."""
    tenant = tenant_name()
    vectors = unit_rows(COUNT, DIM, seed=1)
    store.write(tenant, 0, vectors)
    return tenant, vectors


def test_nearest_finds_the_right_chunk_among_thousands(
    store: VectorStore, corpus: tuple[str, np.ndarray]
) -> None:
    tenant, vectors = corpus
    found = 0
    for target in (0, 17, 1234, 2999):
        hits = store.nearest(tenant, near(vectors[target], seed=target), 10)
        assert len(hits) == 10
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        found += hits[0][0] == target
        # The similarity is the cosine, 1 - cosine distance: compare with numpy's.
        query = near(vectors[target], seed=target)
        chunk, similarity = hits[0]
        assert similarity == pytest.approx(float(vectors[chunk] @ query), abs=1e-5)
    assert found == 4
    # Recall against the exact answer, for a query that is no stored row.
    query = unit_rows(1, DIM, seed=99)[0]
    exact = set(np.argsort(-(vectors @ query))[:10].tolist())
    approximate = {chunk for chunk, _ in store.nearest(tenant, query, 10)}
    assert len(exact & approximate) >= 8


def test_tenants_never_see_each_others_rows(
    store: VectorStore, corpus: tuple[str, np.ndarray]
) -> None:
    big, vectors = corpus
    small = tenant_name()
    mine = unit_rows(20, DIM, seed=2)
    store.write(small, 0, mine)  # the same chunk ids as the big tenant's first 20
    # The small tenant's 20 rows are < 1 % of the table, yet it gets its `limit` rows, all its own.
    hits = store.nearest(small, near(mine[5], seed=5), 10)
    assert len(hits) == 10 and hits[0][0] == 5
    assert all(0 <= chunk < 20 for chunk, _ in hits)
    assert hits[0][1] == pytest.approx(float(mine[5] @ near(mine[5], seed=5)), abs=1e-5)
    # Asked for more than it has, it gets all it has and nothing of the other tenant.
    assert sorted(chunk for chunk, _ in store.nearest(small, mine[0], 50)) == list(range(20))
    # The big tenant's chunk 5 is its own vector, not the small tenant's.
    top, similarity = store.nearest(big, mine[5], 1)[0]
    assert similarity < 0.99
    assert store.nearest(big, vectors[5], 1)[0][0] == 5
    assert store.nearest(tenant_name(), mine[5], 10) == []


def test_delete_removes_a_range(store: VectorStore) -> None:
    tenant, other = tenant_name(), tenant_name()
    vectors = unit_rows(40, DIM, seed=3)
    store.write(tenant, 100, vectors)  # chunks 100 … 139
    store.write(other, 100, vectors)
    store.delete(tenant, 110, 120)
    left = {chunk for chunk, _ in store.nearest(tenant, vectors[0], 100)}
    assert left == set(range(100, 110)) | set(range(120, 140))
    assert store.nearest(tenant, vectors[15], 1)[0][0] != 115
    assert len(store.nearest(other, vectors[0], 100)) == 40  # another tenant's range stays
    store.delete(tenant, 0, 1000)
    assert store.nearest(tenant, vectors[0], 10) == []


def test_two_dimensions_coexist(store: VectorStore) -> None:
    tenant = tenant_name()
    narrow, wide = unit_rows(30, 8, seed=4), unit_rows(30, 16, seed=5)
    store.write(tenant, 0, narrow)
    store.write(tenant, 0, wide)  # the same chunk ids, another table
    assert store.nearest(tenant, narrow[7], 1)[0] == (7, pytest.approx(1.0, abs=1e-5))
    assert store.nearest(tenant, wide[9], 1)[0] == (9, pytest.approx(1.0, abs=1e-5))
    assert store.nearest(tenant, unit_rows(1, 12, seed=6)[0], 5) == []  # no table of 12
    store.delete(tenant, 0, 10)  # in every dimension
    assert min(chunk for chunk, _ in store.nearest(tenant, narrow[0], 30)) == 10
    assert min(chunk for chunk, _ in store.nearest(tenant, wide[0], 30)) == 10


def test_a_resent_write_is_harmless(store: VectorStore, postgres_url: str) -> None:
    tenant = tenant_name()
    vectors = unit_rows(50, 24, seed=7)
    store.write(tenant, 0, vectors)
    before = store.nearest(tenant, vectors[3], 50)
    store.write(tenant, 0, vectors)  # the same write again (a retried attempt)
    store.write(tenant, 10, vectors[10:20])  # a part of it again
    assert store.nearest(tenant, vectors[3], 50) == before
    with psycopg.connect(postgres_url) as connection:
        rows = connection.execute(
            "SELECT count(*) FROM intake_vectors_24 WHERE tenant = %s", (tenant,)
        ).fetchone()
    assert rows == (50,)
    # A write of other vectors to the same chunks replaces them (ON CONFLICT DO UPDATE).
    store.write(tenant, 0, vectors[::-1].copy())
    assert store.nearest(tenant, vectors[0], 1)[0] == (49, pytest.approx(1.0, abs=1e-5))


def test_the_search_uses_the_hnsw_index(postgres_url: str, corpus: tuple[str, np.ndarray]) -> None:
    """Once the planner knows the table (ANALYZE, as autovacuum does), the nearest query of a
    tenant owning most rows is an HNSW index scan, filtered by tenant, not a sort of the rows."""
    tenant, vectors = corpus
    literal = "[" + ",".join(str(float(x)) for x in vectors[0]) + "]"
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f"ANALYZE intake_vectors_{DIM}")
        plan = "\n".join(
            row[0]
            for row in connection.execute(
                psycopg.sql.SQL("EXPLAIN ") + nearest_query(DIM), (literal, tenant, 10)
            )
        )
    assert f"Index Scan using intake_vectors_{DIM}_hnsw" in plan, plan
    assert "Sort" not in plan, plan


def _child_reads(url: str, tenant: str, query: list[float], out: multiprocessing.Queue) -> None:
    with VectorStore(url) as child_store:
        out.put(child_store.nearest(tenant, np.array(query, dtype=np.float32), 3))


def _forked_child_uses_inherited_store(
    store: VectorStore, tenant: str, query: np.ndarray, out: multiprocessing.Queue
) -> None:
    out.put(store.nearest(tenant, query, 3))  # a work-horse's case: the parent's store, forked


def _fresh_interpreter(script: str, payload: object) -> str:
    """Run `script` in a new Python process with `payload` as JSON on its stdin; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        input=json.dumps(payload),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_another_process_sees_the_rows(
    store: VectorStore, postgres_url: str, corpus: tuple[str, np.ndarray]
) -> None:
    tenant, vectors = corpus
    # A fresh interpreter (as a web process is to a worker) with its own store.
    script = (
        "import json, sys, numpy as np\n"
        "from jobs.kb.vectors import VectorStore\n"
        "url, tenant, query = json.loads(sys.stdin.read())\n"
        "store = VectorStore(url)\n"
        "print(json.dumps(store.nearest(tenant, np.array(query, dtype=np.float32), 3)))\n"
        "store.close()\n"
    )
    assert (
        json.loads(_fresh_interpreter(script, [postgres_url, tenant, vectors[42].tolist()]))[0][0]
        == 42
    )
    # A forked child using the store it inherited (with its open connection) opens its own,
    # and leaves the parent's connection working.
    assert store.nearest(tenant, vectors[7], 1)[0][0] == 7  # the parent's connection is open
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(
        target=_forked_child_uses_inherited_store, args=(store, tenant, vectors[8], out)
    )
    child.start()
    assert out.get(timeout=30)[0][0] == 8
    child.join(30)
    assert child.exitcode == 0
    assert store.nearest(tenant, vectors[9], 1)[0][0] == 9


def test_rows_written_by_a_child_process_are_seen_at_once(
    store: VectorStore, postgres_url: str
) -> None:
    tenant = tenant_name()
    vectors = unit_rows(5, DIM, seed=8)
    script = (
        "import json, sys, numpy as np\n"
        "from jobs.kb.vectors import VectorStore\n"
        "url, tenant, rows = json.loads(sys.stdin.read())\n"
        "with VectorStore(url) as store:\n"
        "    store.write(tenant, 0, np.array(rows, dtype=np.float32))\n"
    )
    _fresh_interpreter(script, [postgres_url, tenant, vectors.tolist()])
    assert store.nearest(tenant, vectors[3], 1)[0][0] == 3


def test_an_unreachable_database_is_a_transient_error_that_says_where() -> None:
    port = free_port()
    store = VectorStore(f"postgresql://intake:s3cret@127.0.0.1:{port}/intake", connect_timeout=2)
    for call in (
        lambda: store.write("t", 0, unit_rows(2, 4, seed=9)),
        lambda: store.nearest("t", unit_rows(1, 4, seed=9)[0], 5),
        lambda: store.delete("t", 0, 10),
    ):
        with pytest.raises(TransientError) as caught:
            call()
        error = caught.value
        assert error.transient and error.retryable
        assert error.code == "vector_database_unavailable"
        assert f"postgresql://intake@127.0.0.1:{port}/intake" in error.message
        assert "could not be reached" in error.message
        assert "s3cret" not in error.message and "Traceback" not in error.message
        assert error.__cause__ is None
    store.close()
    # A socket folder with no server in it (pgserver's URL form) reads as well.
    missing = VectorStore("postgresql://postgres:@/postgres?host=/nonexistent-intake-socket")
    with pytest.raises(TransientError) as caught:
        missing.nearest("t", unit_rows(1, 4, seed=9)[0], 5)
    assert "postgresql://postgres@/postgres?host=/nonexistent-intake-socket" in caught.value.message
