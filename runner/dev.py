"""`flask --app webapp dev`: Intake on one machine with one command (docs/architecture.md §2).

Redis (runner.redis_service), N `rq worker` processes kept alive by a supervisor thread, and the
web app in the main thread. Everything it starts, it stops: on Ctrl-C or SIGTERM the workers get
a warm shutdown (SIGKILL after 10 s), then Redis gets SIGTERM so that it flushes its AOF.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import redis
from flask import Flask
from rq import Worker
from werkzeug.serving import run_simple

from jobs import connect_redis, webhook_worker_command, worker_command
from runner import record
from runner.postgres_service import VECTOR_DATABASE_ENV, start_vector_database
from runner.processes import ManagedProcess, kill_sessions, stop_all
from runner.redis_service import (
    KB_URL_ENV,
    NOT_DURABLE_NOTICE,
    STOP_TIMEOUT,
    EmbeddedRedis,
    RedisBackend,
    RedisProcess,
    start_kb_redis,
    start_redis,
)

log = logging.getLogger("intake.dev")

PROJECT_ROOT = Path(__file__).resolve().parent.parent

KB_TOGETHER_NOTICE = (
    "Knowledge base: kept on the queue's Redis, which already holds one (this instance was made "
    "before the knowledge base had a Redis of its own; docs/deploying.md says how to move it)"
)


class WorkerSupervisor:
    """Keeps `count` `rq worker` processes running; a worker that exits is started again.

    Each start gets a fresh name because RQ refuses a name still registered by a live (or not
    yet expired) worker. A worker that dies young waits longer before its restart (1 s doubling
    to 30 s) so that a crash loop does not spin.
    """

    MAX_BACKOFF = 30.0
    HEALTHY_UPTIME = 30.0  # a worker that ran this long has its backoff reset

    def __init__(
        self,
        redis_url: str,
        count: int,
        env: Mapping[str, str],
        cwd: Path = PROJECT_ROOT,
        poll_interval: float = 0.5,
        command: Callable[..., list[str]] = worker_command,
        label: str = "intake-dev",
    ) -> None:
        self.redis_url = redis_url
        self.command, self.label = command, label  # what each slot runs, and its workers' names
        self.env = dict(env)
        self.cwd = cwd
        self.poll_interval = poll_interval
        self.restarts = 0
        self._workers: list[ManagedProcess | None] = [None] * count
        self._backoff = [1.0] * count
        self._restart_at = [0.0] * count
        self._sessions: set[int] = set()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="worker-supervisor", daemon=True)

    @property
    def pids(self) -> list[int]:
        return [w.pid for w in self._workers if w is not None and w.running and w.pid]

    def start(self) -> WorkerSupervisor:
        for slot in range(len(self._workers)):
            self._spawn(slot)
        self._thread.start()
        return self

    def _spawn(self, slot: int) -> ManagedProcess:
        suffix = f"-r{self.restarts}" if self.restarts else ""
        name = f"{self.label}-{slot}-{os.getpid()}{suffix}"
        worker = ManagedProcess(
            name, self.command(self.redis_url, name=name, quiet=True), self.env, cwd=self.cwd
        ).start()
        assert worker.pid is not None
        self._sessions.add(worker.pid)  # its own session: kill_sessions finds its horse too
        self._workers[slot] = worker
        return worker

    def _watch(self) -> None:
        while not self._stopping.wait(self.poll_interval):
            for slot, worker in enumerate(self._workers):
                if worker is not None and not worker.running:
                    self._on_exit(slot, worker)
                elif worker is None and time.monotonic() >= self._restart_at[slot]:
                    self._restart(slot)

    def _on_exit(self, slot: int, worker: ManagedProcess) -> None:
        # Its scheduler (same process group) would run forever, orphaned: stop it. An orphaned
        # work-horse (own group) finishes its job; stop() sweeps it up if it is still there.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker.pid or 0, signal.SIGTERM)
        now = time.monotonic()
        young = now - worker.started_at < self.HEALTHY_UPTIME
        delay = self._backoff[slot] if young else 1.0
        self._backoff[slot] = min(delay * 2, self.MAX_BACKOFF)
        self._restart_at[slot] = now + delay
        self._workers[slot] = None
        log.warning(
            "worker %s (pid %d) exited with code %s; restarting in %.0f s",
            worker.name,
            worker.pid,
            worker.returncode,
            delay,
        )
        self._deregister(worker.name)

    def _deregister(self, name: str) -> None:
        """RQ lists a killed worker until its key expires (worker TTL + 60 s); this one is
        known dead, so /api/health and the dashboard stop counting it at once."""
        try:
            with connect_redis(self.redis_url) as connection:
                worker = Worker.find_by_key(Worker.redis_worker_namespace_prefix + name, connection)
                if worker is not None:
                    worker.register_death()
        except redis.RedisError as exc:
            log.warning("could not deregister worker %s: %s", name, exc)

    def _restart(self, slot: int) -> None:
        self.restarts += 1
        try:
            worker = self._spawn(slot)
        except OSError as exc:
            self._restart_at[slot] = time.monotonic() + self.MAX_BACKOFF
            log.error("could not start a worker: %s", exc)
            return
        log.info("started worker %s (pid %d)", worker.name, worker.pid)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Warm shutdown (SIGTERM: finish the current job), SIGKILL after `timeout` seconds."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()
        live = [w for w in self._workers if w is not None]
        self._workers = [None] * len(self._workers)
        stop_all(live, timeout)
        leftovers = kill_sessions(self._sessions)
        if leftovers:
            log.warning("killed leftover worker processes (work-horses): %s", leftovers)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Where originals are kept; unset, the instance directory's `originals/` (jobs.core.object_store).
STORAGE_ENV = "INTAKE_STORAGE_URL"


def _say(text: str) -> None:
    """Print to the terminal; a closed pipe (`make run | tee` after Ctrl-C) must not stop the
    cleanup."""
    with contextlib.suppress(OSError):
        print(text, file=sys.stderr, flush=True)


def _configure_logging() -> None:
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s [dev] %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def start_services(
    stack: contextlib.ExitStack, workers: int, secret_key: str, instance_dir: Path
) -> tuple[RedisBackend, WorkerSupervisor]:
    """Redis, the vector database if the HTTP embedder needs one (runner.postgres_service),
    then the workers; each one's stop is pushed on `stack` as soon as it exists."""
    backend = start_redis(instance_dir / "redis")
    stack.callback(backend.stop)
    if isinstance(backend, EmbeddedRedis):
        _say(NOT_DURABLE_NOTICE)
    env = {**os.environ, "REDIS_URL": backend.url, "SECRET_KEY": secret_key}
    knowledge_base = start_kb_redis(instance_dir / "redis-kb", backend)
    if knowledge_base is not None:
        stack.callback(knowledge_base.stop)  # LIFO: after the workers, like the queue's
        env[KB_URL_ENV] = knowledge_base.url
        _say(f"Knowledge base: {knowledge_base.description}")
    elif isinstance(backend, RedisProcess):
        _say(KB_TOGETHER_NOTICE)
    if STORAGE_ENV not in env:  # made now: health names a store whose directory is missing down
        originals = instance_dir / "originals"
        originals.mkdir(parents=True, exist_ok=True)
        env[STORAGE_ENV] = originals.resolve().as_uri()
    vectors = start_vector_database(instance_dir / "postgres")
    if vectors is not None:
        stack.callback(vectors.stop)  # LIFO: after the workers, before Redis
        env[VECTOR_DATABASE_ENV] = vectors.url
        _say(f"Vector database: {vectors.description}")
    supervisor = WorkerSupervisor(backend.url, workers, env)
    stack.callback(supervisor.stop)  # LIFO: the workers stop before Redis
    supervisor.start()
    if env.get("INTAKE_WEBHOOK_URL"):  # events are recorded: a webhook worker delivers them
        webhooks = WorkerSupervisor(
            backend.url, 1, env, command=webhook_worker_command, label="intake-dev-webhooks"
        )
        stack.callback(webhooks.stop)
        webhooks.start()
        _say(
            f"Webhooks:  1 webhook worker (pid {webhooks.pids[0]}) sends events to "
            "INTAKE_WEBHOOK_URL"
        )
    return backend, supervisor


