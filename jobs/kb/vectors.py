"""Dense embedding vectors in PostgreSQL with pgvector: written by workers, searched by web
processes, never copied into either.

Why PostgreSQL + pgvector: it is an engine operators already run (managed, replicated, backed
up), the same client code below runs against `pgserver` (PostgreSQL 16 + pgvector inside a pip
wheel, for `make run` and the tests) and against production, and read replicas or partitioning
scale it out. Redis stays the queue and the default store; the local (sparse) embedder never
comes here.

Layout: one table per dimension, ``intake_vectors_<dim>`` (tenant text, chunk bigint, embedding
vector(dim), primary key (tenant, chunk)), each with an HNSW index over cosine distance. A table
and its index are created on first use, under an advisory lock, so that concurrent first writes
of several workers do not race on the catalog. pgvector's HNSW indexes at most 2,000 dimensions
of `vector`: a wider table gets no HNSW index and is searched exactly (correct, slower).

Why no `pgvector` Python package: writes go in one binary COPY whose rows are built by a numpy
structured array (one vectorised conversion, no per-row Python, so 10,000 rows take
milliseconds to encode), and the single query vector is sent as a text literal ``'[…]'``
cast to ``vector``. That is all the adapter would do for us, so it is one dependency less.

Connections: one psycopg connection per store, opened on first use and guarded by a lock. Web
processes run gevent; psycopg 3 (≥ 3.1.14) waits cooperatively once gevent has monkey-patched
the process, and the lock is then a gevent lock (so build the store after patching, as
gunicorn's gevent worker does before it loads the app). An RQ work-horse is a fork: a store
inherited across a fork opens a fresh connection and never touches (or closes) the parent's.
Failures to reach PostgreSQL raise `TransientError` (a pipeline attempt retries, a search says
the service is unavailable); a server without pgvector or a role that may not create it raises
`PermanentError` that a person fixes, then retries. This module is pure: no rq, redis or flask.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import psycopg
from psycopg import sql

from jobs.core.addresses import display_url
from jobs.core.failures import PermanentError, TransientError

log = logging.getLogger("intake.vectors")

T = TypeVar("T")

TABLE_PREFIX = "intake_vectors_"
TABLE_PATTERN = re.compile(r"^intake_vectors_([0-9]+)$")
#: pgvector's HNSW limit for the `vector` type; wider tables are searched exactly.
HNSW_MAX_DIMENSION = 2000
#: pgvector's upper bound of hnsw.ef_search.
MAX_EF_SEARCH = 1000
#: Candidates the HNSW scan keeps at least (pgvector's default ef_search).
MIN_EF_SEARCH = 40
#: The advisory lock key (any constant bigint) that serialises this module's DDL.
DDL_LOCK = 7_310_402_117


def _vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form, ``[x,y,…]``; 9 significant digits round-trip a float32."""
    return "[" + ",".join(format(float(x), ".9g") for x in vector) + "]"


def _copy_rows(tenant: str, first: int, vectors: np.ndarray) -> bytes:
    """The rows (tenant, first + i, vectors[i]) in PostgreSQL's binary COPY format.

    Every row has the same layout (one tenant per call), so the whole payload is one numpy
    structured array: field count, then each field as a length and big-endian bytes; a vector
    is pgvector's binary form (int16 dimension, int16 zero, float4 × dimension).
    """
    count, dim = vectors.shape
    name = tenant.encode("utf-8")
    row = np.dtype(
        [
            ("fields", ">i2"),
            ("tenant_len", ">i4"),
            ("tenant", f"S{len(name)}"),
            ("chunk_len", ">i4"),
            ("chunk", ">i8"),
            ("vector_len", ">i4"),
            ("dim", ">i2"),
            ("unused", ">i2"),
            ("vector", ">f4", (dim,)),
        ]
    )
    rows = np.zeros(count, dtype=row)
    rows["fields"] = 3
    rows["tenant_len"] = len(name)
    rows["tenant"] = name
    rows["chunk_len"] = 8
    rows["chunk"] = np.arange(first, first + count, dtype=np.int64)
    rows["vector_len"] = 4 + 4 * dim
    rows["dim"] = dim
    rows["vector"] = vectors
    header = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
    return header + rows.tobytes() + (-1).to_bytes(2, "big", signed=True)


