"""The worker classes as the Procfile and deployed `rq worker --worker-class` lines name them."""
from jobs.worker.workers import IntakeWorker, WebhookWorker

__all__ = ["IntakeWorker", "WebhookWorker"]
