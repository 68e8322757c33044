"""The processes a benchmark runs: its own redis-server, the production-style gunicorn and
production-style `rq worker` processes.

Servers listen on free loopback ports, keep their files in a temporary directory and are stopped
when the `with` block ends, whatever happened inside it.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis
import requests
from rq import Worker

from jobs import worker_command
from runner.processes import free_port
from runner.redis_service import server_argv

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Where every benchmark process keeps originals (INTAKE_STORAGE_URL): one temporary directory
#: per run, removed at its end, never the repository's instance/. In memory (/dev/shm) where
#: there is one, as the benchmark's redis-server keeps its data in memory: the figures weigh
#: Intake's work, not a disk's. (A file's creation took 0.5 ms in this machine's /tmp and 17 µs
#: elsewhere on the same disk: docs/benchmarks.md, "Where the originals are kept".)
ORIGINALS = Path(
    tempfile.mkdtemp(
        prefix="intake-bench-originals-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
    )
)
atexit.register(shutil.rmtree, ORIGINALS, ignore_errors=True)


@dataclass(frozen=True)
class Services:
    redis_url: str
    base: str  # the web server's base URL
    redis_pid: int
    gunicorn_pid: int  # the master; its workers are its children
    workdir: Path  # temporary: logs of redis-server, gunicorn and workers


def cpu_seconds(pid: int, with_children: bool = False) -> float:
    """User + system CPU time of a live process (and of its live children) from /proc."""
    pids = [pid]
    if with_children:
        path = Path(f"/proc/{pid}/task/{pid}/children")
        pids += [int(p) for p in path.read_text().split()] if path.exists() else []
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    process: subprocess.Popen | None = None,
    log: Path | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise RuntimeError(f"{what}: process exited with {process.returncode}\n{tail}")
        try:
            if check():
                return
        except (OSError, redis.RedisError, requests.RequestException):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


def _stop(process: subprocess.Popen, timeout: float = 15.0) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def redis_server(workdir: Path) -> Iterator[tuple[str, int]]:
    """A throwaway redis-server (no snapshots, no AOF); yields its URL and pid."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    log = workdir / "redis.log"
    argv = server_argv(port, workdir, durable=False, executable=binary)
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        wait_until(client.ping, 15, f"redis-server on port {port}", process, log)
        yield f"redis://127.0.0.1:{port}/0", process.pid
    finally:
        _stop(process)


@contextmanager
def gunicorn(redis_url: str, workdir: Path) -> Iterator[tuple[str, int]]:
    """gunicorn serving bench.app:app (Intake plus the bare baselines) with the Procfile's web
    flags, read from it now, on a loopback port; yields its base URL and the master's pid."""
    port = free_port()
    log = workdir / "gunicorn.log"
    argv = shlex.split(procfile_command("web"))
    argv[0] = str(Path(sys.executable).parent / "gunicorn")
    argv[argv.index("--bind") + 1] = f"127.0.0.1:{port}"
    argv[-1] = "bench.app:app"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=web_env(redis_url), stdout=out, stderr=subprocess.STDOUT
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(base, "gunicorn", process, log)
        yield base, process.pid
    finally:
        _stop(process, 30)


