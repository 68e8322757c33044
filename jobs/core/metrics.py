"""What Intake did, counted in Redis so that every web and worker process on every host adds to
the same numbers.

RQ forks a process per job, so prometheus-client's multiprocess mode would leave a file per job;
instead each event is one HINCRBY queued on a pipeline the caller already sends, and the web's
collector (webapp/metrics.py) reads the hashes at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redis import Redis
from redis.client import Pipeline

from jobs.core import keys, scripts
from jobs.core.clock import timestamp

STEP_BUCKETS: tuple[float, ...] = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)

# One command instead of one per bucket: a fast step fills every bucket.
_OBSERVE = scripts.load(__file__, "metrics_observe")


def field(name: str, **labels: str) -> str:
    """A counter's field in the metrics hash: `name|key=value,…`, its labels sorted (a script
    that counts is handed its field, or the field without its last label's value)."""
    return name + "|" + ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def count(pipe: Pipeline | Redis, name: str, amount: int = 1, **labels: str) -> None:
    """Add to a counter; `labels` become Prometheus labels."""
    pipe.hincrby(keys.metrics(), field(name, **labels), amount)


def observe_steps(pipe: Pipeline, steps: Iterable[dict[str, Any]], attempt: int) -> None:
    """Step durations of this attempt into cumulative histogram buckets."""
    sums: list[Any] = []
    buckets: list[str] = []
    for step in steps:
        if step.get("attempt") != attempt or not step.get("ended_at"):
            continue
        seconds = timestamp(step["ended_at"]) - timestamp(step["started_at"])
        name = step["name"]
        buckets += [f"{name}|{bound}" for bound in STEP_BUCKETS if seconds <= bound]
        buckets.append(f"{name}|+Inf")
        sums += [f"{name}|sum", max(seconds, 0.0)]
    if sums:
        _OBSERVE(
            pipe,
            keys={"histogram": keys.step_metrics()},
            args={"sums": len(sums) // 2},
            rest=[*sums, *buckets],
        )


def read(connection: Redis) -> tuple[dict[str, int], dict[str, float]]:
    """(counters, step histogram cells), as stored."""
    pipe = connection.pipeline(transaction=False)
    pipe.hgetall(keys.metrics())
    pipe.hgetall(keys.step_metrics())
    counters, steps = pipe.execute()
    return (
        {k.decode(): int(v) for k, v in counters.items()},
        {k.decode(): float(v) for k, v in steps.items()},
    )
