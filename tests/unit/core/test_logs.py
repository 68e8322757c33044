"""JSON log lines that follow a document from its upload to its index by one trace id."""

from __future__ import annotations

import io
import json
import logging

from jobs.core.logs import JsonFormatter


def test_one_trace_id_from_upload_to_index(client, run_jobs, caplog):
    caplog.set_level(logging.INFO, logger="intake")
    with client.post(
        "/api/documents",
        headers={"X-Request-ID": "req-12345678"},
        content_type="multipart/form-data",
        data={"files": [(io.BytesIO(b"Logged words."), "a.txt")]},
    ) as response:
        body = response.get_json()
    run_jobs()
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "intake"]
    mine = [line for line in lines if line.get("task_id") == body["tasks"][0]["id"]]
    assert [line["event"] for line in mine] == [
        "task_submitted",
        "attempt_started",
        "task_succeeded",
    ]
    assert {line["trace_id"] for line in mine} == {"req-12345678"}
    assert all(
        line["batch_id"] == body["batch_id"] and line["tenant"] == "default" for line in mine
    )


def test_an_upload_writes_its_lines_once_its_answer_is_sent(client, caplog):
    """Servers close a response after sending it (PEP 3333): that is when the lines appear."""
    caplog.set_level(logging.INFO, logger="intake")
    response = client.post(
        "/api/documents",
        content_type="multipart/form-data",
        data={
            "files": [(io.BytesIO(b"Some words."), "a.txt"), (io.BytesIO(b"Other words."), "b.txt")]
        },
    )
    assert [r for r in caplog.records if r.name == "intake"] == []
    response.close()
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "intake"]
    assert [(line["event"], line["task_id"]) for line in lines] == [
        ("task_submitted", task["id"]) for task in response.get_json()["tasks"]
    ]


def test_an_implausible_request_id_is_not_trusted(client, caplog):
    caplog.set_level(logging.INFO, logger="intake")
    with client.post(
        "/api/documents",
        headers={"X-Request-ID": "<script>"},
        content_type="multipart/form-data",
        data={"files": [(io.BytesIO(b"Words."), "a.txt")]},
    ) as response:
        batch_id = response.get_json()["batch_id"]
    traces = {
        getattr(r, "intake", {}).get("trace_id") for r in caplog.records if r.name == "intake"
    }
    assert traces == {batch_id}