def nearest_query(dim: int) -> sql.Composed:
    """The search, parameters (query vector literal, tenant, limit). ORDER BY the distance
    itself, ascending, with a LIMIT: the shape pgvector's HNSW index answers."""
    return sql.SQL(
        "SELECT chunk, embedding <=> %s::vector AS distance FROM {} WHERE tenant = %s "
        "ORDER BY distance LIMIT %s"
    ).format(sql.Identifier(f"{TABLE_PREFIX}{dim}"))


class VectorStore:
    """Each tenant's chunk vectors, nearest-neighbour search over them, and their deletion."""

    def __init__(
        self, url: str, *, connect_timeout: float = 5.0, statement_timeout: float = 30.0
    ) -> None:
        """`url`: a postgresql:// URL (INTAKE_VECTOR_DATABASE_URL). Nothing connects until the
        first call; `statement_timeout` bounds every statement so a stuck server cannot hold a
        search or a worker forever."""
        self.url = url
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        self._lock = threading.Lock()
        self._connection: psycopg.Connection | None = None
        self._pid = 0
        # Connections inherited across a fork: kept referenced, never closed, because closing
        # one would end the parent's session on the server (libpq sends Terminate).
        self._inherited: list[psycopg.Connection] = []
        self._tables: set[int] = set()
        self._iterative_scan: bool | None = None

    # -- the API -------------------------------------------------------------------------------

    def write(self, tenant: str, first: int, vectors: np.ndarray) -> None:
        """Store `vectors` (n × dim, float32, L2-normalised) as chunks first, first+1, …

        Idempotent: a row that exists is overwritten (ON CONFLICT DO UPDATE), so a re-sent write
        after a lost reply or a retried attempt is harmless; a row already holding the same
        vector is left as it is, so a re-sent write adds nothing to the HNSW index. Rows go in
        one binary COPY to a temporary table, then one INSERT … SELECT into the dimension's
        table, in one transaction. The client's part takes ~0.1 s for 10,000 × 384; the HNSW
        index's maintenance on the server is the cost of a write (with pgserver's pgvector 0.6,
        milliseconds per row on a small machine; pgvector ≥ 0.8 inserts faster).
        """
        matrix = self._check_matrix(vectors)
        if not tenant:
            raise ValueError("tenant must not be empty")
        if first < 0:
            raise ValueError("chunk ids start at 0")
        count, dim = matrix.shape
        if count == 0:
            return
        payload = _copy_rows(tenant, first, matrix)
        table = sql.Identifier(f"{TABLE_PREFIX}{dim}")
        staging = sql.Identifier(f"{TABLE_PREFIX}load_{dim}")

        def run(connection: psycopg.Connection) -> None:
            self._ensure_table(connection, dim)
            with connection.transaction(), connection.cursor() as cursor:
                cursor.execute(
                    sql.SQL(
                        "CREATE TEMPORARY TABLE IF NOT EXISTS {} (tenant text, chunk bigint, "
                        "embedding vector({})) ON COMMIT DELETE ROWS"
                    ).format(staging, sql.Literal(dim))
                )
                with cursor.copy(
                    sql.SQL(
                        "COPY {} (tenant, chunk, embedding) FROM STDIN WITH (FORMAT BINARY)"
                    ).format(staging)
                ) as copy:
                    copy.write(payload)
                cursor.execute(
                    sql.SQL(
                        "INSERT INTO {} (tenant, chunk, embedding) SELECT tenant, chunk, embedding "
                        "FROM {} ON CONFLICT (tenant, chunk) DO UPDATE SET embedding = "
                        "EXCLUDED.embedding WHERE {}.embedding IS DISTINCT FROM EXCLUDED.embedding"
                    ).format(table, staging, table)
                )

        self._run(run)

    def nearest(self, tenant: str, query: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """This tenant's `limit` chunks closest to `query`: (chunk id, cosine similarity), best
        first. A dimension that has no table yet has no rows: [].

        The HNSW index answers (hnsw.ef_search ≥ limit). The tenant is a filter on the index's
        candidates, so a tenant owning a small share of a table could get fewer than `limit`
        rows: with pgvector ≥ 0.8, iterative index scans keep scanning until the filter is met;
        with an older pgvector (pgserver ships 0.6), a short answer is completed by an exact
        scan of the tenant's rows through the primary key.
        """
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        if limit <= 0 or vector.size == 0:
            return []
        if not np.all(np.isfinite(vector)):
            raise ValueError("the query vector has NaN or infinite values")
        dim = int(vector.size)
        literal = _vector_literal(vector)
        query_sql = nearest_query(dim)
        ef_search = min(max(limit, MIN_EF_SEARCH), MAX_EF_SEARCH)

        def run(connection: psycopg.Connection) -> list[tuple[int, float]]:
            if not self._table_exists(connection, dim):
                return []
            iterative = self._supports_iterative_scan(connection)
            with connection.transaction(), connection.cursor() as cursor:
                cursor.execute(
                    sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search))
                )
                if iterative:
                    cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                # Never a prepared statement: a cached plan ignores the settings above and the
                # values (a tenant's share of the table), which choose the plan.
                rows = cursor.execute(query_sql, (literal, tenant, limit), prepare=False).fetchall()
                if len(rows) < limit:
                    # Exact: the tenant's rows through the primary key, sorted by distance.
                    cursor.execute("SET LOCAL enable_indexscan = off")
                    rows = cursor.execute(
                        query_sql, (literal, tenant, limit), prepare=False
                    ).fetchall()
            return rows

        rows = self._run(run)
        # relaxed_order may return neighbours slightly out of order; a zero vector (a chunk
        # without words) has no cosine distance (NaN) and matches nothing.
        hits = [
            (int(chunk), 1.0 - float(distance))
            for chunk, distance in rows
            if distance is not None and not math.isnan(distance)
        ]
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        return hits[:limit]

    def delete(self, tenant: str, first: int, stop: int) -> None:
        """Remove this tenant's chunks first ≤ id < stop, in every dimension's table."""
        if stop <= first:
            return

        def run(connection: psycopg.Connection) -> None:
            with connection.transaction(), connection.cursor() as cursor:
                for dim in self._existing_dimensions(connection):
                    cursor.execute(
                        sql.SQL(
                            "DELETE FROM {} WHERE tenant = %s AND chunk >= %s AND chunk < %s"
                        ).format(sql.Identifier(f"{TABLE_PREFIX}{dim}")),
                        (tenant, first, stop),
                    )

        self._run(run)

    def close(self) -> None:
        """Close this process's connection (an inherited one is left to its owner)."""
        with self._lock:
            connection, self._connection = self._connection, None
            if connection is not None and self._pid == os.getpid():
                try:
                    connection.close()
                except psycopg.Error:
                    pass

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- connections and errors ----------------------------------------------------------------

    def _connect(self) -> psycopg.Connection:
        timeout_ms = max(1, int(self.statement_timeout * 1000))
        connection = psycopg.connect(
            self.url,
            autocommit=True,
            connect_timeout=max(1, math.ceil(self.connect_timeout)),
            application_name="intake",
        )
        connection.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(timeout_ms)))
        return connection

    def _acquire(self) -> psycopg.Connection:
        """This process's connection, (re)opened if it is missing, broken or inherited."""
        connection = self._connection
        if connection is not None and self._pid != os.getpid():
            self._inherited.append(connection)
            connection = self._connection = None
        if connection is not None and connection.closed:
            connection = self._connection = None
        if connection is None:
            connection = self._connect()
            self._connection, self._pid = connection, os.getpid()
        return connection

    def _discard(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except psycopg.Error:
                pass

    def _run(self, work: Callable[[psycopg.Connection], T]) -> T:
        """`work` on this process's connection; a connection that broke since its last use
        (a server restart, a failover) is replaced once, since every call here is safe to
        repeat; errors become Intake's readable ones."""
        with self._lock:
            for attempt in (1, 2):
                reused = self._connection is not None and self._pid == os.getpid()
                try:
                    connection = self._acquire()
                    return work(connection)
                except psycopg.OperationalError as exc:
                    self._discard()
                    if (
                        attempt == 1
                        and reused
                        and not isinstance(exc, psycopg.errors.QueryCanceled)
                    ):
                        log.info(
                            "vector database connection lost, reconnecting: %s", _first_line(exc)
                        )
                        continue
                    raise self._unavailable(exc) from None
                except psycopg.Error as exc:
                    raise self._rejected(exc) from None
            raise AssertionError("unreachable")

    def _unavailable(self, exc: psycopg.Error) -> TransientError:
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return TransientError(
                f"The vector database at {display_url(self.url)} did not answer within "
                f"{self.statement_timeout:g} s.",
                code="vector_database_unavailable",
            )
        return TransientError(
            f"The vector database at {display_url(self.url)} could not be reached "
            f"({_first_line(exc)}).",
            code="vector_database_unavailable",
        )

    def _rejected(self, exc: psycopg.Error) -> PermanentError:
        """An error that retrying the same call cannot fix: say what to do about it."""
        where = display_url(self.url)
        if isinstance(exc, (psycopg.errors.UndefinedFile, psycopg.errors.FeatureNotSupported)):
            problem = (
                f"The PostgreSQL at {where} has no pgvector extension. Install pgvector "
                "on it (INTAKE_VECTOR_DATABASE_URL), then Retry."
            )
        elif isinstance(exc, psycopg.errors.InsufficientPrivilege):
            problem = (
                f"The role of INTAKE_VECTOR_DATABASE_URL ({where}) may not do this: "
                f"{_first_line(exc)}. Run CREATE EXTENSION vector as an administrator "
                "or grant the role CREATE on its schema, then Retry."
            )
        else:
            problem = f"The vector database at {where} refused a request: {_first_line(exc)}"
        return PermanentError(problem, code="vector_database_rejected", retryable=True)

    # -- schema --------------------------------------------------------------------------------

    def _ensure_table(self, connection: psycopg.Connection, dim: int) -> None:
        """The extension, the dimension's table and its HNSW index, created once (IF NOT EXISTS,
        under a transaction-scoped advisory lock: concurrent creators queue, then find them)."""
        if dim in self._tables:
            return
        table = sql.Identifier(f"{TABLE_PREFIX}{dim}")
        with connection.transaction(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (DDL_LOCK,))
            if (
                cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
                is None
            ):
                cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
            cursor.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (tenant text NOT NULL, chunk bigint NOT NULL, "
                    "embedding vector({}) NOT NULL, PRIMARY KEY (tenant, chunk))"
                ).format(table, sql.Literal(dim))
            )
            if dim <= HNSW_MAX_DIMENSION:
                cursor.execute(
                    sql.SQL(
                        "CREATE INDEX IF NOT EXISTS {} ON {}"
                        " USING hnsw (embedding vector_cosine_ops)"
                    ).format(sql.Identifier(f"{TABLE_PREFIX}{dim}_hnsw"), table)
                )
            else:
                log.warning(
                    "%d-dimensional vectors: wider than pgvector's HNSW limit (%d), "
                    "searched exactly",
                    dim,
                    HNSW_MAX_DIMENSION,
                )
        self._tables.add(dim)

    def _table_exists(self, connection: psycopg.Connection, dim: int) -> bool:
        """Known tables are remembered; a missing one is asked again (another process may
        create it at any time)."""
        if dim in self._tables:
            return True
        row = connection.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f"{TABLE_PREFIX}{dim}",)
        ).fetchone()
        if row is not None and row[0]:
            self._tables.add(dim)
            return True
        return False

    def _existing_dimensions(self, connection: psycopg.Connection) -> list[int]:
        rows = connection.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema() "
            "AND c.relname ~ '^intake_vectors_[0-9]+$'"
        ).fetchall()
        dims = sorted(
            int(match.group(1)) for (name,) in rows if (match := TABLE_PATTERN.match(name))
        )
        self._tables.update(dims)
        return dims

    def _supports_iterative_scan(self, connection: psycopg.Connection) -> bool:
        """pgvector ≥ 0.8 has hnsw.iterative_scan (asked once per store)."""
        if self._iterative_scan is None:
            row = connection.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            version = (
                tuple(int(part) for part in re.findall(r"[0-9]+", row[0])[:2]) if row else (0, 0)
            )
            self._iterative_scan = version >= (0, 8)
        return self._iterative_scan

    @staticmethod
    def _check_matrix(vectors: np.ndarray) -> np.ndarray:
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or (matrix.shape[0] and matrix.shape[1] == 0):
            raise ValueError(f"vectors must be an (n, dim) matrix, not shape {matrix.shape}")
        if not np.all(np.isfinite(matrix)):
            raise ValueError("vectors have NaN or infinite values")
        return matrix


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:200]
