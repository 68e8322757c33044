"""A worker that quits mid-job (RQ quits when its own heartbeat or working-time write fails: a
worker cut off from Redis) stops its work-horse instead of leaving it to run to the job
timeout. (On real processes, a worker in its own network namespace: tests/integration/
test_cut_off_worker.py.)"""

from __future__ import annotations

import logging

from jobs.worker.workers import stop_horse_left_behind


class _Worker:
    name, log = "w1", logging.getLogger("test")

    def __init__(self, horse_pid: int) -> None:
        self.horse_pid, self.calls = horse_pid, []

    def kill_horse(self) -> None:
        self.calls.append("kill")

    def wait_for_horse(self) -> None:
        self.calls.append("wait")


def test_a_horse_still_running_when_the_worker_quits_is_killed_and_reaped() -> None:
    worker = _Worker(horse_pid=4242)
    stop_horse_left_behind(worker)  # type: ignore[arg-type]  # a stand-in with the calls it makes
    assert worker.calls == ["kill", "wait"]


def test_a_worker_quitting_between_jobs_kills_nothing() -> None:
    worker = _Worker(horse_pid=0)  # RQ sets 0 once a horse has finished
    stop_horse_left_behind(worker)  # type: ignore[arg-type]  # a stand-in with the calls it makes
    assert worker.calls == []
