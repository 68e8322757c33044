"""Child processes started, watched and stopped the way a process manager would: one
implementation for the dev runner (`flask --app webapp dev`), the tests' harness and the
benchmarks.

Each child runs in its own session (so its process group holds what it forks, like an rq
worker's work-horse and scheduler, and a terminal's Ctrl-C reaches only the parent), with its
output in a log file or on the parent's terminal. Stopping is SIGTERM, a grace period, then
SIGKILL of the whole group; several children share one deadline.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

log = logging.getLogger("intake.processes")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the child binds it right after; a race we accept)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ManagedProcess:
    """One child with its argv and environment; `start()` may be called again after `stop()`.

    With `log_path` its stdout and stderr go to that file (appended, one header per start);
    without, to the parent's.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name, self.argv, self.log_path, self.cwd = name, list(argv), log_path, cwd
        self.env = dict(env) if env is not None else None
        self.popen: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    def start(self) -> ManagedProcess:
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        if self.log_path is None:
            self.popen = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        else:
            with open(self.log_path, "ab") as out:
                out.write(
                    f"\n=== start {time.strftime('%H:%M:%S')}: {' '.join(self.argv)}\n".encode()
                )
                out.flush()
                self.popen = subprocess.Popen(
                    self.argv,
                    env=self.env,
                    cwd=self.cwd,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
        self.started_at = time.monotonic()
        return self

    def send_signal(self, sig: int) -> None:
        """`sig` to this process only (not its group), e.g. SIGKILL for a crash test."""
        if self.popen is not None and self.running:
            self.popen.send_signal(sig)

    def stop(self, timeout: float = 20.0, sig: int = signal.SIGTERM) -> int | None:
        """`sig`, up to `timeout` s to exit, then SIGKILL of its group; returns the exit code
        (None if it was never started)."""
        stop_all([self], timeout, sig)
        return self.returncode

    def kill_group(self) -> None:
        if self.popen is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)

    def log_text(self) -> str:
        if self.log_path is None:
            return ""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def stop_all(
    processes: Iterable[ManagedProcess], timeout: float, sig: int = signal.SIGTERM
) -> None:
    """Stop several children at once: `sig` to each, one shared deadline, then SIGKILL of the
    groups of those still running and of the leftovers (a horse, a gunicorn worker) of those
    that exited."""
    started = [(p, p.popen) for p in processes if p.popen is not None]
    for process, popen in started:
        if process.running:
            with contextlib.suppress(ProcessLookupError):
                popen.send_signal(sig)
    deadline = time.monotonic() + timeout
    for process, popen in started:
        try:
            popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning(
                "%s (pid %s) still running after %.0f s: SIGKILL",
                process.name,
                process.pid,
                timeout,
            )
            process.kill_group()
            popen.wait(10)
        process.kill_group()


def kill_sessions(sids: set[int], sig: int = signal.SIGKILL) -> list[int]:
    """Signal every live process whose session is in `sids`, and return their pids.

    An rq work-horse leaves its worker's process group (RQ calls setpgrp) but never its
    session, so this finds it even once orphaned. Reads /proc (Linux); elsewhere it finds
    nothing and the process groups stop_all killed are all that is stopped.
    """
    found: list[int] = []
    if not sids or not os.path.isdir("/proc"):
        return found
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as stat:
                state, _ppid, _pgrp, session = stat.read().rpartition(")")[2].split()[:4]
            if int(session) in sids and state not in ("Z", "X"):
                os.kill(int(entry.name), sig)
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to signal
    return found
