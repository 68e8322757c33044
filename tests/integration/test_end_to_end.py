"""End to end through the real system: the Procfile's gunicorn, two `rq worker` processes and a
real redis-server. What is asserted is what a user of the API sees (docs/architecture.md §3–5, §7).

Every test makes its own batch with uuid-derived words, so reruns and any test order work.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import pytest
from rq import Worker

from tests.integration.helpers import ApiClient, assert_stays
from tests.integration.intake_api import (
    PIPELINE,
    STATUSES,
    UPLOAD_BOUND,
    batch_summary_problems,
    get_json,
    is_hex_id,
    is_int,
    iso,
    readable_problems,
    task_shape_problems,
    txt,
    unique_word,
    upload,
    wait_terminal,
)
from tests.samples import make_docx, make_html, make_pdf, make_pdf_no_text

pytestmark = pytest.mark.integration

# ---------------------------------------------------------------- the five formats


@dataclass
class Ingested:
    """One upload of five formats, followed until every task was terminal."""

    response: Any
    seconds: float
    body: dict[str, Any]
    files: dict[str, str]  # filename -> its unique word
    final: dict[str, dict] = field(default_factory=dict)
    history: dict[str, list[dict]] = field(default_factory=dict)


@pytest.fixture(scope="module")
def five_formats(web, worker_pool) -> Iterator[Ingested]:
    worker_pool.ensure(2)
    words = {ext: unique_word() for ext in ("txt", "md", "html", "pdf", "docx")}
    names = {ext: f"e2e-{word}.{ext}" for ext, word in words.items()}
    files = [
        txt(
            names["txt"],
            f"The {words['txt']} report explains how the quarterly figures were reconciled.\n",
        ),
        (
            names["md"],
            (
                f"# Release notes\n\nThe {words['md']} checklist lists every step of the release.\n"
            ).encode(),
            "text/markdown",
        ),
        (
            names["html"],
            make_html(
                "Opening hours", f"The {words['html']} page describes when the office opens."
            ),
            "text/html",
        ),
        (
            names["pdf"],
            make_pdf(f"The {words['pdf']} handbook covers travel expenses."),
            "application/pdf",
        ),
        (
            names["docx"],
            make_docx([f"The {words['docx']} memo summarises the planning meeting."]),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ),
    ]
    with ApiClient(web.url) as client:
        response, seconds = upload(client, files)
        assert response.status_code == 202, f"upload: {response.status_code} {response.text[:1000]}"
        body = response.json()
        ingested = Ingested(response, seconds, body, {names[ext]: words[ext] for ext in words})
        ingested.final, ingested.history = wait_terminal(client, [t["id"] for t in body["tasks"]])
    yield ingested


def test_five_formats_are_accepted_at_once_processed_and_searchable(five_formats, api):
    response, body = five_formats.response, five_formats.body
    assert response.status_code == 202
    assert five_formats.seconds < UPLOAD_BOUND, f"upload answered in {five_formats.seconds:.3f} s"
    batch_id = body["batch_id"]
    assert is_hex_id(batch_id), batch_id
    assert urlparse(response.headers.get("Location", "")).path == f"/api/batches/{batch_id}", (
        response.headers.get("Location")
    )
    assert body["url"] == f"/api/batches/{batch_id}"
    assert body["page_url"] == f"/batches/{batch_id}"
    assert body["rejected"] == []
    assert sorted(t["filename"] for t in body["tasks"]) == sorted(five_formats.files)
    for task in body["tasks"]:
        assert set(task) >= {
            "id",
            "document_id",
            "filename",
            "status",
            "duplicate",
            "url",
            "page_url",
        }, task
        assert is_hex_id(task["id"]), task
        assert task["document_id"] == task["filename"], task  # architecture.md §9
        assert task["status"] in STATUSES and task["duplicate"] is False, task
        assert (
            task["url"] == f"/api/tasks/{task['id']}" and task["page_url"] == f"/tasks/{task['id']}"
        )

    for task_id, snapshots in five_formats.history.items():
        final = five_formats.final[task_id]
        name = final["filename"]
        assert final["status"] == "succeeded", (name, final)
        by_attempt: dict[int, list[int]] = {}
        for snap in snapshots:
            by_attempt.setdefault(snap["attempts"], []).append(snap["progress"])
        for attempt, seen in by_attempt.items():
            assert seen == sorted(seen), (
                f"{name}: progress decreased within attempt {attempt}: {seen}"
            )
        assert final["progress"] == 100, (name, final)
        assert final["current_step"] == "done", (name, final)
        assert final["error"] is None, (name, final)
        assert final["attempts"] == 1, (name, final)
        assert [s.get("name") for s in final["steps"]] == PIPELINE, (name, final["steps"])
        previous_end = None
        for step in final["steps"]:
            started = iso(step.get("started_at"), f"{name} {step['name']}.started_at")
            ended = iso(step.get("ended_at"), f"{name} {step['name']}.ended_at")
            assert ended >= started, (name, step)
            assert previous_end is None or started >= previous_end, (name, final["steps"])
            previous_end = ended
        result = final["result"]
        assert isinstance(result, dict), (name, final)
        assert is_int(result.get("chunks")) and result["chunks"] >= 1, (name, result)
        assert is_int(result.get("pages")) and is_int(result.get("characters")), (name, result)
        assert result["characters"] > 0, (name, result)

    for task_id, final in five_formats.final.items():
        word = five_formats.files[final["filename"]]
        found = get_json(api, f"/api/search?q={word}&k=5")
        hits = [
            r
            for r in found["results"]
            if r.get("task_id") == task_id and r.get("document_id") == final["document_id"]
        ]
        assert hits, f"search for {word!r} did not find {final['filename']}: {found}"
        assert word in hits[0]["text"] and hits[0]["filename"] == final["filename"], hits[0]


def test_a_restart_of_the_web_process_loses_nothing(five_formats, web):
    web.restart()
    with ApiClient(web.url) as client:
        for task_id, before in five_formats.final.items():
            after = get_json(client, f"/api/tasks/{task_id}")
            assert after["status"] == before["status"], (before, after)
            assert after["result"] == before["result"], (before, after)
        listed = get_json(client, "/api/batches")
        assert five_formats.body["batch_id"] in [b["id"] for b in listed["batches"]], listed


# ---------------------------------------------------------------- shapes


def test_task_and_batch_json_carry_every_field_of_the_contract(api):
    word = unique_word()
    response, _ = upload(api, [txt(f"shape-{word}.txt", f"The {word} note is about field shapes.")])
    assert response.status_code == 202, response.text
    task_id = response.json()["tasks"][0]["id"]
    batch_id = response.json()["batch_id"]

    early = get_json(api, f"/api/tasks/{task_id}")  # whatever state it is in by now
    assert task_shape_problems(early) == [], early

    final = wait_terminal(api, [task_id])[0][task_id]
    assert task_shape_problems(final) == [], final
    assert final["status"] == "succeeded" and final["batch_id"] == batch_id, final
    assert final["max_attempts"] == 2, final  # INTAKE_MAX_ATTEMPTS of the harness
    assert final["next_attempt_at"] is None and final["error"] is None, final
    assert iso(final["ended_at"], "ended_at") >= iso(final["started_at"], "started_at")
    assert iso(final["started_at"], "started_at") >= iso(final["created_at"], "created_at")

    batch = get_json(api, f"/api/batches/{batch_id}")
    assert batch_summary_problems(batch) == [], batch
    assert batch["id"] == batch_id
    assert batch["status"] == "succeeded" and batch["progress"] == 100, batch
    assert {s: batch["counts"][s] for s in STATUSES} == {
        "pending": 0,
        "running": 0,
        "retrying": 0,
        "succeeded": 1,
        "failed": 0,
        "canceled": 0,
    }
    assert isinstance(batch["tasks"], list) and [t["id"] for t in batch["tasks"]] == [task_id]
    assert task_shape_problems(batch["tasks"][0]) == [], batch["tasks"][0]
    assert batch["tasks"][0]["status"] == "succeeded"


@pytest.mark.parametrize("kind", ["tasks", "batches"])
def test_an_unknown_id_is_a_json_404(api, kind):
    response = api.get(f"/api/{kind}/{uuid.uuid4().hex}")
    assert response.status_code == 404, response.text[:500]
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    error = response.json()["error"]
    assert isinstance(error["code"], str) and error["code"], error
    assert isinstance(error["message"], str) and error["message"], error


def test_an_unchanged_task_or_batch_answers_304(api):
    word = unique_word()
    response, _ = upload(api, [txt(f"etag-{word}.txt", f"The {word} note is cached by ETag.")])
    assert response.status_code == 202, response.text
    task_id, batch_id = response.json()["tasks"][0]["id"], response.json()["batch_id"]
    wait_terminal(api, [task_id])
    for path in (f"/api/tasks/{task_id}", f"/api/batches/{batch_id}"):
        first = api.get(path)
        assert first.status_code == 200 and first.headers.get("ETag"), (path, first.headers)
        second = api.get(path, headers={"If-None-Match": first.headers["ETag"]})
        assert second.status_code == 304, (path, second.status_code, second.text[:300])
        assert second.content == b"", (path, second.content[:300])


# ---------------------------------------------------------------- bad files


def test_bad_files_fail_at_once_with_a_readable_reason(api):
    word = unique_word()
    scanned, broken = f"scan-{word}.pdf", f"broken-{word}.docx"
    files = [
        (scanned, make_pdf_no_text(), "application/pdf"),
        (
            broken,
            make_docx([f"The {word} memo."])[:100],
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ),
    ]
    response, _ = upload(api, files)
    assert response.status_code == 202, response.text[:1000]
    body = response.json()
    assert body["rejected"] == [], body  # both look like their type; only parsing can tell
    task_ids = [t["id"] for t in body["tasks"]]
    assert len(task_ids) == 2, body

    final, _ = wait_terminal(api, task_ids)
    for task in final.values():
        assert task["status"] == "failed", task
        assert task["attempts"] == 1, task
        assert task["next_attempt_at"] is None, task
        error = task["error"]
        assert isinstance(error, dict) and error.get("retryable") is False, task
        assert error.get("step") == "parsing", task
        assert readable_problems(error.get("message")) == [], task
        assert task_shape_problems(task) == [], task

    # Permanent means no automatic retry: with a 1 s retry base one would have started by now.
    def fetch() -> list[tuple[str, int]]:
        return [
            (t["status"], t["attempts"])
            for t in (get_json(api, f"/api/tasks/{i}") for i in task_ids)
        ]

    assert_stays(
        fetch,
        lambda states: states == [("failed", 1)] * 2,
        duration=3.0,
        message="a permanently failed task was retried",
    )

    batch = get_json(api, f"/api/batches/{body['batch_id']}")
    assert batch["status"] == "failed" and batch["counts"]["failed"] == 2, batch


# ---------------------------------------------------------------- listing and health


def test_recent_batches_are_listed_newest_first(api):
    ids = []
    for n in range(2):
        word = unique_word()
        response, _ = upload(api, [txt(f"list-{n}-{word}.txt", f"The {word} note number {n}.")])
        assert response.status_code == 202, response.text
        ids.append(response.json()["batch_id"])
    older, newer = ids

    response = api.get("/api/batches")
    assert response.status_code == 200, response.text[:500]
    assert response.headers["Content-Type"].startswith("application/json")
    batches = response.json()["batches"]
    listed = [b["id"] for b in batches]
    assert newer in listed and older in listed, listed
    assert listed.index(newer) < listed.index(older), listed
    for batch in batches:
        assert batch_summary_problems(batch) == [], batch
    created = [iso(b["created_at"], "created_at") for b in batches]
    assert created == sorted(created, reverse=True), [b["created_at"] for b in batches]


def test_health_reports_redis_and_both_workers(api, workers, redis_server):
    response = api.get("/api/health")
    assert response.status_code == 200, response.text[:500]
    health = response.json()
    redis_state = health.get("redis")
    assert redis_state in ("ok", True) or (
        isinstance(redis_state, dict)
        and (redis_state.get("ok") is True or redis_state.get("status") == "ok")
    ), health
    registered = {w.name for w in Worker.all(connection=redis_server.client())}
    assert health["workers"]["count"] == len(registered) >= 2, (health, registered)
    assert set(workers.names) <= set(health["workers"]["names"]), health
