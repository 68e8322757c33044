"""rq-dashboard at /rq on a real Redis: operators only, read-only, showing Intake's queues and
workers as `rq info` does (DESIGN §10, §12)."""
from __future__ import annotations

import base64
import io

from jobs.settings import QUEUE_NAMES
from webapp import create_app

ADMIN = {"Authorization": "Basic " + base64.b64encode(b"admin:op-secret").decode()}


def _client(redis_server, **config):
    return create_app({"REDIS_URL": redis_server.url, "SECRET_KEY": "x", **config}).test_client()


def test_dashboard_needs_operator_credentials(redis_server):
    guarded = _client(redis_server, INTAKE_ADMIN_PASSWORD="op-secret")
    assert guarded.get("/rq/").status_code == 401
    assert guarded.get("/rq/", headers={"Authorization": "Basic " + base64.b64encode(
        b"admin:wrong").decode()}).status_code == 401
    assert guarded.get("/rq/", headers=ADMIN).status_code == 200
    assert _client(redis_server).get("/rq/").status_code == 403, "no password: closed"


def test_dashboard_lists_intakes_queues_and_workers_without_delete_actions(redis_server,
                                                                           workers):
    client = _client(redis_server, INTAKE_ADMIN_PASSWORD="op-secret")
    for priority in ("high", "normal", "bulk"):  # RQ lists a queue once a job was enqueued
        response = client.post("/api/documents", content_type="multipart/form-data", data={
            "priority": priority, "files": [(io.BytesIO(priority.encode() * 20), "p.txt")]})
        assert response.status_code == 202
    queues = {q["name"] for q in client.get("/rq/0/data/queues.json", headers=ADMIN)
              .get_json()["queues"]}
    assert set(QUEUE_NAMES) <= queues
    listed = {w["name"] for w in client.get("/rq/0/data/workers.json", headers=ADMIN)
              .get_json()["workers"]}
    assert set(workers.names) <= listed
    page = client.get("/rq/0/view/jobs/intake/failed/8/asc/1", headers=ADMIN)
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'data-role="delete-job-btn"' not in html and 'id="empty-btn"' not in html
    assert client.post("/rq/queue/intake/failed/empty", headers=ADMIN).status_code == 403
