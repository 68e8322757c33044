"""Intake's bookkeeping, run in every worker whether it is idle or busy with a long job.

Why a thread of the worker: RQ offers no public hook that runs while a job runs, and a fleet
of busy workers must still notice a lost machine. Every second each worker's thread tries to
take a lock; the one that does (at most every INTERVAL_SECONDS, fleet-wide) runs RQ's own
cleanup of the started registries (public: it retries or fails the jobs whose heartbeat
expired with their machine), then the reconciler, and now and then the housekeeping; before
that, the worker's own per-second work if it gave one (`on_tick`: jobs.worker.fairshare). RQ's
worker already runs a thread of its own (its pub/sub listener); this one uses the same Redis
client, which is safe across threads, and touches nothing a fork inherits in use.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq.registry import StartedJobRegistry

from jobs.core import keys, queues
from jobs.core.redis_client import WORKER
from jobs.core.settings import Settings
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import originals
from jobs.worker import housekeeping, reconcile

INTERVAL_SECONDS = 4
HOUSEKEEPING_SECONDS = 60
TICK_SECONDS = 1.0


def run_if_due(connection: Redis, settings: Settings) -> bool:
    """Clean up, reconcile and keep house unless another worker did lately; True if it ran."""
    if not connection.set(keys.reconcile_lock(), 1, nx=True, ex=INTERVAL_SECONDS):
        return False
    for name in queues.all_names(connection):  # every tenant's, listened to or not
        StartedJobRegistry(name, connection=connection).cleanup()
    reconcile.reconcile(connection, settings)
    if connection.set(keys.housekeeping_lock(), 1, nx=True, ex=HOUSEKEEPING_SECONDS):
        kb = KnowledgeBase.of(settings, connection, WORKER)
        housekeeping.run(connection, settings.retention_seconds, kb)
        try:  # hourly at most: it lists the whole store (jobs.tasks.originals.sweep)
            originals.sweep(connection, settings, kb)
        except Exception:  # noqa: BLE001 - a store that does not answer: the next hour's turn
            logging.getLogger(__name__).warning("originals not swept", exc_info=True)
    return True


class Maintenance:
    """The thread; `start()` with the worker's loop, `stop()` when it ends."""

    def __init__(
        self,
        connection: Redis,
        settings: Settings,
        log: logging.Logger,
        tick_seconds: float = TICK_SECONDS,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        self.connection, self.settings, self.log = connection, settings, log
        self.on_tick = on_tick  # the worker's own per-second work (jobs.worker.fairshare)
        self.tick_seconds = tick_seconds
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="intake-maintenance", daemon=True)

    def start(self) -> Maintenance:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stopping.wait(self.tick_seconds):
            try:
                if self.on_tick is not None:
                    self.on_tick()
                run_if_due(self.connection, self.settings)
            except (RedisConnectionError, RedisTimeoutError) as exc:  # RQ says so too
                self.log.warning("Intake maintenance: Redis unreachable (%s)", exc)
            except Exception:  # never let bookkeeping take a worker down
                self.log.exception("Intake maintenance failed; will try again")
