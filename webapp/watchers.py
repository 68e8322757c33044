"""One subscription per web process, one read per changed batch for all the pages watching it.

Why: if each open page read its batch from Redis twice a second, each in a request thread of
its own, a thousand open pages would be two thousand reads a second and a thousand threads.
Instead workers announce each change (jobs.tasks.announcements) and a web process holds one pub/sub
connection: a change marks the batches that hold the task, and one reader thread reads each
marked batch once (at most every `min_interval` seconds) and hands the same snapshot to every
stream watching it. A stream waits on its watcher; waiting costs nothing (under gunicorn's
gevent workers a thread here is a greenlet).

Pub/sub forgets what is published while a subscriber is away, so on every (re)subscription
each watched batch is read again; and each watched batch is read every `refresh_seconds` all
the same (one read per batch, not per page), for a change nobody announced (a task that
expired). The threads start with the process's first watcher, after gunicorn's fork, and end
when it has none: a process with no open page holds no subscription.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from redis import Redis
from redis.exceptions import RedisError

from jobs import changed_task, changes_channel

log = logging.getLogger("intake.watchers")

Batch = dict[str, Any]
Reader = Callable[[str, str], "Batch | None"]  # (tenant, batch id) → the batch, or None: gone
GONE: dict[str, Any] = {}  # the snapshot of a batch that no longer exists


class Watcher:
    """What one open stream waits on: the latest snapshot of its batch, and a serial number
    that moves with each new one."""

    def __init__(self, key: tuple[str, str], first: Batch) -> None:
        self.key = key
        self.snapshot: Batch = first
        self.serial = 0
        self._changed = threading.Condition()

    def offer(self, snapshot: Batch) -> None:
        with self._changed:
            self.snapshot, self.serial = snapshot, self.serial + 1
            self._changed.notify_all()

    def wait(self, seen: int, timeout: float) -> tuple[int, Batch]:
        """(serial, snapshot) once the serial is past `seen`, or as they are after `timeout`."""
        with self._changed:
            self._changed.wait_for(lambda: self.serial != seen, timeout)
            return self.serial, self.snapshot


class Broadcaster:
    """The process's subscription and reader, shared by all its streams."""

    def __init__(
        self,
        connect: Callable[[], Redis],
        read: Reader,
        *,
        min_interval: float = 0.25,
        refresh_seconds: float = 15.0,
        reconnect_seconds: float = 1.0,
    ) -> None:
        self.connect, self.read = connect, read
        self.min_interval, self.refresh_seconds = min_interval, refresh_seconds
        self.reconnect_seconds = reconnect_seconds
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._watchers: dict[tuple[str, str], set[Watcher]] = {}
        self._holders: dict[str, set[tuple[str, str]]] = {}  # task id → watched batches holding it
        self._tasks: dict[tuple[str, str], tuple[str, ...]] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._read_at: dict[tuple[str, str], float] = {}
        self._pid: int | None = None
        self._listening = self._reading = False
        self.subscribed = threading.Event()

    # -- streams ---------------------------------------------------------------------------

    def watch(self, tenant: str, batch_id: str, first: Batch) -> Watcher:
        """Start watching a batch whose current state the stream has just read (`first`)."""
        key = (tenant, batch_id)
        watcher = Watcher(key, first)
        with self._wake:
            if key not in self._watchers:
                self._watchers[key] = set()
                self._index(key, first)
                self._read_at[key] = time.monotonic()
            self._watchers[key].add(watcher)
            # A change announced between the stream's own read and now would be missed: read
            # the batch once more, shared with every stream opening on it meanwhile.
            self._dirty.add(key)
            self._wake.notify()
        self._start()
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        with self._lock:
            watching = self._watchers.get(watcher.key)
            if watching is None:
                return
            watching.discard(watcher)
            if not watching:
                del self._watchers[watcher.key]
                self._index(watcher.key, None)
                self._dirty.discard(watcher.key)
                self._read_at.pop(watcher.key, None)
                self._wake.notify()  # the reader ends when nothing is watched

    @property
    def watched(self) -> int:
        with self._lock:
            return len(self._watchers)

    # -- the two threads -------------------------------------------------------------------

    def _start(self) -> None:
        """Start whichever thread is not running (under the lock: see `_idle`)."""
        with self._wake:
            if self._pid != os.getpid():  # a fork (gunicorn's worker) has no threads yet
                self._pid, self._listening, self._reading = os.getpid(), False, False
            start = [
                (target, name)
                for target, name, running in (
                    (self._listen, "watchers-listen", self._listening),
                    (self._read_loop, "watchers-read", self._reading),
                )
                if not running
            ]
            self._listening = self._reading = True
            self._wake.notify()
        for target, name in start:
            threading.Thread(target=target, name=name, daemon=True).start()

    def _idle(self, thread: str) -> bool:
        """True (and that thread marked stopped) when nothing is watched any more."""
        with self._lock:
            if self._watchers:
                return False
            setattr(self, thread, False)
            return True

    def _listen(self) -> None:
        while not self._idle("_listening"):
            pubsub = None
            try:
                pubsub = self.connect().pubsub(ignore_subscribe_messages=False)
                pubsub.subscribe(changes_channel())
                while True:
                    # A timed wait, not listen(): a quiet channel must not hit the client's
                    # socket timeout and look like a lost connection.
                    message = pubsub.get_message(timeout=1.0)
                    if message is None:
                        if self._idle("_listening"):
                            self.subscribed.clear()
                            return
                        continue
                    if message.get("type") == "subscribe":
                        self.subscribed.set()
                        self._mark_all()  # whatever was published while away is unknown
                        continue
                    task_id = changed_task(message)
                    if task_id is not None:
                        self._mark_task(task_id)
            except (RedisError, OSError) as exc:
                self.subscribed.clear()
                log.warning("change announcements lost (%s); subscribing again", exc)
                time.sleep(self.reconnect_seconds)
            finally:
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except (RedisError, OSError):
                        pass

    def _read_loop(self) -> None:
        while True:
            due = self._take_due()
            if due is None:
                return
            for key in due:
                try:
                    batch = self.read(*key)
                except RedisError:
                    with self._lock:
                        self._dirty.add(key)  # Redis is away: read it again later
                    continue
                self._deliver(key, batch if batch is not None else GONE)

    # -- bookkeeping, under the lock -------------------------------------------------------

    def _take_due(self) -> list[tuple[str, str]] | None:
        """Wait until some watched batch is marked (and was not read in the last
        `min_interval`) or due for its refresh; return those, unmarked. None: nothing is
        watched any more (this thread is marked stopped)."""
        with self._wake:
            while True:
                if not self._watchers:
                    self._reading = False
                    return None
                now = time.monotonic()
                for key, at in self._read_at.items():
                    if now - at >= self.refresh_seconds:
                        self._dirty.add(key)
                ready = [
                    k for k in self._dirty if now - self._read_at.get(k, 0) >= self.min_interval
                ]
                if ready:
                    for key in ready:
                        self._dirty.discard(key)
                        self._read_at[key] = now
                    return ready
                waits = [self.min_interval - (now - self._read_at.get(k, 0)) for k in self._dirty]
                waits += [self.refresh_seconds - (now - at) for at in self._read_at.values()]
                self._wake.wait(max(0.01, min(waits, default=self.refresh_seconds)))

    def _deliver(self, key: tuple[str, str], batch: Batch) -> None:
        with self._lock:
            watching = list(self._watchers.get(key, ()))
            if watching:
                self._index(key, batch)
        for watcher in watching:
            watcher.offer(batch)

    def _mark_task(self, task_id: str) -> None:
        with self._wake:
            holders = self._holders.get(task_id)
            if holders:
                self._dirty.update(holders)
                self._wake.notify()

    def _mark_all(self) -> None:
        with self._wake:
            self._dirty.update(self._watchers)
            self._wake.notify()

    def _index(self, key: tuple[str, str], batch: Batch | None) -> None:
        """Keep task id → batches current for `key`'s tasks (none: it is no longer watched)."""
        for task_id in self._tasks.pop(key, ()):
            holders = self._holders.get(task_id)
            if holders is not None:
                holders.discard(key)
                if not holders:
                    del self._holders[task_id]
        if batch:
            ids = tuple(task["id"] for task in batch.get("tasks", ()))
            self._tasks[key] = ids
            for task_id in ids:
                self._holders.setdefault(task_id, set()).add(key)
