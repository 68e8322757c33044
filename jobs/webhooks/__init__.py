"""Webhook delivery (an RQ job per event, signed, retried) and the per-tenant list of deliveries.

`jobs.webhooks.deliver` is the function path every delivery job stores in Redis."""

from jobs.webhooks.delivery import deliver

__all__ = ["deliver"]
