"""A batch's ETA (docs/architecture.md §16): from its own finished documents and the workers at
work."""

from __future__ import annotations

from jobs.core import keys
from jobs.tasks import eta
from tests.unit.conftest import upload
from webapp.display import eta_text


def row(status, progress=0, seconds=None):
    return {"status": status, "progress": progress, "seconds": seconds}


def test_no_estimate_before_a_document_finished_or_without_workers():
    assert eta.estimate([row("pending"), row("running", 50)], workers=2) is None
    assert eta.estimate([row("succeeded", 100, 10.0), row("pending")], workers=0) is None
    assert eta.estimate([], workers=2) is None


def test_what_is_left_in_documents_times_the_median_divided_by_the_workers():
    rows = [
        row("succeeded", 100, 10.0),
        row("succeeded", 100, 30.0),
        row("failed", 0, 20.0),
        row("running", 50),
        row("pending"),
        row("pending"),
        row("retrying", 0),
    ]
    # 3.5 documents left × median 20 s ÷ 2 workers
    assert eta.estimate(rows, workers=2) == 35
    assert eta.estimate(rows, workers=8) == 18, "no more workers at work than live tasks"
    assert eta.estimate([row("succeeded", 100, 5.0), row("canceled")], workers=2) == 0


def test_a_task_s_time_is_first_start_to_end():
    assert (
        eta.seconds_taken(
            {
                "status": "succeeded",
                "started_at": "2026-12-02T10:00:00.000Z",
                "ended_at": "2026-12-02T10:01:30.500Z",
            }
        )
        == 90.5
    )
    assert eta.seconds_taken({"status": "running", "started_at": "2026-12-02T10:00:00Z"}) is None
    assert (
        eta.seconds_taken(
            {"status": "failed", "started_at": "nonsense", "ended_at": "2026-12-02T10:00:00Z"}
        )
        is None
    )


def test_the_page_words_it():
    assert [eta_text(s) for s in (None, 0, 20, 170, 5400)] == [
        "",
        "",
        "less than a minute left",
        "about 3 min left",
        "about 1.5 h left",
    ]


def test_the_batch_json_has_eta_seconds_once_a_document_finished(client, redis):
    batch = upload(client, ("a.txt", b"Some words."), ("b.txt", b"Other words.")).get_json()
    first, second = (t["id"] for t in batch["tasks"])
    assert client.get(batch["url"]).get_json()["eta_seconds"] is None
    redis.hset(
        keys.task(first),
        mapping={
            "status": "succeeded",
            "progress": 100,
            "started_at": "2026-12-02T10:00:00.000Z",
            "ended_at": "2026-12-02T10:00:12.000Z",
        },
    )
    redis.sadd("rq:workers", "rq:worker:w1")
    redis.sadd("rq:workers:intake", "rq:worker:w1")  # a worker of the ingestion queues
    answer = client.get(batch["url"]).get_json()
    assert answer["eta_seconds"] == 12, answer
    page = client.get(f"/batches/{batch['batch_id']}").get_data(as_text=True)
    assert "less than a minute left" in page
