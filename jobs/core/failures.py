"""The error taxonomy of the pipeline.

Every failure a person can see is one of two kinds: transient (the same attempt may work later:
RQ retries it with backoff) or permanent (retrying the same input cannot help). Separately,
`retryable` tells the person whether a manual Retry can succeed without changing the file: a
misconfigured embedding service is permanent for automatic retries, yet retryable by hand.
Messages are written for a person, never a traceback. This module is pure: no rq, no redis.
"""

from __future__ import annotations

import random
from typing import Any


class IntakeError(Exception):
    """Base of the errors the pipeline raises on purpose, each with a readable message."""

    transient: bool = False
    retryable: bool = False
    code: str = "error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        step: str | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if retryable is not None:
            self.retryable = retryable
        self.step = step

    def as_dict(self, step: str | None = None) -> dict[str, Any]:
        """The `error` object of the task JSON (docs/architecture.md §4)."""
        return {
            "step": self.step or step,
            "type": self.code,
            "message": self.message,
            "retryable": self.retryable,
        }


class PermanentError(IntakeError):
    """Retrying the same input cannot help: fail at once, no automatic retry (a bad file)."""

    transient = False
    retryable = False
    code = "permanent"


class TransientError(IntakeError):
    """The same attempt may work later (a timeout, a service that is down): retry with backoff.

    `retry_after`: seconds the next attempt should not start before (a service's Retry-After,
    the embedding budget's wait); the pipeline stretches RQ's backoff to cover it.
    """

    transient = True
    retryable = True
    code = "transient"

    def __init__(self, message: str, *, retry_after: float | None = None, **options: Any) -> None:
        super().__init__(message, **options)
        self.retry_after = retry_after


def backoff_delays(
    max_attempts: int,
    base_seconds: int,
    *,
    cap_seconds: int = 300,
    jitter: float = 0.2,
    rng: random.Random | None = None,
) -> list[int]:
    """Whole-second delays before attempts 2..max_attempts: base·2^n, capped, ±jitter.

    RQ has neither backoff nor jitter and crashes on float intervals, so the list is computed per
    job at enqueue time; its length equals the number of retries (RQ repeats the first value of a
    shorter list).
    """
    # The module's generator: reseeded in every forked child, and no new one (seeded from
    # os.urandom) per job.
    uniform = rng.uniform if rng else random.uniform
    delays = []
    for n in range(max(max_attempts - 1, 0)):
        nominal = min(base_seconds * (2**n), cap_seconds)
        jittered = nominal * (1 + uniform(-jitter, jitter))
        delays.append(max(1, min(cap_seconds, round(jittered))))
    return delays


class CancelRequested(Exception):
    """A person canceled the task: the job stops at this checkpoint and indexes nothing."""


class AttemptFailed(Exception):
    """What a failed attempt leaves RQ (its exc_info): the error's code and words, escaped,
    because rq-dashboard shows exc_info as raw HTML; the task record keeps the readable error."""


def worker_lost() -> PermanentError:
    """A job whose worker died under it (killed, out of memory, machine lost), retries spent."""
    return PermanentError(
        "The worker processing this document stopped unexpectedly (killed, "
        "out of memory or its machine was lost). Retry to process it again.",
        code="worker_lost",
        retryable=True,
    )


def job_lost() -> PermanentError:
    """A task whose RQ job vanished behind Intake's back (deleted key, dashboard action)."""
    return PermanentError(
        "The background job of this document disappeared (it was deleted or "
        "expired). Retry to process it again.",
        code="job_lost",
        retryable=True,
    )
