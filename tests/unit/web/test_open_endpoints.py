"""What answers without credentials names no tenant: /api/health and /metrics fold each tenant's
queues into their priority's shared name; an operator (basic auth `admin`, or the dev runner's
local mode from loopback) still sees every tenant's queue."""

from __future__ import annotations

import base64
import io

import pytest
from prometheus_client.parser import text_string_to_metric_families

KEYS = "acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"
PASSWORD = "operator-secret"
ACME = {"Authorization": "Bearer acme-key-123-0123456789ab"}
GLOBEX = {"Authorization": "Bearer globex-key-456-0123456789ab"}
OPERATOR = {"Authorization": "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()}
TENANTS = ("acme", "globex")


def _upload(client, headers, count: int = 1) -> None:
    data = {"files": [(io.BytesIO(f"Words {n}.".encode()), f"{n}.txt") for n in range(count)]}
    answer = client.post(
        "/api/documents", data=data, headers=headers, content_type="multipart/form-data"
    )
    assert answer.status_code == 202


@pytest.fixture
def busy(make_app):
    """Two tenants with work waiting: acme one high-priority task, globex a bulk batch."""
    client = make_app(INTAKE_API_KEYS=KEYS, INTAKE_ADMIN_PASSWORD=PASSWORD).test_client()
    _upload(client, ACME)
    _upload(client, GLOBEX, count=60)
    return client


def _names_no_tenant(text: str) -> bool:
    return not any(tenant in text for tenant in TENANTS)


@pytest.mark.parametrize("headers", [{}, ACME], ids=["anonymous", "a-tenant"])
def test_health_names_no_tenant_without_operator_credentials(busy, headers):
    answer = busy.get("/api/health", headers=headers)
    assert answer.status_code == 200
    assert _names_no_tenant(answer.get_data(as_text=True)), answer.get_data(as_text=True)
    health = answer.get_json()
    assert health["redis"] == "ok" and health["scheduler"] is False
    assert health["workers"] == {"count": 0, "names": []}
    assert health["queues"] == {"intake-high": 1, "intake": 0, "intake-bulk": 60}
    assert health["priorities"] == {"high": 1, "normal": 0, "bulk": 60}
    assert health["unscheduled"] == ["intake-high", "intake", "intake-bulk"]


def test_health_gives_operators_every_tenants_queue(busy):
    health = busy.get("/api/health", headers=OPERATOR).get_json()
    assert (
        health["queues"]["intake-high.acme"] == 1 and health["queues"]["intake-bulk.globex"] == 60
    )
    assert "intake-bulk.globex" in health["unscheduled"]
    assert health["priorities"] == {"high": 1, "normal": 0, "bulk": 60}


def test_the_dev_runners_local_mode_counts_as_an_operator_from_loopback(make_app):
    client = make_app(INTAKE_API_KEYS=KEYS, INTAKE_LOCAL_MODE=True).test_client()
    _upload(client, ACME)
    assert client.get("/api/health").get_json()["queues"]["intake-high.acme"] == 1
    remote = client.get("/api/health", environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert _names_no_tenant(remote.get_data(as_text=True))


def _metrics(client, headers=None) -> tuple[str, dict]:
    answer = client.get("/metrics", headers=headers or {})
    assert answer.status_code == 200
    text = answer.get_data(as_text=True)
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return text, values


def test_metrics_name_no_tenant_without_operator_credentials(busy):
    text, values = _metrics(busy)
    assert _names_no_tenant(text), text
    assert values[("intake_tasks_submitted_total", (("queue", "intake-bulk"),))] == 60
    assert values[("intake_tasks_submitted_total", (("queue", "intake-high"),))] == 1
    assert values[("intake_queue_depth", (("queue", "intake-bulk"),))] == 60


def test_metrics_give_operators_every_tenants_queue(busy):
    _, values = _metrics(busy, OPERATOR)
    assert values[("intake_tasks_submitted_total", (("queue", "intake-bulk.globex"),))] == 60
    assert values[("intake_queue_depth", (("queue", "intake-high.acme"),))] == 1


def test_the_sign_in_page_names_no_tenant(busy):
    page = busy.get("/signin")
    assert page.status_code == 200 and _names_no_tenant(page.get_data(as_text=True))


def test_metrics_give_the_store_s_use_in_all_and_per_tenant_to_operators(busy):
    _, anonymous = _metrics(busy)
    _, operator = _metrics(busy, OPERATOR)
    per_tenant = {
        labels: value for (name, labels), value in operator.items() if name == "intake_stored_bytes"
    }
    assert set(per_tenant) == {(("tenant", "acme"),), (("tenant", "globex"),)}, per_tenant
    assert all(value > 0 for value in per_tenant.values()), per_tenant
    assert anonymous[("intake_stored_bytes", ())] == sum(per_tenant.values())