def run(
    app_factory: Callable[[Mapping[str, object]], Flask],
    host: str,
    port: int,
    workers: int,
    instance_dir: Path = record.INSTANCE_DIR,
) -> None:
    """Start Redis, the workers and the web app; on Ctrl-C or SIGTERM stop them all and return.

    SIGTERM and SIGHUP act like Ctrl-C. During the cleanup every stop signal is ignored, so a
    second Ctrl-C cannot cut it short and leave children behind; the cleanup is also registered
    with atexit for exits that skip the `finally` (it runs once: the stack empties itself).
    """
    _configure_logging()
    secret_key = os.environ.get("SECRET_KEY") or secrets.token_hex(32)
    key_source = (
        "SECRET_KEY from the environment"
        if os.environ.get("SECRET_KEY")
        else "made for this run, shared with the workers"
    )
    stack = contextlib.ExitStack()
    atexit.register(stack.close)
    previous = {s: signal.signal(s, _interrupt) for s in STOP_SIGNALS}
    try:
        backend, supervisor = start_services(stack, workers, secret_key, instance_dir)
        # for `flask ingest` in another terminal
        record.write(instance_dir, backend.url, supervisor.env.get(KB_URL_ENV, ""))
        stack.callback(record.remove, instance_dir)
        vectors = (
            {VECTOR_DATABASE_ENV: supervisor.env[VECTOR_DATABASE_ENV]}
            if supervisor.env.get(VECTOR_DATABASE_ENV)
            else {}
        )
        kb = {KB_URL_ENV: supervisor.env[KB_URL_ENV]} if supervisor.env.get(KB_URL_ENV) else {}
        app = app_factory(
            {
                **kb,
                "REDIS_URL": backend.url,
                "SECRET_KEY": secret_key,
                "INTAKE_LOCAL_MODE": True,
                STORAGE_ENV: supervisor.env[STORAGE_ENV],
                **vectors,
            }
        )
        base = f"http://{host}:{port}"
        _say(
            f"\nIntake dev runner\n  Web:       {base}/\n  Dashboard: {base}/rq\n"
            f"  Redis:     {backend.description}\n"
            f"  Knowledge: {supervisor.env.get(KB_URL_ENV) or 'on the same Redis'}\n"
            f"  Originals: {supervisor.env[STORAGE_ENV]}\n"
            f"  Workers:   {workers} (pids {supervisor.pids}), restarted if they exit\n"
            f"  Secret:    {key_source}\n"
            "  Stop with Ctrl-C.\n"
        )
        run_simple(host, port, app, threaded=True, use_reloader=False)
    except KeyboardInterrupt:
        pass
    finally:
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        _say("Stopping the workers, then Redis…")
        try:
            stack.close()
        finally:
            atexit.unregister(stack.close)
            for s, handler in previous.items():
                signal.signal(s, handler)
        _say("Stopped.")
