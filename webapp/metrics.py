"""GET /metrics: Prometheus text, from counters every process keeps in Redis (jobs.core.metrics) and
from queue depths and workers read at scrape time, so any web process answers for the fleet.

A scrape needs no credentials, and a queue label would name a tenant (`intake.acme`): without
an operator's basic auth, every tenant's queue is counted under its priority's shared name
(`intake`), as /api/health does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flask import Blueprint, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from jobs import (
    STEP_BUCKETS,
    Intake,
    dead_letter_count,
    read_metrics,
    shared_queue_name,
    stored_bytes_used,
    webhook_backlog,
)
from webapp.dashboard import is_operator
from webapp.extensions import intake

bp = Blueprint("metrics", __name__)
HELP = {
    "tasks_submitted_total": "Tasks registered (duplicates not counted).",
    "tasks_finished_total": "Tasks that reached a terminal status.",
    "retries_total": "Automatic retries scheduled after a transient failure.",
    "manual_retries_total": "New runs started by a person (Retry).",
    "tasks_lost_total": "Tasks whose worker or job was lost, found by the reconciler.",
    "webhook_deliveries_total": "Webhook delivery attempts by outcome: delivered, "
    "failed_attempt (retried later) or gave_up (retries spent).",
    "uploads_unconfirmed_total": "Uploads accepted without a replica's confirmation, by reason: "
    "role_refused (the server would not say which replicas it "
    "has) or no_replica (none online; every upload on a single "
    "Redis).",
}

LABELED = {
    "tasks_finished_total",
    "webhook_deliveries_total",
    "uploads_unconfirmed_total",
}  # no family until counted


class IntakeCollector(Collector):
    """Reads Redis at each scrape; nothing is held in this process."""

    def __init__(self, service: Intake, per_tenant: bool) -> None:
        self.service = service
        self.per_tenant = per_tenant

    def collect(self) -> Iterator:
        counters, steps = read_metrics(self.service.connection)
        yield from _counters(counters if self.per_tenant else _without_tenants(counters))
        yield _histogram(steps)
        health = self.service.health(per_tenant=self.per_tenant)
        depth = GaugeMetricFamily(
            "intake_queue_depth",
            "Jobs waiting in each queue (every tenant's: jobs.core.queues).",
            labels=["queue"],
        )
        for name, count in health["queues"].items():
            depth.add_metric([name], count)
        yield depth
        yield GaugeMetricFamily(
            "intake_workers", "Registered RQ workers.", value=health["workers"]["count"]
        )
        yield GaugeMetricFamily(
            "intake_redis_replicas_online",
            "Replicas ROLE lists online (0 if ROLE is refused): with none, "
            "uploads are accepted unconfirmed.",
            value=health["replication"]["replicas_online"],
        )
        yield from _dependencies(health["dependencies"])
        yield GaugeMetricFamily(
            "intake_dead_letters",
            "Failed tasks listed as dead letters.",
            value=dead_letter_count(self.service.connection),
        )
        yield _stored_bytes(stored_bytes_used(self.service.connection), self.per_tenant)
        yield GaugeMetricFamily(
            "intake_webhook_backlog",
            "Webhook deliveries waiting: queued, or parked for a retry.",
            value=webhook_backlog(self.service.connection),
        )


def _stored_bytes(used: dict[str, int], per_tenant: bool) -> GaugeMetricFamily:
    """The store's use by originals: per tenant for an operator (a label names the tenant),
    else in all."""
    text = (
        "Bytes of originals kept in the store, as counted against each tenant's quota "
        "(INTAKE_TENANT_STORED_BYTES)."
    )
    if not per_tenant:
        return GaugeMetricFamily("intake_stored_bytes", text, value=sum(used.values()))
    family = GaugeMetricFamily("intake_stored_bytes", text, labels=["tenant"])
    for tenant, count in sorted(used.items()):
        family.add_metric([tenant], count)
    return family


def _counters(counters: dict[str, int]) -> Iterator[CounterMetricFamily]:
    families: dict[str, CounterMetricFamily] = {}
    for field, value in sorted(counters.items()):
        name, _, raw_labels = field.partition("|")
        labels = dict(pair.split("=", 1) for pair in raw_labels.split(",") if pair)
        family = families.get(name)
        if family is None:
            family = families[name] = CounterMetricFamily(
                "intake_" + name.removesuffix("_total"), HELP.get(name, name), labels=sorted(labels)
            )
        family.add_metric([labels[k] for k in sorted(labels)], value)
    for name in HELP:  # every counter exists from the first scrape, at 0
        if name not in families and name not in LABELED:
            families[name] = CounterMetricFamily(
                "intake_" + name.removesuffix("_total"), HELP[name], value=0
            )
    yield from families.values()


def _dependencies(found: dict[str, Any]) -> Iterator[GaugeMetricFamily]:
    """Each dependency of health's as its last probe found it (jobs.core.dependencies): gauges,
    not a histogram, since the probes are kept in no process beyond a second, and a scrape reads
    the state of now as the other gauges do. The knowledge base's read replicas are
    `kb_replica_1`, … in the order INTAKE_KB_REPLICA_URLS gives them."""
    up = GaugeMetricFamily(
        "intake_dependency_up",
        "1 when the dependency answered its probe: "
        "redis (the queue's), kb (the knowledge base's Redis), "
        "kb_replica_N, store (the originals').",
        labels=["dependency"],
    )
    latency = GaugeMetricFamily(
        "intake_dependency_latency_seconds",
        "How long the dependency's last probe took (until it failed, when down).",
        labels=["dependency"],
    )
    kb = found["kb"]
    checks = {
        "redis": found["redis"],
        "kb": kb,
        "store": found["store"],
        **{f"kb_replica_{n}": replica for n, replica in enumerate(kb["replicas"], 1)},
    }
    for name, check in checks.items():
        up.add_metric([name], 1 if check["up"] else 0)
        latency.add_metric([name], check["latency_ms"] / 1000)
    yield up
    yield latency


def _without_tenants(counters: dict[str, int]) -> dict[str, int]:
    """Counters whose `queue` label names a tenant's queue summed under its shared name."""
    folded: dict[str, int] = {}
    for field, value in counters.items():
        name, _, raw_labels = field.partition("|")
        pairs = [pair.split("=", 1) for pair in raw_labels.split(",") if pair]
        labels = ",".join(f"{k}={shared_queue_name(v) if k == 'queue' else v}" for k, v in pairs)
        key = f"{name}|{labels}"
        folded[key] = folded.get(key, 0) + value
    return folded


def _histogram(cells: dict[str, float]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "intake_step_duration_seconds", "Duration of each pipeline step.", labels=["step"]
    )
    for step in sorted({field.split("|")[0] for field in cells}):
        buckets = [(str(bound), cells.get(f"{step}|{bound}", 0.0)) for bound in STEP_BUCKETS]
        buckets.append(("+Inf", cells.get(f"{step}|+Inf", 0.0)))
        family.add_metric([step], buckets, sum_value=cells.get(f"{step}|sum", 0.0))
    return family


@bp.get("/metrics")
def scrape() -> Response:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(IntakeCollector(intake(), per_tenant=is_operator()))
    return Response(generate_latest(registry), mimetype="text/plain; version=0.0.4")
