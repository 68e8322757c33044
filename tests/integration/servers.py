"""The real services the integration tests run: Redis, `rq worker` processes and the Procfile's web.

- `RedisServer`: a real `redis-server` on a free port, no snapshots, no AOF; `stop()` / `start()`
  restart it on the same port (with its data by default, or as a crash that loses it).
- `FakeRedisTcpServer`: the fallback when redis-server is not installed; not restartable, so a
  test that needs a restart is skipped with the reason.
- `WorkerPool`: `rq worker` processes built by `jobs.worker.workers.worker_command`, registered in
  Redis.
- `WebServer`: the Procfile's `web:` line as it is (gunicorn), on a free port.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
import redis
import requests
from redis.backoff import NoBackoff
from redis.retry import Retry

from jobs.worker.workers import worker_command
from runner.redis_service import server_argv
from tests.integration.helpers import free_port, poll
from tests.integration.processes import REPO_ROOT, ManagedProcess, ProcessGroup, base_env

REDIS_SERVER = shutil.which("redis-server")


def _fetch_unless_exited(proc: ManagedProcess, fetch):
    """Wrap a poll's fetch so that a process that died fails at once, with its log."""

    def checked():
        if not proc.running:
            raise AssertionError(f"{proc.name} exited with {proc.returncode}:\n{proc.tail()}")
        return fetch()

    return checked


class RedisServer:
    """A real redis-server process on 127.0.0.1:`port`."""

    restartable = True
    kind = "redis-server"
    skip_reason = ""

    def __init__(self, group: ProcessGroup, data_dir: Path, name: str = "redis-server") -> None:
        self.port = free_port()
        data_dir.mkdir(parents=True, exist_ok=True)
        argv = server_argv(
            self.port, data_dir, durable=False, executable=REDIS_SERVER or "redis-server"
        )
        self.process = group.spawn(name, argv, base_env(), start=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **kwargs) -> redis.Redis:
        """A new redis-py client of this server (bytes responses unless told otherwise)."""
        kwargs.setdefault("socket_timeout", 5)
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def _probe(self) -> redis.Redis:
        """A client that fails at once instead of retrying (redis-py retries 3 times by default)."""
        return self.client(socket_timeout=1, retry=Retry(NoBackoff(), 0))

    def start(self, timeout: float = 15.0) -> RedisServer:
        """Start (or restart, on the same port) and wait until it answers PING."""
        self.process.start()
        poll(
            _fetch_unless_exited(self.process, lambda: self._probe().ping()),
            timeout=timeout,
            message=f"redis-server on port {self.port} answering PING",
            ignore=(redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError),
        )
        return self

    def stop(self, persist: bool = True, timeout: float = 15.0) -> None:
        """Stop the server. persist=True: `SHUTDOWN SAVE`, so `start()` brings the same data back
        (a planned restart); persist=False: SIGKILL, everything is lost (a crash)."""
        if not self.process.running:
            return
        if persist:
            try:
                self._probe().shutdown(save=True)
            except redis.RedisError:
                pass
            self.process.stop(timeout)
        else:
            self.process.stop(timeout, sig=signal.SIGKILL)

    def close(self) -> None:
        self.process.stop(10)