def web_env(redis_url: str, **extra: str) -> dict[str, str]:
    """A benchmark web process's environment: none of the caller's INTAKE_* settings, its Redis,
    a SECRET_KEY of its own, the repository importable; plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTAKE_")}
    env.update(
        REDIS_URL=redis_url,
        SECRET_KEY="bench-" + os.urandom(16).hex(),
        PYTHONPATH=str(REPO_ROOT),
        INTAKE_STORAGE_URL=ORIGINALS.as_uri(),
        **extra,
    )
    return env


def wait_for_health(base: str, what: str, process: subprocess.Popen, log: Path) -> None:
    probe = requests.Session()
    probe.trust_env = False
    try:
        wait_until(
            lambda: probe.get(f"{base}/api/health", timeout=2).status_code == 200,
            60,
            f"{what} answering /api/health",
            process,
            log,
        )
    finally:
        probe.close()


@contextmanager
def services() -> Iterator[Services]:
    """Redis and the web server, both torn down at the end."""
    with tempfile.TemporaryDirectory(prefix="intake-bench-") as tmp:
        workdir = Path(tmp)
        with redis_server(workdir) as (redis_url, redis_pid):
            with gunicorn(redis_url, workdir) as (base, gunicorn_pid):
                yield Services(redis_url, base, redis_pid, gunicorn_pid, workdir)


def worker_env(redis_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a benchmark's worker: none of the caller's INTAKE_* settings, the
    repository importable (bench.noop for the baseline jobs), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTAKE_")}
    env.update(
        REDIS_URL=redis_url,
        PYTHONPATH=str(REPO_ROOT),
        PYTHONUNBUFFERED="1",
        INTAKE_STORAGE_URL=ORIGINALS.as_uri(),
    )
    env.update(extra or {})
    return env


@contextmanager
def workers(
    redis_url: str,
    count: int,
    workdir: Path,
    *,
    env: dict[str, str] | None = None,
    prefix: str = "bench",
) -> Iterator[list[int]]:
    """`count` production workers, started exactly as the Procfile's `worker:` line
    (jobs.worker.workers.worker_command: IntakeWorker, scheduler, heartbeat flags, Intake's three
    queues), each in its own process group; yields their pids once RQ lists all of them.
    Stopped with SIGTERM (RQ's warm shutdown), then SIGKILL of the group (a work-horse too)."""
    tag = f"{prefix}-{os.urandom(3).hex()}"
    names = [f"{tag}-{i + 1}" for i in range(count)]
    processes: list[tuple[subprocess.Popen, Path]] = []
    connection = redis.Redis.from_url(redis_url)
    try:
        for name in names:
            log = workdir / f"worker-{name}.log"
            with open(log, "wb") as out:
                processes.append(
                    (
                        subprocess.Popen(
                            worker_command(redis_url, name=name),
                            cwd=REPO_ROOT,
                            env=worker_env(redis_url, env),
                            stdout=out,
                            stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL,
                            start_new_session=True,
                        ),
                        log,
                    )
                )

        def registered() -> bool:
            for process, log in processes:
                if process.poll() is not None:
                    tail = log.read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"worker exited with {process.returncode}\n{tail}")
            return set(names) <= {w.name for w in Worker.all(connection=connection)}

        wait_until(registered, 60, f"{count} rq workers registered")
        yield [process.pid for process, _ in processes]
    finally:
        for process, _ in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process, _ in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
        connection.close()


def procfile_command(process_type: str = "web") -> str:
    """The command line of one process type in the repository's Procfile, as written there
    (read at each call: the Procfile is the source of truth, not a copy of its flags here)."""
    for raw in (REPO_ROOT / "Procfile").read_text().splitlines():
        name, sep, command = raw.partition(":")
        if sep and name.strip() == process_type and command.strip():
            return command.strip()
    raise RuntimeError(f"the Procfile has no `{process_type}:` line")


@contextmanager
def procfile_web(
    redis_url: str, workdir: Path, extra: dict[str, str] | None = None
) -> Iterator[tuple[str, int, str]]:
    """One `web:` process started exactly as the Procfile's `web:` line says, read now: the line
    through /bin/sh (as a Procfile runner does; `exec`, so the pid is gunicorn's master) with
    PORT set to a free port, the venv's bin first on PATH, and the environment `gunicorn()`
    gives (REDIS_URL, a SECRET_KEY, no INTAKE_* but those of `extra`). Yields its base URL,
    the master's pid and the line. Stopped with SIGINT (gunicorn's quick shutdown: the benchmark's
    streams are gone by then), then SIGKILL of its process group after 15 s."""
    line = procfile_command("web")
    port = free_port()
    log = workdir / "web.log"
    env = web_env(
        redis_url,
        PORT=str(port),
        PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        **(extra or {}),
    )
    with open(log, "wb") as out:
        process = subprocess.Popen(
            ["/bin/sh", "-c", f"exec {line}"],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(base, "the Procfile's web process", process, log)
        yield base, process.pid, line
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                # Not reaped yet, so the group's id is still this master's own.
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
