"""The worker classes as the Procfile and deployed `rq worker --worker-class` lines name them.

The job function's stored path (jobs.pipeline) is imported here, in the worker process, so that
each work-horse RQ forks finds it imported instead of importing it again for every job."""

import jobs.pipeline  # noqa: F401
from jobs.worker.workers import IntakeWorker, WebhookWorker

__all__ = ["IntakeWorker", "WebhookWorker"]
