"""Failures as a person sees them in Chromium, on the fault stack (its own web, workers and Redis
database, with the real HTTP embedding server whose faults the tests script; 3 attempts, a 2 s
retry base): a row goes `retrying`, then `failed` with its reason and a Retry button; after the
embedder heals, Retry from the page makes it succeed; a bad file's row says what to fix and
offers no Retry; Cancel from the page stops a running task within 2 s (docs/architecture.md §3, §6,
§8).

The README's screenshots are taken here: the batch page at the end of the first test, the failed
task page in the middle of it.
"""

from __future__ import annotations

import re
import time

from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from tests.browser.conftest import SCREENSHOTS
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import unique_word
from tests.samples import make_pdf_no_text
from webapp.display import ADVICE

CANCEL_BOUND = 2.0  # docs/architecture.md §8: a running task is canceled within 2 s
POLL_INTERVAL = 0.05  # how often the test looks at the row; the bound allows one on top
# RQ statuses after which an attempt writes nothing more.
ATTEMPT_OVER = {JobStatus.STOPPED, JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED}
FAILED_WITHIN = 60.0  # three attempts against a 503 (2 s, then 3–5 s of backoff) on a busy machine


def _upload(stack, files):
    with ApiClient(stack.url) as client:
        response = client.post("/api/documents", files=[("files", f) for f in files])
        assert response.status_code == 202, response.text
        return response.json()


def _status(row) -> str | None:
    return row.get_attribute("data-status", timeout=2000)


