"""A long scan is read in page ranges by every free worker, as one task (docs/architecture.md,
"Scans in page ranges"): real gunicorn, real rq workers running the real OCR engine, a real
redis-server.

Each page of the generated scans carries one word no other page has, so a search for it says
whether that page was read, and read once.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from urllib.parse import quote

import pytest
from rq import Worker
from rq.job import Job
from rq.registry import FinishedJobRegistry, StartedJobRegistry

from jobs.core import keys
from jobs.worker.scan_reading import READ_FUNCTION, SPLIT_AT
from tests.integration.faults import children
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, iso, txt, upload, wait_terminal
from tests.samples import make_scan_pdf

pytestmark = pytest.mark.integration

SCAN_BOUND = 300.0  # seconds for a 30-page scan on a loaded 2-core machine, with margin
CANCEL_BOUND = 2.0  # the promise (docs/architecture.md §8) …
CANCEL_MARGIN = 1.5  # … and what a loaded machine adds to a worker's answer to RQ's stop command
WORDS = (
    "harbour lantern granite meadow orchard quarry saddle timber violet walnut anchor "
    "beacon canyon dolphin ember falcon glacier hazel island jasmine kettle lagoon marble "
    "nectar oyster pepper quartz raven salmon tundra"
).split()


def _scan(pages: int) -> bytes:
    return make_scan_pdf(
        [[f"Survey page {n}", f"The {WORDS[n - 1]} was recorded here"] for n in range(1, pages + 1)]
    )


def _task(client: ApiClient, task_id: str) -> dict:
    return get_json(client, f"/api/tasks/{task_id}")


def _submit_scan(client: ApiClient, name: str, pages: int) -> str:
    response, _ = upload(client, [(name, _scan(pages), "application/pdf")])
    assert response.status_code == 202, response.text
    return response.json()["tasks"][0]["id"]


def _hits(client: ApiClient, word: str, task_id: str) -> list[dict]:
    results = get_json(client, f"/api/search?q={quote(word)}&k=50")["results"]
    return [hit for hit in results if hit["task_id"] == task_id]


def _range_jobs(connection, task_id: str) -> list[Job]:
    """The range jobs of the task that RQ still knows, in any registry or queue."""
    ids = set()
    for queue_name in [
        q.decode().removeprefix("rq:queue:") for q in connection.smembers("rq:queues")
    ]:
        ids.update(FinishedJobRegistry(queue_name, connection=connection).get_job_ids())
        ids.update(StartedJobRegistry(queue_name, connection=connection).get_job_ids())
    jobs = [job for job in Job.fetch_many(sorted(ids), connection=connection) if job]
    return [job for job in jobs if job.func_name == READ_FUNCTION and job.args[0] == task_id]


def _assert_every_page_read_once(client: ApiClient, task_id: str, pages: int) -> None:
    """Every page's text is in the document's chunks, in order, and none twice (chunks overlap:
    a page may end one chunk and start the next)."""
    chunks = get_json(client, f"/api/tasks/{task_id}/chunks?limit=100")["chunks"]
    seen: list[int] = []
    for chunk in chunks:
        numbers = [int(n) for n in re.findall(r"Survey page (\d+)", chunk["text"])]
        while seen and numbers and numbers[0] <= seen[-1]:
            numbers.pop(0)  # the overlap with the chunk before
        seen += numbers
    assert seen == list(range(1, pages + 1)), chunks
    assert _hits(client, "survey", task_id), "the scan is not found by search"


def _kill_with_descendants(pid: int) -> None:
    family, looked = [pid], 0
    while looked < len(family):
        family += [child for child, _ in children(family[looked])]
        looked += 1
    for member in family:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)


def _reading_pages(client: ApiClient, task_id: str, at_least: int) -> dict:
    return poll(
        lambda: _task(client, task_id),
        lambda t: (
            (
                t["step_detail"].startswith("OCR page")
                and int(t["step_detail"].split()[2]) >= at_least
            )
            or t["status"] not in ("pending", "running")
        ),
        timeout=SCAN_BOUND,
        interval=0.1,
        message=f"OCR past page {at_least}",
    )


def test_a_long_scan_is_read_by_both_workers_and_indexed_once(api, redis_server):
    connection = redis_server.client()
    task_id = _submit_scan(api, "survey.pdf", 16)
    seen = _reading_pages(api, task_id, 2)
    assert seen["step_detail"].endswith(" of 16"), seen  # one count over every range
    final = wait_terminal(api, [task_id], timeout=SCAN_BOUND)[0][task_id]
    assert final["status"] == "succeeded", final["error"]
    assert (final["result"]["pages"], final["result"]["ocr_pages"]) == (16, 16), final["result"]
    assert final["attempts"] == 1
    _assert_every_page_read_once(api, task_id, 16)

    task_worker = Job.fetch(task_id, connection=connection).worker_name
    readers = {
        job.worker_name
        for job in _range_jobs(connection, task_id)
        if (job.return_value() or {}).get("read") is not None
    }
    assert readers - {task_worker}, ("no range was read by the other worker", readers)
    assert not connection.exists(keys.page_ranges(task_id))  # nothing left behind


def test_a_short_scan_is_read_by_its_own_job_alone(api, redis_server):
    task_id = _submit_scan(api, "short-survey.pdf", SPLIT_AT - 1)
    final = wait_terminal(api, [task_id], timeout=SCAN_BOUND)[0][task_id]
    assert final["status"] == "succeeded", final["error"]
    assert final["result"]["ocr_pages"] == SPLIT_AT - 1
    assert _range_jobs(redis_server.client(), task_id) == []


def test_a_worker_killed_mid_range_loses_only_that_range(api, workers, redis_server):
    connection = redis_server.client()
    task_id = _submit_scan(api, "killed-survey.pdf", 30)
    _reading_pages(api, task_id, 3)
    task_worker = Job.fetch(task_id, connection=connection).worker_name

    def other_reader():
        for reader in connection.hkeys(keys.page_range_readers(task_id)):
            job = Job.fetch(reader.decode(), connection=connection)
            if job.worker_name and job.worker_name != task_worker:
                return job.worker_name
        return None

    victim = poll(
        other_reader, timeout=SCAN_BOUND, interval=0.1, message="a range read by the other worker"
    )
    _kill_with_descendants(workers.processes[victim].pid)  # a lost machine: worker, horse, reader
    killed = time.monotonic()
    final = wait_terminal(api, [task_id], timeout=SCAN_BOUND)[0][task_id]
    print(f"the scan succeeded {time.monotonic() - killed:.1f} s after its range's reader was lost")
    assert final["status"] == "succeeded", final["error"]
    assert final["attempts"] == 1  # the task's job was never lost: only a range was read again
    assert final["result"]["ocr_pages"] == 30
    _assert_every_page_read_once(api, task_id, 30)


def test_a_cancel_stops_every_range(api, workers, redis_server):
    connection = redis_server.client()
    task_id = _submit_scan(api, "canceled-survey.pdf", 30)
    _reading_pages(api, task_id, 3)
    poll(
        lambda: len(connection.hkeys(keys.page_range_readers(task_id))),
        lambda n: n >= 2,
        timeout=SCAN_BOUND,
        interval=0.1,
        message="two ranges read at once",
    )
    asked = time.monotonic()
    response = api.post(f"/api/tasks/{task_id}/cancel")
    assert response.status_code == 202, response.text

    def busy() -> list[str]:
        return [
            (w.name, w.get_current_job_id(), getattr(w.get_current_job(), "func_name", None))
            for w in Worker.all(connection=connection)
            if w.name in workers.names and w.get_state() == "busy"
        ]  # not a killed one

    poll(
        busy,
        lambda names: not names,
        timeout=CANCEL_BOUND + CANCEL_MARGIN,
        interval=0.05,
        message="every worker free after the cancel",
    )
    took = time.monotonic() - asked
    print(f"every range stopped {took:.2f} s after the cancel")
    assert _task(api, task_id)["status"] == "canceled"
    # Range jobs still queued end at once, reading nothing.
    response, _ = upload(api, [txt("after-the-cancel.txt", "A note written after the cancel.")])
    after = response.json()["tasks"][0]["id"]
    assert wait_terminal(api, [after], timeout=60)[0][after]["status"] == "succeeded"
    assert _task(api, task_id)["status"] == "canceled"


def test_small_files_behind_a_big_scan_finish_first(api):
    scan_id = _submit_scan(api, "big-survey.pdf", 30)
    _reading_pages(api, scan_id, 2)
    response, _ = upload(api, [txt(f"note-{n}.txt", f"A short note number {n}.") for n in range(6)])
    assert response.status_code == 202, response.text
    notes = [t["id"] for t in response.json()["tasks"]]
    done = wait_terminal(api, notes, timeout=SCAN_BOUND)[0]
    assert all(done[n]["status"] == "succeeded" for n in notes), done
    final = wait_terminal(api, [scan_id], timeout=SCAN_BOUND)[0][scan_id]
    assert final["status"] == "succeeded", final["error"]
    last_note = max(iso(done[n]["ended_at"], "ended_at") for n in notes)
    assert last_note < iso(final["ended_at"], "ended_at"), "the notes waited for the whole scan"


def test_a_range_whose_ocr_fails_fails_the_task_with_its_pages(web, make_workers, worker_pool):
    worker_pool.stop_all()  # only workers whose OCR page deadline no page can meet
    make_workers(2, INTAKE_OCR_PAGE_TIMEOUT="0.01")
    with ApiClient(web.url) as client:
        task_id = _submit_scan(client, "unreadable-survey.pdf", 12)
        final = wait_terminal(client, [task_id], timeout=SCAN_BOUND)[0][task_id]
    assert final["status"] == "failed"
    error = final["error"]
    assert error["type"] == "parse_timeout" and not error["retryable"], error
    assert final["attempts"] == 1
    assert re.match(r"Pages \d+–\d+: OCR stopped at ", error["message"]), error
