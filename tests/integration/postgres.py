"""A real PostgreSQL with pgvector for the tests: pgserver's, in a fresh temporary folder, started
once per session by the first test that asks for `postgres_url` and deleted at the end.

Nothing starts for a run whose tests do not ask for it. The folder comes from mkdtemp() rather
than pytest's tmp_path_factory because, as root, pgserver runs PostgreSQL as its own `pgserver`
user and opens every parent folder of the data to others (runner.postgres_service explains
why); pytest's /tmp/pytest-of-root is private and should stay so.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.postgres_service import LocalPostgres


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL (Unix socket, superuser `postgres`, pgvector created) of a session's PostgreSQL."""
    folder = Path(tempfile.mkdtemp(prefix="intake-postgres-"))
    server = LocalPostgres(folder / "data", delete=True)
    try:
        server.start()
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
