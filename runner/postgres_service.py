"""The vector database of `flask --app webapp dev` and of the tests: PostgreSQL 16 with pgvector
from the `pgserver` wheel (nothing to install but requirements.txt).

The dev runner starts one only when the HTTP embedder is configured (INTAKE_EMBEDDING_URL) and
no INTAKE_VECTOR_DATABASE_URL names someone else's; the local (sparse) embedder never needs
PostgreSQL, so then nothing starts. Its data live under instance/postgres/ and survive a restart
of the runner; it listens on a Unix socket in that folder only (no TCP port), and its URL is
handed to the web app and the workers as INTAKE_VECTOR_DATABASE_URL.

Running as root (CI does): PostgreSQL refuses to run as root. pgserver handles it itself: when
the effective uid is 0 it creates a system user `pgserver` (useradd) if there is none, runs
initdb and pg_ctl as that user, chowns the data folder to it, and makes every parent folder of
the data folder and of its own binaries readable and traversable by others (chmod g+rx,o+rx),
so that user can reach them. Root's clients connect over the socket as the database superuser
`postgres` (trust authentication, socket only). Choose a data folder whose parents may be made
world-traversable: instance/ here, a fresh mkdtemp() folder in the tests (not pytest's
/tmp/pytest-of-root, which is private on purpose).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import psycopg

if TYPE_CHECKING:
    from pgserver import PostgresServer

log = logging.getLogger("intake.dev")

VECTOR_DATABASE_ENV = "INTAKE_VECTOR_DATABASE_URL"
EMBEDDING_URL_ENV = "INTAKE_EMBEDDING_URL"


def _import_pgserver() -> type[PostgresServer]:
    """pgserver, imported only when a server is started (the local embedder never imports it).
    Its import warns when XDG_RUNTIME_DIR is unset (root, CI) that it falls back to
    /tmp/runtime-<uid> for its lock file, which is fine: the warning is silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pgserver
    return pgserver.PostgresServer


def _prune_stale_handles(data_dir: Path) -> None:
    """Forget the pids of processes that died holding pgserver's handle on `data_dir`.

    pgserver stops the server when the last process holding a handle lets go, counted in
    .handle_pids.json; a runner that was SIGKILLed stays listed forever and the next run would
    then never stop the server it reused. Called under pgserver's inter-process lock file.
    """
    path = data_dir / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))


class LocalPostgres:
    """pgserver's PostgreSQL with its data in `data_dir`, pgvector created in its database.

    `delete=True` (the tests) removes the data folder when stopped; otherwise the data stay and
    the next start reuses them (or the server itself, if one is still running on them).
    """

    def __init__(self, data_dir: Path, *, delete: bool = False) -> None:
        self.data_dir = data_dir.resolve()
        self.delete = delete
        self.url = ""
        self.description = ""
        self._server: PostgresServer | None = None

    def start(self) -> LocalPostgres:
        server_class = _import_pgserver()
        import pgserver

        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        if self.data_dir.exists():
            import fasteners

            # The inter-process lock pgserver takes around its own reads of that file.
            with fasteners.InterProcessLock(server_class.lock_path):
                _prune_stale_handles(self.data_dir)
        try:
            server = pgserver.get_server(
                self.data_dir, cleanup_mode="delete" if self.delete else "stop"
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(
                f"PostgreSQL (pgserver) did not start in {self.data_dir}: {exc}. "
                f"Its log: {self.data_dir / 'log'}"
            ) from None
        self._server = server
        self.url = server.get_uri()
        try:
            # As the superuser, once: the store's own CREATE EXTENSION IF NOT EXISTS then finds it.
            with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as connection:
                connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
                version = connection.execute(
                    "SELECT current_setting('server_version'), "
                    "extversion FROM pg_extension "
                    "WHERE extname = 'vector'"
                ).fetchone()
        except BaseException:
            self.stop()
            raise
        server_version, vector_version = version if version else ("?", "?")
        self.description = (
            f"pgserver PostgreSQL {server_version} + pgvector {vector_version}, "
            f"socket and data in {self.data_dir}"
        )
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown) once no other process holds pgserver's handle."""
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(subprocess.CalledProcessError, OSError):
                server.cleanup()


def needs_vector_database(env: Mapping[str, str] = os.environ) -> bool:
    """The HTTP embedder is configured and no vector database is named: start one."""
    return bool(env.get(EMBEDDING_URL_ENV)) and not env.get(VECTOR_DATABASE_ENV)


def start_vector_database(
    data_dir: Path, env: Mapping[str, str] = os.environ
) -> LocalPostgres | None:
    """A local PostgreSQL for the dev runner when `needs_vector_database`, else None (the local
    embedder, or INTAKE_VECTOR_DATABASE_URL already set: the processes read it themselves)."""
    if not needs_vector_database(env):
        return None
    return LocalPostgres(data_dir).start()
