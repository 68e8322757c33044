"""The path of the wake-up job a worker enqueues when it learns a tenant's queues
(`jobs.fairshare.wake_up`): queued ones find their function here after an upgrade."""

from jobs.worker.fairshare import wake_up

__all__ = ["wake_up"]
