"""How an Intake worker is started, in one place for the Procfile, the dev runner and the tests.

Every worker runs the scheduler (RQ only moves retries with a backoff back to their queue from a
worker started with it) and short heartbeats so that a job abandoned by a lost machine is noticed
within a known bound (RQ-NOTES: with a 30 s worker TTL and 5 s maintenance, about 74 s).
"""
from __future__ import annotations

import sys

from rq import Worker

from jobs.settings import QUEUE_NAMES


class IntakeWorker(Worker):
    """RQ's forking worker, with the pipeline imported once in the parent process.

    Each job runs in a fresh fork; without this every fork imported numpy, pypdf and
    python-docx anew (~0.8 s per document) before doing any work.
    """

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        import jobs.pipeline  # noqa: F401  (warm the parent; forks inherit it)
        super().__init__(*args, **kwargs)


WORKER_FLAGS: tuple[str, ...] = (
    "--worker-class", "jobs.workers.IntakeWorker",
    "--with-scheduler",
    "--worker-ttl", "30",
    "--maintenance-interval", "5",
)


def worker_command(redis_url: str, *, name: str | None = None, burst: bool = False) -> list[str]:
    """The argv of one `rq worker` process listening to Intake's queues in priority order."""
    argv = [sys.executable, "-m", "rq.cli", "worker", *WORKER_FLAGS, "--url", redis_url]
    if name:
        argv += ["--name", name]
    if burst:
        argv.append("--burst")
    return argv + list(QUEUE_NAMES)
