"""How an Intake worker is started, in one place for the Procfile, the dev runner and the tests.

Every worker runs the scheduler (RQ only moves retries with a backoff back to their queue from a
worker started with it) and short heartbeats, so that a job abandoned by a lost machine is
noticed within a known bound: its heartbeat expires 65 s after the last one (job monitoring
interval 5 s + RQ's fixed 60 s), and every worker's maintenance thread (jobs.worker.maintenance)
runs the started registries' cleanup and the reconciler at most 4 s apart, idle or busy: the task
leaves `running` within about 75 s of the machine's loss (docs/deploying.md).

Fair share (docs/architecture.md §15, jobs.core.queues, jobs.worker.fairshare): the command line
names the static queues; the worker adds every registered tenant's queues of those priorities at its
start, after each dequeue and every second from its maintenance thread, so a tenant whose keys were
added while it runs is served without a restart. After each job RQ's `reorder_queues` hook puts the
next tenant's queues first. The learned queues' retries with a backoff are brought back by an RQ
scheduler driven from the maintenance thread (RQ's forked scheduler keeps the command line's),
and RQ's registry cleanup follows the worker's queue list.
"""

from __future__ import annotations

import inspect
import logging
import sys
from typing import Any

from rq import Queue, Worker

from jobs.core.settings import QUEUE_NAMES

log = logging.getLogger(__name__)


def on_work_horse_killed(job: Any, retpid: int, ret_val: int, rusage: Any) -> None:
    """RQ's work_horse_killed_handler: the task says at once that its worker was lost."""
    from jobs.worker.reconcile import horse_lost

    try:
        horse_lost(job.connection, job)
    except Exception:  # never let bookkeeping take a worker down
        log.exception("could not record the lost work-horse of %s", job.id)


class IntakeWorker(Worker):
    """RQ's forking worker, with the pipeline's parts built once and Intake's maintenance.

    Each job runs in a fresh fork of this process; the parent imports the pipeline, installs
    its parts (jobs.worker.parts: settings, embedder) and runs the pipeline once in memory
    (jobs.worker.warmup) before its first job, so that every fork starts warm instead of importing
    numpy and the parsers' libraries anew (~0.25 s per document, docs/benchmarks.md,
    "Documents: the parse step, the warm-up and OCR"); the parsers are imported here too, so a
    failed warm-up costs no speed. With OCR on, the warm-up builds the OCR engine too, before
    the maintenance thread starts, so that no document's fork builds its own. Only RQ's public
    hooks are used: the constructor's work_horse_killed_handler, `work` (which also stops a
    work-horse left running when RQ quits on a failed write: a worker cut off), and
    `reorder_queues` (the dequeue order: RQ's --dequeue-strategy gives way to the fair one).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # What the maintenance thread imports lazily (its housekeeping opens the vector
        # store): imported here, before the thread starts, so that no fork ever catches an
        # import half done in that thread; the work-horse would wait on its lock forever.
        import jobs.kb.vectors  # noqa: F401
        import jobs.worker.pipeline  # noqa: F401  (warm the parent; forks inherit it)
        from jobs.core.logs import configure
        from jobs.core.settings import Settings
        from jobs.tasks import originals
        from jobs.text.parsers import import_parsers
        from jobs.worker import parts
        from jobs.worker.fairshare import TenantQueues

        import_parsers()
        configure()
        kwargs.setdefault("work_horse_killed_handler", on_work_horse_killed)
        super().__init__(*args, **kwargs)
        self.parts = parts.Parts.from_settings(Settings.from_env())
        parts.install(self.parts)
        # The originals' store client, built in this thread before the maintenance thread
        # sweeps with it: a fork taken while that thread imported boto3 or built the client
        # would leave the horse waiting forever on the import's lock (test_worker_imports).
        originals.store(self.parts.settings)
        self.tenant_queues = TenantQueues(self)

    def work(self, *args: Any, **kwargs: Any) -> bool:
        from jobs.worker.maintenance import Maintenance
        from jobs.worker.warmup import warm_up_or_warn

        call = inspect.signature(Worker.work).bind(self, *args, **kwargs)
        call.apply_defaults()
        options = call.arguments
        self.tenant_queues.scheduling = options["with_scheduler"] and not options["burst"]
        self.reorder_queues(None)  # every registered tenant's queues, in the fair order
        warm_up_or_warn(self.log, self.parts.settings)
        maintenance = Maintenance(
            self.connection, self.parts.settings, self.log, on_tick=self.tenant_queues.tick
        ).start()
        try:
            return super().work(*args, **kwargs)
        finally:
            stop_horse_left_behind(self)
            maintenance.stop()
            self.tenant_queues.stop()

    def reorder_queues(self, reference_queue: Queue | None) -> None:
        """RQ's hook for the dequeue order (its RoundRobinWorker's too), called after each
        dequeue: the next tenant's queues first (jobs.worker.fairshare). None: the list grew."""
        set_dequeue_order(self, self.tenant_queues.order_after(reference_queue))


