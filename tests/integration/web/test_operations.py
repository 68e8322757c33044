"""Operating Intake against the real system: metrics across processes, health while Redis is
down, RQ's own CLI, and two separately started workers sharing one batch (docs/architecture.md §2,
§5)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import requests
from prometheus_client.parser import text_string_to_metric_families
from rq.job import Job

from jobs.core.settings import QUEUE_NAMES
from tests.integration.helpers import poll
from tests.integration.intake_api import txt, unique_word, upload, wait_terminal
from tests.samples import make_pdf_no_text


def _metrics(api) -> dict[tuple[str, tuple], float]:
    response = api.get("/metrics")
    assert response.status_code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def test_metrics_count_what_happened_across_web_and_worker_processes(api):
    """The Procfile's web runs 2 gunicorn processes and the session 2 workers: every count
    lands in the same numbers whichever process served or worked."""
    before = _metrics(api)
    word = unique_word()
    files = [txt(f"m{i}-{word}.txt", f"Metric doc {i} {word}.") for i in range(4)]
    files.append(("scan.pdf", make_pdf_no_text(), "application/pdf"))
    response, _ = upload(api, files, priority="normal")
    wait_terminal(api, [t["id"] for t in response.json()["tasks"]])
    after = _metrics(api)

    def delta(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert delta("intake_tasks_submitted_total", queue="intake") == 5
    assert delta("intake_tasks_finished_total", status="succeeded") == 4
    assert delta("intake_tasks_finished_total", status="failed") == 1
    # Steps are timed when they complete: the bad PDF's parsing did not.
    assert delta("intake_step_duration_seconds_count", step="parsing") == 4
    assert after[("intake_workers", ())] >= 2


def test_health_is_503_while_redis_is_down_and_200_after(api, redis_server):
    assert api.get("/api/health").status_code == 200
    redis_server.stop(persist=True)
    try:
        down = api.get("/api/health")
        assert down.status_code == 503 and down.headers["Retry-After"]
        assert "Redis" in down.json()["error"]["message"]
    finally:
        redis_server.start()
    poll(
        lambda: api.get("/api/health").status_code,
        lambda status: status == 200,
        timeout=30,
        message="health answers 200 again",
        ignore=(requests.RequestException,),
    )


def test_rq_info_lists_intakes_queues_and_workers(redis_server, workers):
    output = subprocess.run(
        [sys.executable, "-m", "rq.cli", "info", "--url", redis_server.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    for name in QUEUE_NAMES:
        assert name in output
    for name in workers.names:
        assert name in output


def test_two_separately_started_workers_share_a_batch_and_process_each_document_once(
    api, workers, make_workers, redis_server
):
    for name in list(workers.names):  # only the two workers of this test may take the batch
        workers.stop(name)
    pair = make_workers(2)
    word = unique_word()
    files = [txt(f"w{i}-{word}.txt", f"Shared work {i} {word}. " * 40) for i in range(50)]
    response, _ = upload(api, files, priority="normal")
    task_ids = [t["id"] for t in response.json()["tasks"]]
    final, _ = wait_terminal(api, task_ids, timeout=180)
    assert {t["status"] for t in final.values()} == {"succeeded"}
    assert all(t["attempts"] == 1 for t in final.values()), "no document was processed twice"
    connection = redis_server.client()
    by_worker = Counter(
        Job.fetch(task_id, connection=connection).worker_name for task_id in task_ids
    )
    assert set(by_worker) == set(pair.names) and min(by_worker.values()) > 0, by_worker


def test_one_persons_document_overtakes_a_bulk_backlog(api, workers):
    """300 documents queued on intake-bulk with both workers about to be busy: a single upload
    goes to intake-high, which every worker takes first."""
    for name in list(workers.names):
        workers.stop(name)
    word = unique_word()
    bulk = [txt(f"bulk{i}-{word}.txt", f"Bulk document {i} {word}. " * 20) for i in range(300)]
    bulk_batch = upload(api, bulk)[0].json()
    bulk_ids = [t["id"] for t in bulk_batch["tasks"]]
    single = upload(api, [txt(f"urgent-{word}.txt", f"Urgent {word}.")])[0].json()["tasks"][0]
    workers.ensure(2)
    poll(
        lambda: api.get(single["url"]).json()["status"],
        lambda s: s == "succeeded",
        timeout=60,
        message="the single document succeeds",
    )
    done = api.get(bulk_batch["url"]).json()["counts"]["succeeded"]
    assert done < 150, f"{done} of 300 bulk documents were done before the single one"
    wait_terminal(api, bulk_ids, timeout=300)


def test_uploads_unconfirmed_without_a_replica_are_counted_and_health_says_so(api):
    """A real redis-server with no replica attached: ROLE answers `master` with none online, so
    uploads are accepted unconfirmed, counted by reason `no_replica`."""
    before = _metrics(api)
    word = unique_word()
    upload(api, [txt(f"u-{word}.txt", f"Unconfirmed {word}.")])
    after = _metrics(api)
    key = ("intake_uploads_unconfirmed_total", (("reason", "no_replica"),))
    assert after[key] - before.get(key, 0) == 1
    assert after[("intake_redis_replicas_online", ())] == 0
    health = api.get("/api/health").json()
    assert health["replication"] == {
        "role": "master",
        "replicas_online": 0,
        "uploads_confirmed": False,
        "role_refused": False,
    }
