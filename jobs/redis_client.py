"""The connection class as the Procfile's `rq worker --connection-class` names it."""

from jobs.core.redis_client import WorkerRedis

__all__ = ["WorkerRedis"]
