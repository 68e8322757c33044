"""Real processes for the integration tests, on the same process tools as the dev runner
(runner.processes): each child in its own session with cwd = the repository root, its output in
one log file under the test's tmp dir, stopped with SIGTERM, a grace period, then SIGKILL of
its group. `ProcessGroup.report()` returns the logs' tails for a failing test.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from runner.processes import ManagedProcess, free_port, stop_all
from tests.storage import ORIGINALS_URL

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent  # not resolved: the venv's bin, where gunicorn lives

# Outer settings that would change what the tests exercise (another Redis, API keys, a remote
# embedder); the harness sets what it needs explicitly.
_SCRUBBED_PREFIXES = ("INTAKE_", "REDIS_URL", "REDIS_SENTINEL", "SECRET_KEY", "FLASK_", "RQ_")

__all__ = ["REPO_ROOT", "ManagedProcess", "ProcessGroup", "base_env", "free_port"]


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """os.environ without Intake's own settings, with the venv first on PATH and the test
    run's store of originals, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    env["PYTHONUNBUFFERED"] = "1"
    env["INTAKE_STORAGE_URL"] = ORIGINALS_URL
    env.update(extra or {})
    return env


class ProcessGroup:
    """The processes of one fixture; stops them all at teardown."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.processes: list[ManagedProcess] = []

    def spawn(
        self, name: str, argv: Sequence[str], env: Mapping[str, str], start: bool = True
    ) -> ManagedProcess:
        proc = ManagedProcess(name, argv, env, self.log_dir / f"{name}.log", cwd=REPO_ROOT)
        self.processes.append(proc)
        return proc.start() if start else proc

    def stop_all(self, timeout: float = 20.0) -> None:
        stop_all(reversed(self.processes), timeout)

    def report(self, lines: int = 60) -> str:
        """The tail of every process's log, for a failing test's report."""
        parts = []
        for proc in self.processes:
            state = "running" if proc.running else f"exited {proc.returncode}"
            parts.append(
                f"----- {proc.name} (pid {proc.pid}, {state}) {proc.log_path}\n{proc.tail(lines)}"
            )
        return "\n".join(parts)
