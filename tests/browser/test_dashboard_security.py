"""rq-dashboard at /rq in Chromium under its Content-Security-Policy (webapp/security.py): its own
pages work with no violation and no console error, and markup injected through job meta or
description (which it renders unescaped) cannot run script (docs/architecture.md §6, §10).

The web is the Procfile's, with INTAKE_ADMIN_PASSWORD, on the session's Redis; the probe jobs
are enqueued straight into RQ on a queue no worker listens to, so they stay `queued`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import requests
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from rq import Queue
from rq.job import Job

from tests.integration.helpers import poll
from tests.integration.intake_api import unique_word
from tests.integration.processes import ProcessGroup
from tests.integration.servers import WebServer
from tests.samples import make_pdf_pages

PASSWORD = "csp-operator-secret"
CREDENTIALS = {"username": "admin", "password": PASSWORD}
# rq-dashboard shows meta as json.dumps(meta) (double quotes become \"), so the handler is
# single-quoted to stay valid script: only the policy can stop it. Description is not escaped.
META_PAYLOAD = "<img src=x onerror='window.__xss=1'>"
DESCRIPTION_PAYLOAD = "<img src=y onerror='window.__xss=2'>"
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(
    {directive: e.effectiveDirective, blocked: e.blockedURI, sample: e.sample}));
"""
OUTCOME = "({ran: window.__xss !== undefined, blocked: window.__violations})"


@pytest.fixture(scope="module")
def operator_web(redis_server, intake_env, tmp_path_factory) -> Iterator[WebServer]:
    group = ProcessGroup(tmp_path_factory.mktemp("logs-operator-web"))
    server = WebServer(group, {**intake_env, "INTAKE_ADMIN_PASSWORD": PASSWORD})
    try:
        server.start()
        yield server
    finally:
        group.stop_all()


@pytest.fixture
def probe_queue(redis_server) -> Iterator[Queue]:
    """A queue of Intake's Redis that no worker listens to; deleted with its jobs afterwards."""
    queue = Queue(f"csp-probe-{uuid.uuid4().hex[:8]}", connection=redis_server.client())
    yield queue
    queue.delete(delete_jobs=True)


def _enqueue(queue: Queue, meta: dict, description: str):
    job = queue.enqueue("builtins.print", "probe", description=description)
    job.meta.update(meta)
    job.save_meta()
    return job


def _wait_for_status(page, status: str) -> None:
    """The job page's own script has fetched the job and rendered it."""
    shown = page.locator("#job-data p", has_text="Status")
    shown.wait_for(timeout=10_000)
    assert status in shown.inner_text()


def _violations(page) -> list[dict]:
    return page.evaluate("window.__violations")


def test_dashboard_pages_render_their_data_under_the_policy(
    operator_web, workers, probe_queue, open_page
):
    job = _enqueue(probe_queue, {"progress": 40, "current_step": "parsing"}, "a plain probe")
    page = open_page(operator_web.url, http_credentials=CREDENTIALS)  # fails on console errors
    page.add_init_script(RECORD_VIOLATIONS)

    response = page.goto("/rq/")  # the queues page (/rq/0/view/queues redirects here)
    assert "'sha256-" in response.headers["content-security-policy"]
    page.locator("tr[data-role=queue]", has_text=probe_queue.name).wait_for(timeout=10_000)
    assert _violations(page) == []

    page.goto("/rq/0/view/workers")
    for name in workers.names:
        page.locator("tr[data-role=worker]", has_text=name).wait_for(timeout=10_000)
    assert _violations(page) == []

    page.goto(f"/rq/0/view/jobs/{probe_queue.name}/queued/8/asc/1")
    page.locator(f"tr[data-role=job][data-job-id='{job.id}']").wait_for(timeout=10_000)
    assert _violations(page) == []

    page.goto(f"/rq/0/view/job/{job.id}")
    _wait_for_status(page, "queued")
    text = page.locator("#job-data").inner_text()
    assert probe_queue.name in text and "current_step" in text and "a plain probe" in text
    assert _violations(page) == []


def test_markup_in_job_meta_cannot_run_script_on_the_job_page(operator_web, probe_queue, chromium):
    job = _enqueue(probe_queue, {"note": META_PAYLOAD}, DESCRIPTION_PAYLOAD)
    context = chromium.new_context(base_url=operator_web.url, http_credentials=CREDENTIALS)
    try:
        page = context.new_page()
        page.add_init_script(RECORD_VIOLATIONS)
        page.goto(f"/rq/0/view/job/{job.id}")
        _wait_for_status(page, "queued")
        assert page.locator("#job-data img").count() == 2, "the markup reached the DOM"
        poll(
            lambda: page.evaluate(OUTCOME),
            lambda seen: seen["ran"] or len(seen["blocked"]) >= 2,
            timeout=10,
            message="each injected handler either ran or was reported as blocked",
        )
        assert page.evaluate("window.__xss") is None, "the injected handler ran"
        violations = _violations(page)
        assert len(violations) == 2 and {v["directive"] for v in violations} == {"script-src-attr"}
    finally:
        context.close()


# An upload named with markup (issue 11 item 2): the name is user text that Intake itself once
# put into job meta ("Reading <name>"). Single quotes survive rq-dashboard's json.dumps of meta.
MARKUP_NAME = "<img src=x onerror='window.__xss=3'>.pdf"


def _dashboard_fields(job) -> str:
    """Everything of a job that rq-dashboard renders unescaped, as one text."""
    job.refresh()
    result = job.latest_result()
    return json.dumps(
        [
            job.get_meta(),
            job.description,
            job.args,
            job.kwargs,
            result.exc_string if result else None,
        ]
    )


def test_an_upload_named_with_markup_runs_no_script_on_its_job_page(
    operator_web, workers, redis_server, open_page
):
    word = unique_word()
    # The job page is opened while the job runs or after: its meta names the document, escaped,
    # from its first progress write on.
    pdf = make_pdf_pages([f"Page {n} of the {word} report." for n in range(4000)])
    response = requests.post(
        f"{operator_web.url}/api/documents",
        timeout=30,
        files=[("files", (MARKUP_NAME, pdf, "application/pdf"))],
    )
    assert response.status_code == 202, response.text
    task_id = response.json()["tasks"][0]["id"]
    connection = redis_server.client()

    page = open_page(operator_web.url, http_credentials=CREDENTIALS)
    page.add_init_script(RECORD_VIOLATIONS)
    # The name is shown as text: the job's meta carries it escaped (reloaded until the first
    # attempt has written it).
    shown = page.locator("#job-data", has_text="onerror='window.__xss=3'")

    def load() -> bool:
        page.goto(f"/rq/0/view/job/{task_id}")
        try:
            shown.wait_for(timeout=3_000)
        except PlaywrightTimeout:
            return False
        return True

    poll(load, timeout=60, interval=0.1, message="the job page showing the document's name")
    assert page.locator("#job-data img").count() == 0, "markup of the upload reached the DOM"

    seen: list[str] = []

    def fetch() -> bytes | None:
        seen.append(_dashboard_fields(Job.fetch(task_id, connection=connection)))
        return connection.hget(f"intake:task:{task_id}", "status")

    poll(
        fetch,
        lambda status: status in (b"succeeded", b"failed"),
        timeout=60,
        interval=0.1,
        message="the job finished",
    )
    raw = [fields for fields in seen if "<img" in fields]
    assert seen and raw == [], f"user text reached the dashboard unescaped: {raw[:1]}"
    assert page.evaluate("window.__xss") is None, "a script of the upload ran"
    assert _violations(page) == [], "nothing needed blocking: the name was never markup"
