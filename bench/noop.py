"""The job the bare baseline enqueues. No worker runs during the benchmark: it is never executed."""

from __future__ import annotations


def noop(size: int) -> int:
    return size