class FakeRedisTcpServer:
    """fakeredis's TCP server in a daemon thread: real clients and real workers can use it, but
    it cannot be restarted, so `stop()` / `start()` after the first skip the calling test."""

    restartable = False
    kind = "fakeredis"
    skip_reason = (
        "redis-server is not installed: the integration tests run against fakeredis's "
        "TcpFakeServer, which cannot be stopped and restarted"
    )

    def __init__(self) -> None:
        self.port = free_port()
        self._server = None

    url = RedisServer.url
    client = RedisServer.client
    _probe = RedisServer._probe

    def start(self, timeout: float = 15.0) -> FakeRedisTcpServer:
        if self._server is not None:
            pytest.skip(self.skip_reason)
        from fakeredis import TcpFakeServer

        self._server = TcpFakeServer(("127.0.0.1", self.port))
        threading.Thread(
            target=self._server.serve_forever, name="fakeredis-tcp", daemon=True
        ).start()
        poll(
            lambda: self._probe().ping(),
            timeout=timeout,
            message="fakeredis TCP server answering PING",
            ignore=(redis.ConnectionError,),
        )
        return self

    def stop(self, persist: bool = True, timeout: float = 15.0) -> None:
        pytest.skip(self.skip_reason)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class WorkerPool:
    """Real `rq worker` processes on one Redis, each with a unique name."""

    def __init__(
        self,
        group: ProcessGroup,
        redis_url: str,
        env: Mapping[str, str],
        prefix: str = "itest",
        worker_class: str | None = None,
        url_from_env: bool = False,
    ) -> None:
        self.group, self.redis_url, self.env = group, redis_url, dict(env)
        self.url_from_env = url_from_env  # the Procfile's way: no --url, REDIS_* of `env`
        self.worker_class = worker_class  # None: the Procfile's (jobs.workers.IntakeWorker)
        self.prefix = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.processes: dict[str, ManagedProcess] = {}  # the current workers (stopped ones leave)
        self._started = 0

    @property
    def names(self) -> list[str]:
        """Names of the workers this pool started and has not stopped."""
        return list(self.processes)

    def registered(self) -> set[str]:
        """Names of the workers RQ lists as registered in Redis right now."""
        from rq import Worker

        from jobs.core.redis_client import connect

        return {w.name for w in Worker.all(connection=connect(self.redis_url))}

    def start(self, count: int = 1, timeout: float = 30.0) -> list[str]:
        """Start `count` more workers and wait until RQ lists every one; returns their names."""
        names = []
        for _ in range(count):
            self._started += 1
            name = f"{self.prefix}-{self._started}"
            argv = worker_command(None if self.url_from_env else self.redis_url, name=name)
            if self.worker_class is not None:
                argv[argv.index("--worker-class") + 1] = self.worker_class
            self.processes[name] = self.group.spawn(f"worker-{name}", argv, self.env)
            names.append(name)
        self.wait_registered(names, timeout)
        return names

    def wait_registered(self, names: list[str], timeout: float = 30.0) -> None:
        def fetch():
            for name in names:
                proc = self.processes[name]
                if not proc.running:
                    raise AssertionError(
                        f"worker {name} exited with {proc.returncode}:\n{proc.tail()}"
                    )
            return self.registered()

        poll(
            fetch,
            lambda seen: set(names) <= seen,
            timeout=timeout,
            message=f"workers {names} registered in RQ",
            ignore=(redis.ConnectionError,),
        )

    def ensure(self, count: int, timeout: float = 30.0) -> None:
        """Forget workers that exited, then start more until `count` run and are registered."""
        for name in [n for n, proc in self.processes.items() if not proc.running]:
            self.stop(name)
        if len(self.processes) < count:
            self.start(count - len(self.processes), timeout)

    def stop(self, name: str, timeout: float = 20.0) -> int | None:
        """Stop one worker (SIGTERM: RQ's warm shutdown, the current job finishes first)."""
        return self.processes.pop(name).stop(timeout)

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.stop(name)


_VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}|\$(\w+)")


def procfile_command(
    process_type: str, variables: Mapping[str, str], procfile: Path = REPO_ROOT / "Procfile"
) -> tuple[list[str], dict[str, str]]:
    """The argv of the Procfile's `process_type:` line with $VAR / ${VAR} / ${VAR:-default}
    expanded from `variables` (as the shell would), and any leading VAR=value assignments."""
    for line in procfile.read_text().splitlines():
        kind, sep, command = line.partition(":")
        if sep and kind.strip() == process_type and not kind.lstrip().startswith("#"):
            break
    else:
        raise AssertionError(f"{procfile} has no '{process_type}:' line")
    expanded = _VAR.sub(
        lambda m: variables.get(m.group(1) or m.group(3), m.group(2) or ""), command
    )
    argv = shlex.split(expanded)
    if argv and argv[0] == "exec":
        argv = argv[1:]
    assignments: dict[str, str] = {}
    while argv and re.fullmatch(r"\w+=.*", argv[0]):
        key, _, value = argv.pop(0).partition("=")
        assignments[key] = value
    return argv, assignments


class WebServer:
    """The Procfile's web process, exactly as a Procfile host would run it, on a free port."""

    def __init__(self, group: ProcessGroup, env: Mapping[str, str]) -> None:
        self.port = free_port()
        env = {**env, "PORT": str(self.port)}
        argv, assignments = procfile_command("web", env)
        self.process = group.spawn("web", argv, {**env, **assignments}, start=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> WebServer:
        """Start (or restart) and wait until GET /api/health answers, whatever its status."""
        self.process.start()
        poll(
            _fetch_unless_exited(
                self.process, lambda: requests.get(f"{self.url}/api/health", timeout=2)
            ),
            lambda response: response is not None,
            timeout=timeout,
            message=f"web answering GET {self.url}/api/health",
            ignore=(requests.ConnectionError, requests.Timeout),
        )
        return self

    def stop(self, timeout: float = 35.0) -> int | None:
        """SIGTERM (gunicorn's graceful shutdown), SIGKILL after `timeout` s."""
        return self.process.stop(timeout)

    def restart(self) -> WebServer:
        self.stop()
        return self.start()
