"""The web process's one subscription (webapp.watchers) on fakeredis: a change announced by a
writer reaches every stream watching its batch with ONE read of that batch, whatever the number
of streams; a batch nobody watches is never read; streams let go leave nothing behind. The same
runs against gunicorn and real workers in tests/integration/web/test_open_streams.py."""

from __future__ import annotations

import threading

import fakeredis
import pytest

from jobs import announce
from tests.integration.helpers import poll
from webapp.watchers import GONE, Broadcaster


@pytest.fixture
def redis():
    """A fakeredis server of this test's own: another test's subscriber must not share it."""
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


def _batch(batch_id, *task_ids, progress=0):
    return {"id": batch_id, "progress": progress, "tasks": [{"id": t} for t in task_ids]}


class Reads:
    """A reader counting its reads, answering what `states` holds."""

    def __init__(self, states):
        self.states, self.count, self.lock = states, {}, threading.Lock()

    def __call__(self, tenant, batch_id):
        with self.lock:
            self.count[batch_id] = self.count.get(batch_id, 0) + 1
        return self.states.get(batch_id)


def test_one_read_per_change_for_all_the_streams_of_a_batch(redis):
    states = {"b1": _batch("b1", "t1", "t2"), "b2": _batch("b2", "t3")}
    reads = Reads(states)
    watchers = Broadcaster(lambda: redis, reads, min_interval=0.05, refresh_seconds=60)
    streams = [watchers.watch("acme", "b1", states["b1"]) for _ in range(100)]
    other = watchers.watch("acme", "b2", states["b2"])
    poll(lambda: watchers.subscribed.is_set(), timeout=5, message="subscribed")
    poll(
        lambda: all(w.serial >= 1 for w in streams) and other.serial >= 1,
        timeout=5,
        message="the first read after subscribing",
    )
    reads.count.clear()
    serials = [w.serial for w in streams]

    states["b1"] = _batch("b1", "t1", "t2", progress=50)
    announce(redis, "t2")
    poll(
        lambda: all(w.snapshot["progress"] == 50 for w in streams),
        timeout=5,
        message="every stream of b1 sees the change",
    )
    assert reads.count == {"b1": 1}, "one read for 100 streams; b2 was not read"
    assert all(w.serial == s + 1 for w, s in zip(streams, serials))

    announce(redis, "t-unknown")  # a task no watched batch holds
    announce(redis, "t3")
    poll(lambda: reads.count.get("b2") == 1, timeout=5, message="b2 read once for t3")
    assert reads.count.get("b1") == 1
    for watcher in [*streams, other]:
        watchers.unwatch(watcher)
    poll(
        lambda: not watchers.subscribed.is_set(),
        timeout=5,
        message="no watcher left: the subscription ends",
    )


def test_a_stream_waits_without_reading_and_wakes_on_its_change(redis):
    states = {"b1": _batch("b1", "t1")}
    reads = Reads(states)
    watchers = Broadcaster(lambda: redis, reads, min_interval=0.01, refresh_seconds=60)
    watcher = watchers.watch("acme", "b1", states["b1"])
    poll(lambda: watcher.serial >= 1, timeout=5, message="subscribed and read once")
    seen, _ = watcher.wait(watcher.serial, 0.2)  # nothing changes: it returns after its timeout
    assert seen == watcher.serial and reads.count["b1"] == 1
    states["b1"] = None  # the batch expired
    announce(redis, "t1")
    serial, snapshot = watcher.wait(seen, 5)
    assert serial == seen + 1 and snapshot is GONE
    watchers.unwatch(watcher)


def test_unwatched_batches_are_forgotten(redis):
    states = {"b1": _batch("b1", "t1")}
    watchers = Broadcaster(lambda: redis, Reads(states), min_interval=0.01, refresh_seconds=60)
    first, second = (watchers.watch("acme", "b1", states["b1"]) for _ in range(2))
    watchers.unwatch(first)
    assert watchers.watched == 1
    watchers.unwatch(second)
    watchers.unwatch(second)  # twice: harmless
    assert watchers.watched == 0 and watchers._holders == {} and watchers._tasks == {}
