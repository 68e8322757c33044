"""One worker's share of fair share (docs/architecture.md §15): which queues it listens to, in what
order it takes them, and who brings back the retries of the queues it learned while running.

The command line names the static queues (`intake-high intake intake-bulk`); the worker adds
every registered tenant's queues of those priorities (jobs.core.queues), at its start, after each
dequeue and every tick of its maintenance thread (jobs.worker.maintenance; one SMEMBERS each), so a
tenant whose keys were added while it runs is served without a restart: a busy worker at its
next job. RQ re-reads the dequeue order only between waits (its dequeue timeout, 5 s with the
Procfile's --worker-ttl 20), so a worker that learns a new tenant also enqueues one no-op job on
`intake-high` (WAKE_FUNCTION) that wakes an idle worker at once.

After each job the order starts with the next tenant's queues (jobs.core.queues.fair_order): tenants
alternate, priorities hold within each. The rotation is per worker: every worker alternates on
its own, so the fleet's jobs alternate too, without a shared counter to contend on.

Retries with a backoff wait in the ScheduledJobRegistry of their own queue, and only a scheduler
holding that queue's lock moves them back. RQ's scheduler (`--with-scheduler`, a process forked
once with the command line's queues) cannot learn queues, and restarting it when the list grows
would race RQ's own restart of a dead scheduler; so the queues a worker learned are scheduled
from its maintenance thread by an RQScheduler of their own, through RQ's public scheduler
methods (the locks, the heartbeat, enqueue_scheduled_jobs: the loop RQ's scheduler process
runs, every second). RQ's registry cleanup follows the worker's queue list by itself.
"""

from __future__ import annotations

import threading
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq import Queue, Worker, worker_registration
from rq.scheduler import RQScheduler

from jobs.core import queues
from jobs.core.settings import PRIORITY_QUEUES, QUEUE_NAMES

WAKE_FUNCTION = "jobs.fairshare.wake_up"


def wake_up() -> None:
    """The no-op job that wakes an idle worker to look at its queues again."""


def wanted_queues(given: list[str], tenants: list[str]) -> list[str]:
    """The command line's queues, then each tenant's queues of the static priorities named
    there (a worker started on `intake-bulk` alone serves every tenant's bulk)."""
    priorities = {queues.priority_of(name) for name in given if name in QUEUE_NAMES}
    extra = [
        queues.queue_name(tenant, priority)
        for tenant in tenants
        if tenant != queues.DEFAULT_TENANT
        for priority in queues.PRIORITIES
        if priority in priorities
    ]
    return list(dict.fromkeys([*given, *extra]))


def publish_queues(worker: Worker) -> None:
    """Show the worker's grown queue list where `rq info` and rq-dashboard read it: RQ's
    per-queue worker sets (RQ's public worker_registration.register) and the worker's record.

    RQ offers no public way to change a registered worker's record: RQ writes it whole in
    register_birth (which refuses the name of a live worker, and would drop its counters and
    its current job) and again from the heartbeat only after it expired. So the record gets
    the mapping RQ's own `serialize()` gives, the one RQ writes there, from this function
    alone."""
    with worker.connection.pipeline() as pipe:
        worker_registration.register(worker, pipe)
        pipe.hset(worker.key, mapping=worker.serialize())
        pipe.execute()


class TenantQueues:
    """A worker's queue list and dequeue order, kept in step with the registered tenants.

    Called from the worker's main thread (`order_after`, from RQ's reorder_queues after each
    dequeue: a busy worker learns a new tenant before its next job) and from its maintenance
    thread (`tick`: an idle one within a second and its dequeue timeout); a lock keeps the two
    consistent."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.given = worker.queue_names()
        self.last_tenant: str | None = None
        self.scheduling = False
        self.scheduler: RQScheduler | None = None
        self._scheduled: set[str] = set()
        self._lock = threading.RLock()

    def order_after(self, queue: Queue | None) -> list[Queue]:
        """The worker's queues (new tenants' included) in the order to take them after a job
        from `queue` (None: no job since; the last job's tenant still counts)."""
        with self._lock:
            try:
                self.learn()
            except (RedisConnectionError, RedisTimeoutError):
                pass  # the job is dequeued already: it must run; the list stays as it was
            if queue is not None:
                self.last_tenant = queues.tenant_of(queue.name)
            by_name = {q.name: q for q in self.worker.queues}
            return [by_name[name] for name in queues.fair_order(by_name, after=self.last_tenant)]

    def learn(self) -> bool:
        """Listen to every registered tenant's queues too (one SMEMBERS); True if the list
        grew. The caller sets the order (the worker's reorder_queues)."""
        worker = self.worker
        wanted = wanted_queues(self.given, queues.registered_tenants(worker.connection))
        with self._lock:
            if set(wanted) <= set(worker.queue_names()):
                return False
            made = {q.name: q for q in worker.queues}
            worker.queues = [
                made.get(name)
                or worker.queue_class(
                    name,
                    connection=worker.connection,
                    job_class=worker.job_class,
                    serializer=worker.serializer,
                    death_penalty_class=worker.death_penalty_class,
                )
                for name in wanted
            ]
        if worker.birth_date is not None:  # registered: rq info and the dashboard read these
            publish_queues(worker)
            worker.log.info(
                "Worker %s: now listening on %s", worker.name, ", ".join(worker.queue_names())
            )
            Queue(PRIORITY_QUEUES["high"], connection=worker.connection).enqueue(
                WAKE_FUNCTION,
                result_ttl=0,
                failure_ttl=60,
                ttl=300,
                description="wake an idle worker: new tenant queues",
            )
        return True

    def tick(self) -> None:
        """The maintenance thread's second: new tenants' queues, then their scheduling."""
        try:
            if self.learn():
                self.worker.reorder_queues(None)
            if self.scheduling:
                self._schedule()
        except (RedisConnectionError, RedisTimeoutError) as exc:
            self.worker.log.warning("Intake queues: Redis unreachable (%s)", exc)

    def _schedule(self) -> None:
        """One pass of an RQ scheduler over the queues the worker learned (RQ's own scheduler
        process has the command line's): the locks it can take, then the due retries."""
        learned = [name for name in self.worker.queue_names() if name not in self.given]
        if not learned:
            return
        scheduler = self.scheduler
        if scheduler is None or set(learned) != self._scheduled:
            self.stop()
            self._scheduled = set(learned)
            scheduler = self.scheduler = RQScheduler(
                learned,
                connection=self.worker.connection,
                serializer=self.worker.serializer,
                logging_level=self.worker.log.getEffectiveLevel(),
            )
            scheduler.register_birth()
            scheduler.acquire_locks()
        elif scheduler.should_reacquire_locks:
            scheduler.acquire_locks()
        scheduler.heartbeat()
        if scheduler.acquired_locks:
            scheduler.enqueue_scheduled_jobs()

    def stop(self) -> None:
        """Release the learned queues' scheduler locks (another worker's takes them)."""
        if self.scheduler is not None:
            self.scheduler.release_locks()
            self.scheduler.register_death()
            self.scheduler = None
