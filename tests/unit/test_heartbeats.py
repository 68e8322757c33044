"""A worker cut off from Redis stops its work-horse (jobs.heartbeats): heartbeats that fail for
a failover's few seconds are let pass; past the grace the horse is killed and the worker quits.
(On real processes, a worker in its own network namespace: tests/integration/
test_cut_off_worker.py.)"""
from __future__ import annotations

import logging

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq import Worker

from jobs.heartbeats import GRACE_SECONDS, CutOffFromRedis, HeartbeatWatch
from jobs.workers import IntakeWorker


class _Job:
    id = "j" * 32


def _worker(clock: list[float]) -> IntakeWorker:
    """An IntakeWorker's heartbeat handling alone (nothing forked, no Redis)."""
    worker = object.__new__(IntakeWorker)
    worker.name, worker.log = "w1", logging.getLogger("test")
    worker.heartbeats = HeartbeatWatch(clock=lambda: clock[0])
    worker.killed = []
    worker.kill_horse = lambda: worker.killed.append("kill")
    worker.wait_for_horse = lambda: worker.killed.append("wait")
    return worker


def test_heartbeats_failing_for_a_failover_let_the_work_horse_run(monkeypatch) -> None:
    clock = [100.0]
    worker = _worker(clock)
    outcomes = iter([RedisConnectionError("refused"), RedisTimeoutError("stalled"), None])

    def heartbeat(self, job):
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome
    monkeypatch.setattr(Worker, "maintain_heartbeats", heartbeat)
    for _ in range(3):
        clock[0] += 5        # 5 s apart, as --job-monitoring-interval says
        worker.maintain_heartbeats(_Job())
    assert worker.killed == []
    assert worker.heartbeats.silent_for() == 0   # the third reached Redis


def test_heartbeats_failing_past_the_grace_kill_the_work_horse_and_quit(monkeypatch) -> None:
    clock = [100.0]
    worker = _worker(clock)

    def heartbeat(self, job):
        raise RedisTimeoutError("Timeout reading from socket")
    monkeypatch.setattr(Worker, "maintain_heartbeats", heartbeat)
    clock[0] += GRACE_SECONDS - 1
    worker.maintain_heartbeats(_Job())
    assert worker.killed == []
    clock[0] += 1
    with pytest.raises(CutOffFromRedis):
        worker.maintain_heartbeats(_Job())
    assert worker.killed == ["kill", "wait"]


def test_an_error_that_is_not_an_outage_is_rqs_as_before(monkeypatch) -> None:
    worker = _worker([100.0])

    def heartbeat(self, job):
        raise ValueError("a bug")
    monkeypatch.setattr(Worker, "maintain_heartbeats", heartbeat)
    with pytest.raises(ValueError):
        worker.maintain_heartbeats(_Job())
    assert worker.killed == []
