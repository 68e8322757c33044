"""The Redis of `flask --app webapp dev` (docs/architecture.md §2), and the redis-server command
line the tests and benchmarks start theirs with.

In order: the Redis named by REDIS_URL (someone else's: never started or stopped here); else a
private `redis-server` child on a free loopback port with AOF under instance/redis/, so tasks
survive a restart of the runner; else, with nothing installed, an embedded fakeredis server that
is NOT durable. The child runs in its own session (runner.processes): a terminal's Ctrl-C then
reaches only the runner, which stops Redis last, after the workers that still need it.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import redis

from jobs import knowledge_base_keys
from runner.processes import ManagedProcess, free_port

if TYPE_CHECKING:
    from fakeredis import TcpFakeServer

log = logging.getLogger("intake.dev")

STOP_TIMEOUT = 10.0
# Set INTAKE_DEV_NO_REDIS_SERVER=1 to use the embedded fakeredis even where redis-server is
# installed (to test the fallback, or for a throwaway run that must leave no data behind).
NO_REDIS_SERVER_ENV = "INTAKE_DEV_NO_REDIS_SERVER"


class RedisBackend(Protocol):
    url: str
    description: str

    def stop(self) -> None: ...


def wait_for_ping(url: str, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
    """Poll PING until Redis answers; RuntimeError if it dies first or `timeout` seconds pass."""
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                if client.ping():
                    return
            except redis.RedisError:
                pass  # not listening yet, or still loading its AOF
            if not alive():
                raise RuntimeError(f"Redis at {url} exited before it answered PING")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Redis at {url} did not answer PING within {timeout:.0f} s")
            time.sleep(0.05)
    finally:
        client.close()


class ExternalRedis:
    """The Redis named by REDIS_URL: someone else's, so it is neither started nor stopped."""

    def __init__(self, url: str, variable: str = "REDIS_URL") -> None:
        self.url = url
        self.description = f"{variable} from the environment ({url})"

    def stop(self) -> None:
        pass


def server_argv(
    port: int,
    data_dir: Path,
    *,
    durable: bool,
    executable: str = "redis-server",
    loglevel: str = "notice",
) -> list[str]:
    """A redis-server on loopback `port`, in the foreground, with its files in `data_dir`:
    AOF on when `durable` (the dev runner), no persistence at all otherwise (tests, benches)."""
    return [
        executable,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--daemonize",
        "no",
        "--appendonly",
        "yes" if durable else "no",
        "--dir",
        str(data_dir),
        "--save",
        "",
        "--loglevel",
        loglevel,
    ]


class RedisProcess:
    """A private `redis-server` child on a free loopback port, durable: AOF under `data_dir`."""

    def __init__(self, data_dir: Path, executable: str = "redis-server") -> None:
        self.data_dir = data_dir.resolve()
        self.executable = executable
        self.url = ""
        self.description = ""
        self._process: ManagedProcess | None = None

    def start(self, timeout: float = 30.0) -> RedisProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        self._process = ManagedProcess(
            "redis-server",
            server_argv(
                port, self.data_dir, durable=True, executable=self.executable, loglevel="warning"
            ),
        )
        self._process.start()
        self.url = f"redis://127.0.0.1:{port}/0"
        self.description = f"local redis-server at {self.url} (AOF in {self.data_dir})"
        try:
            wait_for_ping(
                self.url, timeout, alive=lambda: self._process is not None and self._process.running
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM first: redis-server then fsyncs its AOF before exiting."""
        process, self._process = self._process, None
        if process is not None:
            process.stop(STOP_TIMEOUT)


class EmbeddedRedis:
    """fakeredis served over TCP from a daemon thread: no install needed, and NOT durable."""

    def __init__(self) -> None:
        self.url = ""
        self.description = ""
        self._server: TcpFakeServer | None = None

    def start(self) -> EmbeddedRedis:
        from fakeredis import TcpFakeServer

        server = TcpFakeServer(("127.0.0.1", 0), server_type="redis")
        # Connection threads must not keep the interpreter alive if stop() is never reached.
        server.daemon_threads = True
        port = int(server.server_address[1])
        threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="fakeredis-server",
            daemon=True,
        ).start()
        self._server = server
        self.url = f"redis://127.0.0.1:{port}/0"
        self.description = f"embedded fakeredis at {self.url} (NOT durable)"
        wait_for_ping(self.url, 5.0)
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


def start_redis(data_dir: Path, env: Mapping[str, str] = os.environ) -> RedisBackend:
    """REDIS_SENTINELS or REDIS_URL if set, else a local redis-server if installed, else the
    embedded fakeredis."""
    if env.get("REDIS_SENTINELS"):
        from jobs import redis_sentinel_url

        return ExternalRedis(
            redis_sentinel_url(
                env["REDIS_SENTINELS"], env.get("REDIS_SENTINEL_MASTER") or "mymaster"
            ),
            "REDIS_SENTINELS",
        )
    if env.get("REDIS_URL"):
        return ExternalRedis(env["REDIS_URL"])
    executable = shutil.which("redis-server")
    if executable and env.get(NO_REDIS_SERVER_ENV, "") in ("", "0"):
        return RedisProcess(data_dir, executable).start()
    return EmbeddedRedis().start()


KB_URL_ENV = "INTAKE_KB_URL"


def start_kb_redis(
    data_dir: Path, queue: RedisBackend, env: Mapping[str, str] = os.environ
) -> RedisBackend | None:
    """The knowledge base's Redis, or None to keep it on the queue's (docs/deploying.md,
    "The knowledge base on a Redis of its own").

    Why apart: a search runs on a Redis core; on the queue's, even short script calls add up
    while a tenant searches hard, and every upload and poll waits behind them. So when the
    runner starts its own redis-server for the queue, it starts a second one for the knowledge
    base (AOF under `data_dir`). INTAKE_KB_URL, if set, is used as it is. Kept together: a queue
    Redis someone else runs (REDIS_URL: their choice), the embedded fakeredis, and an instance
    whose queue Redis already holds a knowledge base (made before the split: moving it is the
    operator's call, deploying.md says how)."""
    if env.get(KB_URL_ENV):
        return ExternalRedis(env[KB_URL_ENV], KB_URL_ENV)
    if not isinstance(queue, RedisProcess) or holds_knowledge_base(queue.url):
        return None
    return RedisProcess(data_dir, queue.executable).start()


def holds_knowledge_base(url: str) -> bool:
    """True when any knowledge base key is in that Redis."""
    with redis.Redis.from_url(url) as connection:
        found = connection.scan_iter(match=knowledge_base_keys(), count=10_000)
        return next(found, None) is not None


NOT_DURABLE_NOTICE = """
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
!!  Redis: an EMBEDDED FAKEREDIS (no REDIS_URL, and no redis-server on PATH   !!
!!  or INTAKE_DEV_NO_REDIS_SERVER=1). Its data is NOT durable: every task,    !!
!!  batch and document is LOST when this runner exits.                        !!
!!  Install redis-server (or set REDIS_URL) to keep them.                     !!
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
"""
