"""rq-dashboard at /rq on a real Redis: operators only, read-only, showing Intake's queues and
workers as `rq info` does, under a Content-Security-Policy of its own (docs/architecture.md §2, §6,
§10)."""

from __future__ import annotations

import base64
import hashlib
import io
import re
import uuid

from rq import Queue

from jobs.core.settings import QUEUE_NAMES
from webapp import create_app, security

ADMIN = {"Authorization": "Basic " + base64.b64encode(b"admin:op-secret").decode()}


def _client(redis_server, **config):
    return create_app({"REDIS_URL": redis_server.url, "SECRET_KEY": "x", **config}).test_client()


def test_dashboard_needs_operator_credentials(redis_server):
    guarded = _client(redis_server, INTAKE_ADMIN_PASSWORD="op-secret")
    assert guarded.get("/rq/").status_code == 401
    assert (
        guarded.get(
            "/rq/", headers={"Authorization": "Basic " + base64.b64encode(b"admin:wrong").decode()}
        ).status_code
        == 401
    )
    assert guarded.get("/rq/", headers=ADMIN).status_code == 200
    assert _client(redis_server).get("/rq/").status_code == 403, "no password: closed"


def test_dashboard_lists_intakes_queues_and_workers_without_delete_actions(redis_server, workers):
    client = _client(redis_server, INTAKE_ADMIN_PASSWORD="op-secret")
    for priority in ("high", "normal", "bulk"):  # RQ lists a queue once a job was enqueued
        response = client.post(
            "/api/documents",
            content_type="multipart/form-data",
            data={"priority": priority, "files": [(io.BytesIO(priority.encode() * 20), "p.txt")]},
        )
        assert response.status_code == 202
    queues = {
        q["name"] for q in client.get("/rq/0/data/queues.json", headers=ADMIN).get_json()["queues"]
    }
    assert set(QUEUE_NAMES) <= queues
    listed = {
        w["name"]
        for w in client.get("/rq/0/data/workers.json", headers=ADMIN).get_json()["workers"]
    }
    assert set(workers.names) <= listed
    page = client.get("/rq/0/view/jobs/intake/failed/8/asc/1", headers=ADMIN)
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'data-role="delete-job-btn"' not in html and 'id="empty-btn"' not in html
    assert client.post("/rq/queue/intake/failed/empty", headers=ADMIN).status_code == 403


INLINE_SCRIPT = re.compile(r'<script type="text/javascript">(.*?)</script>', re.S)


def _sha256(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def test_dashboard_pages_allow_exactly_their_own_inline_script(redis_server):
    """The policy the browser test proves in Chromium, checked here as headers and hashes."""
    client = _client(redis_server, INTAKE_ADMIN_PASSWORD="op-secret")
    queue = Queue(f"csp-{uuid.uuid4().hex[:8]}", connection=redis_server.client())
    job = queue.enqueue("builtins.print", "probe")
    try:
        for url in (
            "/rq/",
            "/rq/0/view/workers",
            f"/rq/0/view/job/{job.id}",
            f"/rq/0/view/jobs/{queue.name}/queued/8/asc/1",
        ):
            response = client.get(url, headers=ADMIN)
            html = response.get_data(as_text=True)
            directives = dict(
                part.strip().split(" ", 1)
                for part in response.headers["Content-Security-Policy"].split(";")
            )
            inline = INLINE_SCRIPT.findall(html)
            assert response.status_code == 200 and len(inline) == 1, url
            assert set(directives["script-src"].split()) == {
                "'self'",
                "'unsafe-eval'",
                _sha256(inline[0]),
            }, url
            assert directives["script-src-attr"] == "'none'"
            assert directives["object-src"] == "'none'" and directives["base-uri"] == "'self'"
            assert (
                directives["frame-ancestors"] == "'none'"
                and "unsafe" not in directives["style-src-elem"]
            )
    finally:
        queue.delete(delete_jobs=True)
    data = client.get("/rq/0/data/queues.json", headers=ADMIN)
    assert data.headers["Content-Security-Policy"] == security.CSP
    for url in ("/", "/api/health"):
        assert client.get(url).headers["Content-Security-Policy"] == security.CSP, url
