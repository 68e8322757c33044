"""Every exception an attempt can end with, as the pipeline's error taxonomy (jobs.core.failures)
sees it: a person reads its message, RQ retries it or not.

An unexpected exception is most often an outage of something the worker depends on, so it is
retried; a Redis that refuses writes for a moment (a failover) is one of those.
"""

from __future__ import annotations

from jobs.core.failures import IntakeError, PermanentError, TransientError
from jobs.core.redis_client import is_outage


def classify(exc: BaseException, step: str | None) -> IntakeError:
    """Map any exception to an IntakeError; unknown exceptions are transient, with a plain message.

    An unexpected exception is most often an outage of something we depend on, so it is retried;
    its text is kept short and never includes a traceback.
    """
    if isinstance(exc, IntakeError):
        if exc.step is None:
            exc.step = step
        return exc
    name = type(exc).__name__
    if name == "JobTimeoutException":
        return TransientError(
            "The attempt ran longer than the job timeout and was stopped.",
            code="job_timeout",
            step=step,
        )
    if name in {"ConnectionError", "TimeoutError", "BusyLoadingError"}:
        return TransientError(
            "A service Intake depends on (Redis) was unreachable.",
            code="service_unavailable",
            step=step,
        )
    if is_outage(exc):
        return TransientError(
            "Redis refused writes for a moment (a failover under way).",
            code="service_unavailable",
            step=step,
        )
    if isinstance(exc, MemoryError):
        return PermanentError(
            "The document needed more memory than allowed to process.", code="too_large", step=step
        )
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else name
    return TransientError(f"Unexpected error ({name}): {text}", code="internal", step=step)
