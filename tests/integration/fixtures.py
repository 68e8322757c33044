"""Fixtures of the integration (and browser) tests: real Redis, real `rq worker` processes, the
Procfile's web (gunicorn), and a real HTTP embeddings server.

A plugin, registered by the root tests/conftest.py, so that tests/integration and tests/browser
share ONE set of session processes in a run; the fixtures start nothing until a test asks.

Session fixtures (one system for the whole run; each test makes its own batch, so order does not
matter; Redis is never flushed while workers run):
- `redis_server`  `.url`, `.port`, `.client()`, `.stop(persist=True)`, `.start()`, `.restartable`
                  (False on the fakeredis fallback: `stop()`/`start()` then skip the test).
- `intake_env`    the environment web and workers share (REDIS_URL, SECRET_KEY, quick retries).
- `worker_pool`   the session's `WorkerPool` as it is (for module fixtures; call `.ensure(2)`).
- `workers`       (function scope) the session's `WorkerPool`, topped up to 2 running registered
                  workers before each test: `.names`, `.processes`, `.registered()`, `.start(n)`,
                  `.stop(name)`, `.ensure(n)`.
- `web`           `WebServer`: `.url`, `.port`, `.stop()`, `.start()`, `.restart()`, `.process`.
Function fixtures:
- `api`           an `ApiClient` (requests.Session, relative URLs) on the running web + workers.
- `embedding_server` the `EmbeddingServer` (see embedding_server.py), reset to mode "ok".
- `make_workers`  `make_workers(count, **env)`: extra workers with extra env, stopped after the
                  test (they share the queues with `workers`).
- `fault`         (function scope) the module's `Stack` for fault injection (below), topped up to 2
                  running registered workers, with the embedding server reset to mode "ok".
Stacks of their own: `start_stack(redis_server, tmp_path_factory, name, database, env, …)` starts
a web and workers on another logical database (a module fixture's; `stop_stack` stops them).
Session fixture, shared by the failure tests of every module:
- `fault_stack`   an isolated `Stack`: its own logical Redis database (DB 1: its own queues,
                  tasks, workers and scheduler), its own Procfile web and 2 workers, all using the
                  real HTTP `embedding_server` (FAULT_ENV: a short timeout, 3 attempts, a 2 s retry
                  base), so the session's workers (local embedder, DB 0) never see these jobs.
                  `.url` (web), `.web`, `.workers`, `.redis_url`, `.redis()`, `.env`, `.embedding`.
A failing test that used these fixtures gets the tail of every process's log in its report.
Set INTAKE_ITEST_FAKEREDIS=1 to force the fakeredis fallback.
"""

from __future__ import annotations

import atexit
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from tests.integration.embedding_server import EmbeddingServer
from tests.integration.helpers import ApiClient
from tests.integration.processes import REPO_ROOT, ProcessGroup, base_env
from tests.integration.servers import (
    REDIS_SERVER,
    FakeRedisTcpServer,
    RedisServer,
    WebServer,
    WorkerPool,
)

SECRET_KEY = "integration-test-secret-key-not-for-production"
_GROUPS: list[ProcessGroup] = []


def _use_fakeredis() -> bool:
    return REDIS_SERVER is None or os.environ.get("INTAKE_ITEST_FAKEREDIS") == "1"


def _group(tmp_path_factory: pytest.TempPathFactory, name: str) -> ProcessGroup:
    group = ProcessGroup(tmp_path_factory.mktemp(f"logs-{name}"))
    _GROUPS.append(group)
    return group


@atexit.register
def _stop_leftovers() -> None:  # belt and braces if a teardown never ran
    for group in _GROUPS:
        group.stop_all(timeout=5)


def pytest_report_header(config: pytest.Config) -> str:
    if _use_fakeredis():
        return (
            "integration: !!! NO redis-server: using fakeredis TcpFakeServer "
            "(not durable, not restartable; restart tests are skipped) !!!"
        )
    return f"integration: redis-server {REDIS_SERVER}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed and "redis_server" in getattr(item, "fixturenames", ()):
        for group in _GROUPS:
            if group.processes:
                report.sections.append((f"process logs ({group.log_dir.name})", group.report()))
    return report


@pytest.fixture(scope="session")
def redis_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RedisServer | FakeRedisTcpServer]:
    if _use_fakeredis():
        banner = (
            "\n"
            + "!" * 78
            + "\n!!! redis-server is NOT installed (or INTAKE_ITEST_FAKEREDIS=1): the "
            "integration tests\n!!! run on fakeredis's TcpFakeServer; "
            "Redis restart tests are SKIPPED.\n" + "!" * 78 + "\n"
        )
        print(banner, file=sys.__stderr__, flush=True)
        warnings.warn(
            "integration tests use the fakeredis TCP fallback, not a real redis-server",
            stacklevel=1,
        )
        server: RedisServer | FakeRedisTcpServer = FakeRedisTcpServer()
    else:
        group = _group(tmp_path_factory, "redis")
        server = RedisServer(group, tmp_path_factory.mktemp("redis-data"))
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def intake_env(redis_server) -> dict[str, str]:
    """What web and workers share: one Redis, one secret, quick retries (names:
    docs/architecture.md §19)."""
    return base_env(
        {
            "REDIS_URL": redis_server.url,
            "SECRET_KEY": SECRET_KEY,
            "INTAKE_RETRY_BASE_SECONDS": "1",
            "INTAKE_MAX_ATTEMPTS": "2",
        }
    )


