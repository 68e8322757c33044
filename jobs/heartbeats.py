"""A worker cut off from Redis stops its work-horse (DESIGN §15), instead of running to the
job timeout.

Why: RQ's worker parent heartbeats its job every `--job-monitoring-interval` (5 s). When those
writes fail, the worker can tell it is cut off: nobody sees its heartbeats, so the job's
heartbeat expires (65 s after the last good one) and another worker re-drives the task (§8).
The old attempt would run on for nothing, holding a document's memory and the embedding budget,
and could only try to write late (its writes are fenced: jobs.attempts). So once heartbeats
have failed for GRACE_SECONDS, the work-horse is killed and the worker quits (its supervisor
starts it again; it comes back once Redis answers).

Why a grace: a Sentinel failover makes heartbeats fail for a few seconds too (refused
connections while a replica is promoted, each tried again for ~20 s by jobs.redis_client's
WORKER profile), and a failover must not kill every running work-horse of the fleet.

The bound: heartbeats are 5 s apart and a stalled one fails after the worker's 15 s socket
timeout (RQ's dequeue timeout + 10), so the horse is killed about 20 s after the last good
heartbeat on a stalled link, at most ~35 s after it on any link: well before the 65 s after
which another worker may take the task (tests/integration/test_cut_off_worker.py).
"""
from __future__ import annotations

import time
from typing import Callable

#: How long heartbeats may fail before the worker counts itself cut off: past a failover's
#: few seconds, short of the job heartbeat's 65 s.
GRACE_SECONDS = 15.0


class CutOffFromRedis(Exception):
    """Raised out of RQ's monitor loop once the work-horse is killed: the worker quits."""


class HeartbeatWatch:
    """When a running job's heartbeats last succeeded, and whether the worker is cut off."""

    def __init__(self, grace: float = GRACE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.grace, self.clock = grace, clock
        self.last_ok = clock()

    def succeeded(self) -> None:
        self.last_ok = self.clock()

    def silent_for(self) -> float:
        return self.clock() - self.last_ok

    def cut_off(self) -> bool:
        """After a failed heartbeat: True once none succeeded for the grace."""
        return self.silent_for() >= self.grace