def _long_text(word: str, chunks: int) -> bytes:
    """About `chunks` chunks of 1000 characters: more than one embedding request of 64 chunks."""
    sentence = f"The {word} ledger lists one more entry in a long and careful record. "
    return (sentence * (chunks * 1000 // len(sentence))).encode()


def test_failing_embedder_then_retry_from_the_page(fault, open_page):
    word = unique_word()
    fault.embedding.mode = "status:503"
    body = _upload(
        fault,
        [
            (f"flaky-{word}.txt", f"Notes about {word}. More notes.".encode()),
            (f"scan-{word}.pdf", make_pdf_no_text()),
            (f"held-{word}.txt", f"Held back: {word}.".encode()),
        ],
    )
    flaky, scan, held = (t["id"] for t in body["tasks"])
    with ApiClient(fault.url) as client:
        assert client.post(f"/api/tasks/{held}/cancel").status_code == 202
    page = open_page(fault.url)
    page.goto(body["page_url"])
    row, bad = page.locator(f"#t-{flaky}"), page.locator(f"#t-{scan}")

    poll(
        lambda: _status(row),
        lambda s: s == "retrying",
        timeout=30,
        interval=0.1,
        message="the flaky row shows retrying",
    )
    assert re.fullmatch(
        r"Attempt [23] of 3 (in \d+ s|soon)", row.locator("[data-field=status_text]").inner_text()
    )
    assert row.locator("[data-field=error]").inner_text().startswith("Embedding: ")
    assert not row.locator("form[data-action=retry]").is_visible()
    assert row.locator("form[data-action=cancel]").is_visible()

    poll(
        lambda: _status(row),
        lambda s: s == "failed",
        timeout=FAILED_WITHIN,
        interval=0.2,
        message="the flaky row fails after its attempts",
    )
    assert row.locator("[data-field=status_text]").inner_text().startswith("Failed: ")
    assert row.locator("[data-field=attempts]").inner_text() == "3 of 3"
    assert row.locator("[data-field=step_detail]").inner_text() == "Stopped in Embedding"
    assert row.locator("[data-field=advice]").inner_text() == ADVICE[True]
    assert row.locator("form[data-action=retry] button").is_visible()
    assert _status(bad) == "failed"
    assert "no text" in bad.locator("[data-field=status_text]").inner_text().lower()
    assert bad.locator("[data-field=step_detail]").inner_text() == "Stopped in Parsing"
    assert bad.locator("[data-field=advice]").inner_text() == ADVICE[False], "what to fix"
    assert not bad.locator("form[data-action=retry]").is_visible(), "a bad file has no Retry"
    assert page.locator("form[data-batch-action=retry-failed]").is_visible()

    task_page = open_page(fault.url)
    task_page.goto(f"/tasks/{flaky}")
    assert task_page.locator("[data-field=error]").inner_text().startswith("Embedding: ")
    assert task_page.locator("[data-field=advice]").inner_text() == ADVICE[True]
    assert task_page.locator("[data-field=attempts]").inner_text() == "3 of 3"
    assert task_page.locator("form[data-action=retry] button").is_visible()
    assert not task_page.locator("form[data-action=cancel]").is_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    task_page.screenshot(path=str(SCREENSHOTS / "failed-task.png"), full_page=True)

    fault.embedding.mode = "ok"
    row.locator("form[data-action=retry] button").click()  # POST, redirect, the page again
    page.wait_for_url(f"**{body['page_url']}#t-{flaky}")
    seen = poll(
        lambda: _status(row),
        lambda s: s != "failed",
        timeout=5,
        interval=0.05,
        message="the row goes back to work",
    )
    assert seen in ("pending", "running", "succeeded")
    poll(
        lambda: row.locator("[data-field=status_text]").inner_text(),
        lambda text: text == "Succeeded",
        timeout=30,
        interval=0.1,
        message="the retried row succeeds without a reload",
    )
    assert row.locator("progress").evaluate("b => b.value") == 100
    assert not row.locator("[data-field=advice]").is_visible()
    poll(
        lambda: page.locator("[data-field=batch_status]").inner_text(),
        lambda text: text == "Finished (mixed)",
        timeout=10,
        message="the batch is done",
    )
    page.screenshot(path=str(SCREENSHOTS / "batch.png"), full_page=True)

    page.locator("[data-filter=failed]").focus()  # the filter works from the keyboard, in place
    page.keyboard.press("Enter")
    assert page.url.endswith(f"{body['page_url']}?status=failed")
    assert page.locator("tr.task-row:visible").count() == 1 and bad.is_visible()
    assert page.locator("[data-filter=failed]").get_attribute("aria-current") == "true"


def _job_status(fault, job_id: str) -> str:
    try:
        return Job.fetch(job_id, connection=fault.redis()).get_status(refresh=False)
    except NoSuchJobError:
        return "gone"


def test_cancel_from_the_page_while_running(fault, open_page):
    word = unique_word()
    fault.embedding.mode = "slow:3"  # each request of 64 chunks takes 3 s (timeout: 4 s)
    body = _upload(fault, [(f"long-{word}.txt", _long_text(word, 200))])
    task_id = body["tasks"][0]["id"]
    page = open_page(fault.url)
    page.goto(body["page_url"])
    row = page.locator(f"#t-{task_id}")
    poll(
        lambda: row.locator("[data-field=step_detail]").inner_text(),
        lambda text: text.startswith("Embedding chunks"),
        timeout=30,
        interval=0.1,
        message="the row shows the task embedding",
    )
    assert _status(row) == "running"

    started = time.monotonic()
    row.locator("form[data-action=cancel] button").click()
    poll(
        lambda: row.locator("[data-field=status_text]").inner_text(timeout=1000),
        lambda text: text == "Canceled",
        timeout=CANCEL_BOUND + 3,
        interval=POLL_INTERVAL,
        message="the row says Canceled",
        ignore=(Exception,),
    )
    elapsed = time.monotonic() - started
    assert elapsed <= CANCEL_BOUND + POLL_INTERVAL, f"Canceled after {elapsed:.2f} s"
    assert row.locator("form[data-action=retry] button").is_visible()
    assert not row.locator("form[data-action=cancel]").is_visible()
    # The stopping attempt never overwrites the cancel: read the task once the attempt is over.
    # (Gone is over too: once RQ records the stop, the reconciler deletes the stopped job,
    # which may be before this line; CI saw it.)
    poll(
        lambda: _job_status(fault, task_id),
        lambda status: status in ATTEMPT_OVER | {"gone"},
        timeout=10,
        message="the canceled attempt ended",
    )
    with ApiClient(fault.url) as client:
        task = client.get(f"/api/tasks/{task_id}").json()
    assert task["status"] == "canceled" and task["progress"] < 100


def test_the_batch_page_says_how_long_is_left_while_it_runs(fault, open_page):
    word = unique_word()
    fault.embedding.mode = "slow:1.5"  # each document takes ≥ 1.5 s: the estimate can be seen
    body = _upload(
        fault, [(f"eta-{word}-{n}.txt", f"Document {n}: {word}.".encode()) for n in range(8)]
    )
    page = open_page(fault.url)
    page.goto(body["page_url"])
    eta = page.locator("[data-field=batch_eta]")
    poll(
        lambda: eta.inner_text(),
        lambda text: text.endswith("left"),
        timeout=60,
        interval=0.1,
        message="the page shows how long is left once a document finished",
    )
    assert re.fullmatch(r"less than a minute left|about \d+ min left", eta.inner_text())
    poll(
        lambda: page.locator("[data-field=batch_status]").inner_text(),
        lambda text: text == "Succeeded",
        timeout=90,
        message="the batch finishes",
    )
    assert eta.inner_text() == "", "nothing is left once the batch is done"
