"""How an Intake worker is started, in one place for the Procfile, the dev runner and the tests.

Every worker runs the scheduler (RQ only moves retries with a backoff back to their queue from a
worker started with it) and short heartbeats, so that a job abandoned by a lost machine is
noticed within a known bound: its heartbeat expires 65 s after the last one (job monitoring
interval 5 s + RQ's fixed 60 s), an idle worker wakes every 5 s (worker TTL 20 s − 15 s) and a
busy one every 5 s, and the reconciler runs at most 4 s apart: the task leaves `running`
within about 80 s of the machine's loss (docs/deploying.md).
"""
from __future__ import annotations

import sys

from rq import Worker

from jobs.settings import QUEUE_NAMES


class IntakeWorker(Worker):
    """RQ's forking worker, with the pipeline preloaded and Intake's reconciler in its rounds.

    Each job runs in a fresh fork; without the preload every fork imported numpy, pypdf and
    python-docx anew (~0.8 s per document) before doing any work, and before its first job the
    worker runs the pipeline once in memory (jobs.warmup), so that forks start warm. The
    reconciler (and RQ's own registry cleanup, which finds jobs abandoned by a lost machine)
    runs from the idle loop's maintenance and from the busy loop's heartbeats, so a fleet of
    busy workers still does it.
    """

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        import jobs.pipeline  # noqa: F401  (warm the parent; forks inherit it)
        from jobs.logs import configure
        configure()
        super().__init__(*args, **kwargs)

    def work(self, *args, **kwargs) -> bool:  # type: ignore[no-untyped-def]
        from jobs.warmup import warm_up_or_warn
        warm_up_or_warn(self.log)
        return super().work(*args, **kwargs)

    def run_maintenance_tasks(self) -> None:
        super().run_maintenance_tasks()
        self._reconcile(clean_registries=False)

    def maintain_heartbeats(self, job) -> None:  # type: ignore[no-untyped-def]
        super().maintain_heartbeats(job)
        self._reconcile(clean_registries=True)

    def handle_work_horse_killed(self, job, retpid, ret_val, rusage) -> None:  # type: ignore[no-untyped-def]
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        from jobs.reconcile import horse_lost
        try:
            horse_lost(self.connection, job)
        except Exception:
            self.log.exception("could not record the lost work-horse of %s", job.id)

    def _reconcile(self, *, clean_registries: bool) -> None:
        from jobs.reconcile import run_if_due
        try:
            if run_if_due(self.connection) and clean_registries:
                self.clean_registries()
        except Exception:  # never let bookkeeping take a worker down
            self.log.exception("Intake reconciler failed; will try again")


WORKER_FLAGS: tuple[str, ...] = (
    "--worker-class", "jobs.workers.IntakeWorker",
    "--with-scheduler",
    "--worker-ttl", "20",
    "--job-monitoring-interval", "5",
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