def set_dequeue_order(worker: Worker, ordered: list[Queue]) -> None:
    """The order in which the worker's next dequeue looks at its queues.

    RQ offers no public way to set it: its dequeue reads the worker's private
    `_ordered_queues`, and the `reorder_queues` hook it calls after each dequeue can only set
    that attribute (RQ's own RoundRobinWorker and RandomWorker do exactly this). This function
    is the one place Intake touches it, so an RQ release that renames it breaks here alone
    (tests/unit/worker/test_fair_share.py drains queues in this order)."""
    worker._ordered_queues = ordered


def stop_horse_left_behind(worker: Worker) -> None:
    """A worker that quits mid-job never leaves its work-horse running (docs/architecture.md §17).

    Why: RQ's worker quits when a write of its own fails (its job's heartbeat, its working
    time: Redis unreachable past the connection's retries, a stalled link past the 15 s
    socket timeout), but leaves the horse to run on, unwatched, to the job timeout, while
    the job's heartbeat expires and another worker re-drives the task (§8). A cut-off
    worker so stops its horse within seconds of noticing, ~20 s after the cut on a stalled
    link (tests/integration/worker/test_cut_off_worker.py), well before the 65 s after which the
    task is taken over; the attempt fence (jobs.tasks.attempts) refuses whatever slips through.
    A Sentinel failover does not get here: refused connections are tried again for ~20 s
    (jobs.core.redis_client.WORKER) while a replica is promoted."""
    pid = worker.horse_pid
    if not pid:
        return
    worker.log.error(
        "Worker %s: quitting with work-horse %s still running (Redis "
        "unreachable): stopping it; another worker will take its task over",
        worker.name,
        pid,
    )
    try:
        worker.kill_horse()
        worker.wait_for_horse()
    except OSError:  # it ended meanwhile
        pass


WORKER_FLAGS: tuple[str, ...] = (
    "--worker-class",
    "jobs.workers.IntakeWorker",
    # A Sentinel address in --url, and a worker's waits on Redis (jobs.core.redis_client).
    "--connection-class",
    "jobs.redis_client.WorkerRedis",
    "--with-scheduler",
    "--worker-ttl",
    "20",
    "--job-monitoring-interval",
    "5",
    "--maintenance-interval",
    "5",
)


def redis_arguments(redis_url: str | None) -> list[str]:
    """`--url` of the given Redis (plain or Sentinel), or None: the address from the
    environment, REDIS_URL or the Sentinels (the Procfile's: jobs.rq_settings)."""
    return ["--url", redis_url] if redis_url else ["-c", "jobs.rq_settings"]


def worker_command(
    redis_url: str | None, *, name: str | None = None, burst: bool = False, quiet: bool = False
) -> list[str]:
    """The argv of one `rq worker` process listening to Intake's queues in priority order.

    `quiet` (the dev runner's terminal): RQ's own lines only from warnings up, so its
    maintenance ("cleaning registries …" every few seconds per queue) does not bury what a
    person reads there; Intake's task events are logged apart (jobs.core.logs) and still show."""
    argv = [sys.executable, "-m", "rq.cli", "worker", *WORKER_FLAGS, *redis_arguments(redis_url)]
    if name:
        argv += ["--name", name]
    if burst:
        argv.append("--burst")
    if quiet:
        argv.append("--quiet")
    return argv + list(QUEUE_NAMES)


class WebhookWorker(Worker):
    """RQ's forking worker for the webhook queue only (jobs.webhooks.delivery): a slow or dead
    endpoint holds this process, never an ingestion worker. The delivery module and its HTTP client
    are imported and the settings read once here, so every fork starts warm; the ingestion
    workers' maintenance (the reconciler) is theirs, not this one's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from jobs.core.logs import configure
        from jobs.core.settings import Settings
        from jobs.webhooks import delivery as webhooks

        configure()
        super().__init__(*args, **kwargs)
        webhooks.install(Settings.from_env())


def webhook_worker_command(
    redis_url: str | None, *, name: str | None = None, quiet: bool = False
) -> list[str]:
    """The argv of one `rq worker` process delivering webhooks (queue `intake-webhooks`), with
    the scheduler that moves its retries back to the queue."""
    from jobs.tasks.webhook_events import QUEUE

    argv = [sys.executable, "-m", "rq.cli", "worker", *WORKER_FLAGS, *redis_arguments(redis_url)]
    argv[argv.index("--worker-class") + 1] = "jobs.workers.WebhookWorker"
    if name:
        argv += ["--name", name]
    if quiet:
        argv.append("--quiet")
    return argv + [QUEUE]
