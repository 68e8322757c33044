"""The embedding API's budget, shared by every worker and web process on every machine.

Why in Redis: INTAKE_EMBEDDING_RPM and INTAKE_EMBEDDING_CONCURRENCY hold for all processes
together (a per-worker limit, like Celery's rate_limit, multiplies with the workers), and a
Retry-After one process is given must stop the others too. Every decision is one Lua script
that reads the clock with Redis `TIME`, so the machines' clocks never matter:

- requests per minute: a sliding-window log, a sorted set of the admitted requests' times over
  the last WINDOW_SECONDS; a request goes while fewer than RPM are in it;
- requests in flight: a leased semaphore, a sorted set of holders scored by when their lease
  ends (the request's timeout and a margin), so the slot of a killed worker frees itself;
- a pause: a key whose TTL is the longest Retry-After any process was given (its value says
  which answer asked for it); no request of anyone goes while it lives;
- the largest batch the service took after refusing a larger one (jobs.embedding.embedders),
  for an hour.

With both limits 0 no script runs: a request costs one pipelined round trip (the pause and the
batch size). `WaitingGate` (the workers) sleeps until the budget lets a request go, telling
its caller what it waits for; `NowGate` (the search) takes a place only if one is free now.
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import redis
from redis import Redis

from jobs.core import keys, scripts
from jobs.core.settings import Settings
from jobs.embedding.embedders import BudgetUnavailable

WINDOW_SECONDS = 60.0
#: How long a concurrency slot outlives its request's timeout before it frees itself.
LEASE_MARGIN_SECONDS = 10.0
#: The longest sleep between two asks: a slot freed by another process is seen within it.
MAX_SLEEP_SECONDS = 1.0
#: How often a waiter asks again while every slot is taken (when one frees is unknown).
SLOT_POLL_SECONDS = 0.25
#: How long a batch size learnt from a refusal is kept (the service's limit may be raised).
BATCH_LIMIT_SECONDS = 3600

_ADMIT = scripts.load(__file__, "budget_admit")
_HOLD_OFF = scripts.load(__file__, "budget_hold_off")


@dataclass(frozen=True)
class Admission:
    """The budget's answer: `token` set when the request may go (it holds a slot until
    `release`), else `wait` seconds and the `reason` ('pause', 'rpm', 'concurrency')."""

    token: str | None
    wait: float = 0.0
    reason: str = ""
    batch_limit: int = 0
    paused_by: str = ""

    @property
    def admitted(self) -> bool:
        return self.token is not None


@dataclass(frozen=True)
class BudgetWait:
    """What a waiting request waits for, told to the caller once per ask."""

    reason: str
    wait: float  # seconds until the next ask may pass (for 'concurrency': a lease's end)
    waited: float  # seconds since this request began to wait
    text: str  # a sentence for the task's step_detail


class EmbeddingBudget:
    """The shared budget of one Redis (every process of an Intake installation)."""

    def __init__(
        self,
        connection: Redis,
        *,
        rpm: int = 0,
        concurrency: int = 0,
        lease_seconds: float = 30.0 + LEASE_MARGIN_SECONDS,
        window_seconds: float = WINDOW_SECONDS,
    ) -> None:
        self.connection = connection
        self.rpm = rpm
        self.concurrency = concurrency
        self.lease_ms = max(1, int(lease_seconds * 1000))
        self.window_ms = max(1, int(window_seconds * 1000))
        self._keys = (
            keys.embedding_window(),
            keys.embedding_holders(),
            keys.embedding_pause(),
            keys.embedding_batch_limit(),
        )

    @classmethod
    def from_settings(
        cls, connection: Redis, settings: Settings, timeout: float | None = None
    ) -> EmbeddingBudget:
        """The budget the settings set; a slot's lease is the request's `timeout` (the
        embedder's, INTAKE_EMBEDDING_TIMEOUT by default) twice over (a connect and a read)
        plus a margin."""
        timeout = settings.embedding_timeout if timeout is None else timeout
        return cls(
            connection,
            rpm=settings.embedding_rpm,
            concurrency=settings.embedding_concurrency,
            lease_seconds=2 * timeout + LEASE_MARGIN_SECONDS,
        )

    @property
    def limited(self) -> bool:
        return self.rpm > 0 or self.concurrency > 0

    def try_admit(self) -> Admission:
        """One ask: may a request go now? Admitted, it counts against both limits."""
        if not self.limited:
            return self._unlimited()
        token = uuid.uuid4().hex
        go, wait_ms, reason, limit, paused_by = _ADMIT(
            self.connection,
            keys=dict(zip(("log", "holders", "pause", "batch_limit"), self._keys)),
            args={
                "rpm_limit": self.rpm,
                "concurrency_limit": self.concurrency,
                "lease_ms": self.lease_ms,
                "window_ms": self.window_ms,
                "token": token,
            },
        )
        if go:
            return Admission(token, batch_limit=int(limit))
        return Admission(None, int(wait_ms) / 1000, _text(reason), paused_by=_text(paused_by))

    def _unlimited(self) -> Admission:
        window, holders, pause, batch_limit = self._keys
        with self.connection.pipeline(transaction=False) as pipe:
            pipe.pttl(pause)
            pipe.get(pause)
            pipe.get(batch_limit)
            paused_ms, paused_by, limit = pipe.execute()
        if paused_ms and paused_ms > 0:
            return Admission(None, paused_ms / 1000, "pause", paused_by=_text(paused_by or b""))
        return Admission("", batch_limit=int(limit or 0))

    def release(self, admission: Admission) -> None:
        """The request is over: its slot is free. A Redis that cannot be reached now leaves it
        to expire with its lease, which is what the lease is for."""
        if self.concurrency > 0 and admission.token:
            with contextlib.suppress(redis.RedisError):
                self.connection.zrem(self._keys[1], admission.token)

    def hold_off(self, seconds: float, reason: str) -> None:
        """No request of anyone for `seconds` (the longest pause asked for wins)."""
        if seconds > 0:
            _HOLD_OFF(
                self.connection,
                keys={"pause": self._keys[2]},
                args={"ms": math.ceil(seconds * 1000), "asked_by": reason},
            )

    def limit_batch(self, size: int) -> None:
        self.connection.set(self._keys[3], max(1, int(size)), ex=BATCH_LIMIT_SECONDS)

    def describe(self, admission: Admission, waited: float) -> str:
        """What a person reads while a request waits on `admission`."""
        if admission.reason == "pause":
            by = f" ({admission.paused_by})" if admission.paused_by else ""
            return (
                f"Waiting for the embedding service, which asked for a pause{by}: "
                f"{math.ceil(admission.wait)} s"
            )
        if admission.reason == "rpm":
            return (
                f"Waiting for the embedding budget ({self.rpm} requests/min): "
                f"{math.ceil(admission.wait)} s"
            )
        slots = "1 request" if self.concurrency == 1 else f"{self.concurrency} requests"
        return f"Waiting for the embedding budget ({slots} at a time): {int(waited)} s so far"


class WaitingGate:
    """A worker's gate (jobs.embedding.embedders.Gate): waits as long as the budget says, telling
    `on_wait` what it waits for (None once the wait is over), never past `deadline`
    (a `clock()` value): a wait that would end after it raises BudgetUnavailable instead, so
    that the attempt fails readably before RQ's job timeout kills it."""

    def __init__(
        self,
        budget: EmbeddingBudget,
        *,
        on_wait: Callable[[BudgetWait | None], None] | None = None,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.budget = budget
        self.on_wait = on_wait or (lambda wait: None)
        self.deadline = deadline
        self.clock = clock
        self.sleep = sleep

    @contextlib.contextmanager
    def admit(self) -> Iterator[int]:
        began = self.clock()
        waited = False
        while True:
            admission = self.budget.try_admit()
            if admission.admitted:
                break
            now = self.clock()
            text = self.budget.describe(admission, now - began)
            # A slot frees when its holder's request ends, most often long before its lease.
            ends = now + (
                SLOT_POLL_SECONDS if admission.reason == "concurrency" else admission.wait
            )
            if self.deadline is not None and ends > self.deadline:
                raise BudgetUnavailable(
                    f"{text}: longer than this attempt has left (INTAKE_JOB_TIMEOUT). The "
                    f"batches embedded so far are kept; the next attempt goes on from there.",
                    retry_after=admission.wait if admission.reason != "concurrency" else None,
                )
            self.on_wait(BudgetWait(admission.reason, admission.wait, now - began, text))
            waited = True
            pause = SLOT_POLL_SECONDS if admission.reason == "concurrency" else MAX_SLEEP_SECONDS
            self.sleep(min(admission.wait, pause))
        if waited:
            self.on_wait(None)
        try:
            yield admission.batch_limit
        finally:
            self.budget.release(admission)

    def hold_off(self, seconds: float, reason: str) -> None:
        self.budget.hold_off(seconds, reason)

    def limit_batch(self, size: int) -> None:
        self.budget.limit_batch(size)


class NowGate(WaitingGate):
    """The search's gate: a place in the budget now, or BudgetUnavailable at once (a search
    answers within its bound, by words if need be)."""

    def __init__(self, budget: EmbeddingBudget) -> None:
        super().__init__(budget)

    @contextlib.contextmanager
    def admit(self) -> Iterator[int]:
        admission = self.budget.try_admit()
        if not admission.admitted:
            raise BudgetUnavailable(
                _search_reason(self.budget, admission), retry_after=admission.wait
            )
        try:
            yield admission.batch_limit
        finally:
            self.budget.release(admission)


def _search_reason(budget: EmbeddingBudget, admission: Admission) -> str:
    if admission.reason == "pause":
        by = f" ({admission.paused_by})" if admission.paused_by else ""
        return f"the embedding service asked for a pause{by}, {math.ceil(admission.wait)} s more"
    if admission.reason == "rpm":
        return f"the embedding budget ({budget.rpm} requests/min) is spent for now"
    return f"the embedding budget ({budget.concurrency} at a time) is in use"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