@pytest.fixture(scope="session")
def worker_pool(redis_server, intake_env, tmp_path_factory) -> Iterator[WorkerPool]:
    pool = WorkerPool(_group(tmp_path_factory, "workers"), redis_server.url, intake_env)
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture
def workers(worker_pool: WorkerPool) -> WorkerPool:
    """The session's pool, topped up to 2 running, registered workers before every test (a test
    may stop some: the next one still starts with two)."""
    worker_pool.ensure(2)
    return worker_pool


@pytest.fixture(scope="session")
def web(redis_server, intake_env, tmp_path_factory) -> Iterator[WebServer]:
    if not (REPO_ROOT / "Procfile").exists():
        pytest.fail("no Procfile at the repository root: the web fixture runs its 'web:' line")
    server = WebServer(_group(tmp_path_factory, "web"), intake_env)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def api(web, workers) -> Iterator[ApiClient]:
    """A client of the whole running system (web + 2 workers + Redis)."""
    with ApiClient(web.url) as client:
        yield client


@pytest.fixture(scope="session")
def _embedding_server() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer()
    yield server
    server.close()


@pytest.fixture
def embedding_server(_embedding_server: EmbeddingServer) -> EmbeddingServer:
    _embedding_server.reset()
    return _embedding_server


@pytest.fixture
def make_workers(redis_server, intake_env, tmp_path_factory) -> Iterator:
    pools: list[WorkerPool] = []

    def start(count: int = 1, **env: str) -> WorkerPool:
        pool = WorkerPool(
            _group(tmp_path_factory, "extra-workers"),
            redis_server.url,
            {**intake_env, **env},
            prefix="itest-extra",
        )
        pools.append(pool)
        pool.start(count)
        return pool

    yield start
    for pool in pools:
        pool.stop_all()


# What the fault stack's web and workers share on top of the basics. The embedding timeout is
# short, yet longer than the "slow:<s>" delays the tests use to keep a task `running` (hang past
# it to test a timeout); a retry base of 2 s makes the backoff's growth measurable.
FAULT_ENV = {
    "INTAKE_EMBEDDING_TIMEOUT": "4",
    "INTAKE_MAX_ATTEMPTS": "3",
    "INTAKE_RETRY_BASE_SECONDS": "2",
    "INTAKE_SEARCH_EMBEDDING_TIMEOUT": "1",
    "INTAKE_SEARCH_BREAKER_SECONDS": "3",
}


@dataclass
class Stack:
    """A web and workers of their own on one logical Redis database, sharing the session's
    redis-server (so a restart of that server restarts this stack's Redis too)."""

    redis_url: str
    env: dict[str, str]
    web: WebServer
    workers: WorkerPool
    embedding: EmbeddingServer
    _client: redis.Redis | None = None

    @property
    def url(self) -> str:
        return self.web.url

    def redis(self) -> redis.Redis:
        """A client of the stack's database (one per stack, reconnecting after a restart)."""
        if self._client is None:
            self._client = redis.Redis.from_url(self.redis_url, socket_timeout=5)
        return self._client


def start_stack(
    redis_server,
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    database: int,
    env: dict[str, str],
    *,
    embedding: EmbeddingServer,
    workers: int = 2,
    worker_class: str | None = None,
    web_redis_url: str | None = None,
) -> Stack:
    """A web and `workers` workers of their own on logical database `database` of the session's
    redis-server, emptied first (nothing else uses it). `web_redis_url` points the web elsewhere
    (a fault-injecting proxy in front of the same database); `worker_class` replaces the
    Procfile's worker class (RQ's SimpleWorker, which ignores the stop command)."""
    redis_url = f"{redis_server.url.rsplit('/', 1)[0]}/{database}"
    redis.Redis.from_url(redis_url).flushdb()
    full_env = base_env({"REDIS_URL": redis_url, "SECRET_KEY": SECRET_KEY, **env})
    web = WebServer(
        _group(tmp_path_factory, f"{name}-web"),
        {**full_env, "REDIS_URL": web_redis_url or redis_url},
    )
    pool = WorkerPool(
        _group(tmp_path_factory, f"{name}-workers"),
        redis_url,
        full_env,
        prefix=f"itest-{name}",
        worker_class=worker_class,
    )
    try:
        web.start()
        if workers:
            pool.start(workers)
    except BaseException:
        pool.stop_all()
        web.stop()
        raise
    return Stack(redis_url, full_env, web, pool, embedding)


def stop_stack(stack: Stack) -> None:
    stack.workers.stop_all()
    stack.web.stop()


@contextmanager
def running_stack(*args: Any, **kwargs: Any) -> Iterator[Stack]:
    """`start_stack`'s stack, stopped at the end of the block."""
    started = start_stack(*args, **kwargs)
    try:
        yield started
    finally:
        stop_stack(started)


@pytest.fixture(scope="session")
def fault_stack(redis_server, _embedding_server, tmp_path_factory, postgres_url) -> Iterator[Stack]:
    """The HTTP embedder's stack: its dense vectors in the session's PostgreSQL (pgvector)."""
    with running_stack(
        redis_server,
        tmp_path_factory,
        "fault",
        1,
        {
            "INTAKE_EMBEDDING_URL": _embedding_server.url,
            **FAULT_ENV,
            "INTAKE_VECTOR_DATABASE_URL": postgres_url,
        },
        embedding=_embedding_server,
    ) as stack:
        yield stack


@pytest.fixture
def fault(fault_stack: Stack, embedding_server: EmbeddingServer) -> Stack:
    """The fault stack with 2 running registered workers (a test may kill some) and the embedding
    server back in mode "ok"."""
    fault_stack.workers.ensure(2)
    return fault_stack
