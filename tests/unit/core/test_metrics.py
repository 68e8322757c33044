"""GET /metrics on fakeredis: parses as Prometheus text and counts what happened."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.samples import make_pdf_no_text
from tests.unit.conftest import upload


def _samples(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    values = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def test_metrics_count_submits_outcomes_and_steps(client, run_jobs):
    upload(client, ("a.txt", b"Counted words."), ("scan.pdf", make_pdf_no_text()))
    run_jobs()
    values = _samples(client)
    assert values[("intake_tasks_submitted_total", (("queue", "intake-high"),))] == 2
    assert values[("intake_tasks_finished_total", (("status", "succeeded"),))] == 1
    assert values[("intake_tasks_finished_total", (("status", "failed"),))] == 1
    assert values[("intake_step_duration_seconds_count", (("step", "embedding"),))] == 1
    assert values[("intake_dead_letters", ())] == 1
    assert values[("intake_queue_depth", (("queue", "intake"),))] == 0
    assert ("intake_workers", ()) in values


def test_metrics_need_no_tenant_key(make_app):
    client = make_app(INTAKE_API_KEYS="acme:acme-key-123-0123456789ab").test_client()
    assert client.get("/metrics").status_code == 200
