"""Real processes for the integration tests: start with an environment, log to files, stop.

Each process runs in its own session (process group) with cwd = the repository root, writes
stdout and stderr to one log file under the test's tmp dir, and is stopped the way a process
manager would: SIGTERM, a grace period, then SIGKILL of its group (so gunicorn's workers and an
rq worker's work-horse go too). `ProcessGroup.report()` returns the logs' tails for a failing test.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent  # not resolved: the venv's bin, where gunicorn lives

# Outer settings that would change what the tests exercise (another Redis, API keys, a remote
# embedder); the harness sets what it needs explicitly.
_SCRUBBED_PREFIXES = ("INTAKE_", "REDIS_URL", "SECRET_KEY", "FLASK_", "RQ_")


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """os.environ without Intake's own settings, with the venv first on PATH, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class ManagedProcess:
    """One subprocess with its log file; `start()` may be called again after `stop()`."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path,
                 cwd: Path = REPO_ROOT) -> None:
        self.name, self.argv, self.env, self.log_path, self.cwd = name, list(argv), dict(env), log_path, cwd
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def start(self) -> "ManagedProcess":
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== start {time.strftime('%H:%M:%S')}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        return self

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def send_signal(self, sig: int) -> None:
        """Send `sig` to this process only (not its group), e.g. SIGKILL for a crash test."""
        if self.running:
            self.popen.send_signal(sig)  # type: ignore[union-attr]

    def stop(self, timeout: float = 20.0, sig: int = signal.SIGTERM) -> int | None:
        """`sig` to the process, wait up to `timeout` s, then SIGKILL its whole group.
        Returns the exit code (None if it was never started)."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_group()
                self.popen.wait(10)
        self._kill_group()  # leftovers (a horse, a gunicorn worker) of an exited leader
        return self.popen.returncode

    def _kill_group(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)  # type: ignore[union-attr]
        except (ProcessLookupError, PermissionError):
            pass

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


class ProcessGroup:
    """The processes of one fixture; stops them all (in reverse start order) at teardown."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.processes: list[ManagedProcess] = []

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str],
              start: bool = True) -> ManagedProcess:
        proc = ManagedProcess(name, argv, env, self.log_dir / f"{name}.log")
        self.processes.append(proc)
        return proc.start() if start else proc

    def stop_all(self, timeout: float = 20.0) -> None:
        for proc in reversed(self.processes):
            proc.stop(timeout)

    def report(self, lines: int = 60) -> str:
        """The tail of every process's log, for a failing test's report."""
        parts = []
        for proc in self.processes:
            state = "running" if proc.running else f"exited {proc.popen.returncode if proc.popen else '-'}"
            parts.append(f"----- {proc.name} (pid {proc.pid}, {state}) {proc.log_path}\n{proc.tail(lines)}")
        return "\n".join(parts)
