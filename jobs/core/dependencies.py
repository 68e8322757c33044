"""Whether what Intake leans on besides the queue's Redis answers: the knowledge base's Redis
when it is apart, its read replicas, the store of originals. GET /api/health and /metrics read
it (docs/deploying.md, "Observability").

Why bounded: health is what load balancers poll, and a dependency that hangs (a store that
takes the connection and never answers) must not hang the poll. Every probe has a client of its
own with short timeouts (PROBE_SECONDS in all), all of them run at once, and the answer waits
PROBE_SECONDS at most: a probe still running then is reported down (`timeout`).

Why a result is kept for FRESH_SECONDS in each process: balancers poll every few seconds each,
and several of them poll every web process; without it every poll would send a PING to each
Redis and a HEAD to the bucket (a billed request on S3), and while the store hangs every poll
would hold a probe of its own for its whole timeout. With it, a process probes each dependency
at most once per FRESH_SECONDS, and polls that come while a probe runs wait for that one. Only
the probes' results are kept: the queue's state (workers, depths) is read at every poll.

A probe reports why it failed in a word or two (`timeout`, `unreachable`, `missing`, an S3
error code), never its exception's text: that may carry an address or a key, and health is
read without credentials.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

#: How long one probe may take, connection and answer together, and what a poll waits at most.
PROBE_SECONDS = 1.0
#: How long a probe's result stands in for a new probe, in one process.
FRESH_SECONDS = 1.0


class ProbeFailed(Exception):
    """A dependency answered, and not as it should: `reason` says how, in words safe to show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Check:
    """One dependency as a probe found it; `error` says why it is down."""

    up: bool
    latency_seconds: float
    error: str | None = None

    def view(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"up": self.up, "latency_ms": round(self.latency_seconds * 1000, 2)}
        if self.error:
            shown["error"] = self.error
        return shown


def timed(probe: Callable[[], object]) -> Check:
    """Run `probe` (it raises when the dependency does not answer as it should)."""
    started = time.perf_counter()
    try:
        probe()
    except Exception as exc:  # any failure is the dependency's state, not the poll's error
        return Check(False, time.perf_counter() - started, reason(exc))
    return Check(True, time.perf_counter() - started)


def reason(exc: BaseException) -> str:
    """Why a probe failed, in words that carry no address, key or name of the caller's."""
    if isinstance(exc, ProbeFailed):
        return exc.reason
    kind = type(exc).__name__
    if "Timeout" in kind or isinstance(exc, TimeoutError):
        return "timeout"
    if "Connection" in kind or isinstance(exc, OSError):
        return "unreachable"
    return kind


def blocking(call: Callable[[], T]) -> T:
    """`call`, which may block in a system call (a stat of a directory on an NFS mount whose
    server is gone), on an OS thread of gevent's pool when gevent patched this process (the
    web's workers): there a probe's thread is a greenlet, and a system call that hangs would hold
    every greenlet of the process, the poll's wait for its deadline included. Elsewhere the probe
    already runs in a thread of its own: `call` runs there."""
    if "gevent" in sys.modules:
        from gevent import get_hub, monkey

        if monkey.is_module_patched("threading"):
            return get_hub().threadpool.apply(call)
    return call()


class Probes:
    """Named probes, run at once in threads of their own (greenlets under the web's gevent)."""

    def __init__(
        self,
        probes: Mapping[str, Callable[[], object]],
        *,
        timeout: float = PROBE_SECONDS,
        fresh_for: float = FRESH_SECONDS,
    ) -> None:
        self.probes = dict(probes)
        self.timeout, self.fresh_for = timeout, fresh_for
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, Check]] = {}
        self._running: dict[str, tuple[float, Future[Check]]] = {}

    def check(self) -> dict[str, Check]:
        """Every probe's Check, each at most `fresh_for` old, within `timeout`."""
        return self.begin().results()

    def begin(self) -> Checking:
        """Start the probes whose result is not fresh; the caller does its own work meanwhile
        (health reads the queue's Redis) and then asks the Checking for the results."""
        now = time.monotonic()
        found: dict[str, Check] = {}
        waiting: dict[str, tuple[float, Future[Check]]] = {}
        with self._lock:
            for name in self.probes:
                last = self._last.get(name)
                if last is not None and now - last[0] < self.fresh_for:
                    found[name] = last[1]
                else:
                    waiting[name] = self._running.get(name) or self._start(name, now)
        return Checking(list(self.probes), found, waiting, now + self.timeout)

    def _start(self, name: str, now: float) -> tuple[float, Future[Check]]:
        future: Future[Check] = Future()
        self._running[name] = (now, future)

        def run() -> None:
            result = timed(self.probes[name])
            with self._lock:
                self._last[name] = (time.monotonic(), result)
                self._running.pop(name, None)
            future.set_result(result)

        threading.Thread(target=run, name=f"intake-probe-{name}", daemon=True).start()
        return self._running[name]


@dataclass
class Checking:
    """Probes under way (`Probes.begin`)."""

    names: list[str]
    found: dict[str, Check]
    waiting: dict[str, tuple[float, Future[Check]]]
    deadline: float

    def results(self) -> dict[str, Check]:
        """Each probe's Check by the deadline; one still running then is down (`timeout`)."""
        for name, (started, future) in self.waiting.items():
            try:
                self.found[name] = future.result(timeout=max(0.0, self.deadline - time.monotonic()))
            except FutureTimeout:
                self.found[name] = Check(False, time.monotonic() - started, "timeout")
        self.waiting = {}
        return {name: self.found[name] for name in self.names}
