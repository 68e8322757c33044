"""What a user of Intake's API does and checks, shared by every test of the running system:
upload files, wait for their tasks, read JSON, and the contract's shapes (docs/architecture.md §3–5)
and readable messages to compare what comes back with.
"""

from __future__ import annotations

import string
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from tests.integration.helpers import ApiClient, poll

STATUSES = {"pending", "running", "retrying", "succeeded", "failed", "canceled"}
TERMINAL = {"succeeded", "failed", "canceled"}
CURRENT_STEPS = {
    "queued",
    "parsing",
    "chunking",
    "embedding",
    "indexing",
    "done",
    "waiting_retry",
    "failed",
    "canceled",
}
PIPELINE = ["parsing", "chunking", "embedding", "indexing"]
TASK_TIMEOUT = 60.0  # seconds for a small document to reach a terminal state on a busy machine
# docs/architecture.md §2 promises an answer "in milliseconds"; 1 s leaves a wide margin for a
# loaded CI machine (two gunicorn workers, two rq workers and pytest sharing a couple of CPUs).
UPLOAD_BOUND = 1.0


def unique_word() -> str:
    """A nonsense word of letters only (a tokenizer may split digits off), unique per run."""
    return "zq" + "".join(string.ascii_lowercase[int(c, 16)] for c in uuid.uuid4().hex[:12])


def upload(client: ApiClient, files: list[tuple[str, bytes, str]], **form: str):
    """POST /api/documents with repeated `files` parts; returns (response, seconds taken)."""
    parts = [("files", (name, content, mimetype)) for name, content, mimetype in files]
    started = time.perf_counter()
    response = client.post("/api/documents", files=parts, data=form)
    return response, time.perf_counter() - started


def txt(name: str, text: str) -> tuple[str, bytes, str]:
    return name, text.encode("utf-8"), "text/plain"


def get_json(client: ApiClient, path: str) -> dict[str, Any]:
    response = client.get(path)
    assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text[:500]}"
    return response.json()


def wait_terminal(
    client: ApiClient, task_ids: list[str], timeout: float = TASK_TIMEOUT
) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """Poll every task until all are terminal; returns (final task by id, every snapshot by id)."""
    history: dict[str, list[dict]] = {task_id: [] for task_id in task_ids}

    def fetch() -> dict[str, str]:
        for task_id in task_ids:
            if not history[task_id] or history[task_id][-1]["status"] not in TERMINAL:
                history[task_id].append(get_json(client, f"/api/tasks/{task_id}"))
        return {task_id: snaps[-1]["status"] for task_id, snaps in history.items()}

    poll(
        fetch,
        lambda statuses: set(statuses.values()) <= TERMINAL,
        timeout=timeout,
        message="every task terminal",
    )
    return {task_id: snaps[-1] for task_id, snaps in history.items()}, history


def iso(value: Any, what: str) -> datetime:
    """Parse an ISO 8601 timestamp (naive ones are read as UTC) or fail naming the field."""
    assert isinstance(value, str), f"{what} should be an ISO 8601 string, got {value!r}"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise AssertionError(f"{what} is not ISO 8601: {value!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_hex_id(value: Any) -> bool:
    return isinstance(value, str) and len(value) >= 32 and all(c in string.hexdigits for c in value)


def task_shape_problems(task: dict[str, Any]) -> list[str]:
    """Every way `task` departs from the field list and types of docs/architecture.md §4 (empty:
    conforms)."""
    problems: list[str] = []

    def check(ok: bool, text: str) -> None:
        if not ok:
            problems.append(text)

    for name, kind in (
        ("id", str),
        ("batch_id", str),
        ("document_id", str),
        ("filename", str),
        ("status", str),
        ("current_step", str),
        ("step_detail", str),
        ("created_at", str),
        ("updated_at", str),
        ("steps", list),
    ):
        check(
            isinstance(task.get(name), kind),
            f"{name} should be {kind.__name__}: {task.get(name)!r}",
        )
    for name in ("progress", "attempts", "max_attempts", "poll_after_ms"):
        check(is_int(task.get(name)), f"{name} should be an int: {task.get(name)!r}")
    for name in ("next_attempt_at", "started_at", "ended_at"):
        check(
            name in task and (task[name] is None or isinstance(task[name], str)),
            f"{name} should be null or a string: {task.get(name, '<missing>')!r}",
        )
    check(
        "result" in task and (task["result"] is None or isinstance(task["result"], dict)),
        f"result should be null or an object: {task.get('result', '<missing>')!r}",
    )
    check(is_hex_id(task.get("id")), f"id should be ≥ 32 hex chars: {task.get('id')!r}")
    check(
        is_hex_id(task.get("batch_id")),
        f"batch_id should be ≥ 32 hex chars: {task.get('batch_id')!r}",
    )
    check(task.get("status") in STATUSES, f"status not one of the six: {task.get('status')!r}")
    check(
        task.get("current_step") in CURRENT_STEPS,
        f"current_step not allowed: {task.get('current_step')!r}",
    )
    if is_int(task.get("progress")):
        check(0 <= task["progress"] <= 100, f"progress outside 0–100: {task['progress']}")
    if is_int(task.get("poll_after_ms")):
        check(task["poll_after_ms"] > 0, f"poll_after_ms should be > 0: {task['poll_after_ms']}")
    error = task.get("error", "<missing>")
    check(
        error is None
        or (
            isinstance(error, dict)
            and all(isinstance(error.get(k), str) for k in ("step", "type", "message"))
            and isinstance(error.get("retryable"), bool)
        ),
        f"error should be null or {{step, type, message: str, retryable: bool}}: {error!r}",
    )
    check(task.get("url") == f"/api/tasks/{task.get('id')}", f"url: {task.get('url')!r}")
    check(task.get("page_url") == f"/tasks/{task.get('id')}", f"page_url: {task.get('page_url')!r}")
    for name in ("created_at", "updated_at", "started_at", "ended_at", "next_attempt_at"):
        if isinstance(task.get(name), str):
            try:
                iso(task[name], name)
            except AssertionError as exc:
                problems.append(str(exc))
    return problems


def batch_summary_problems(batch: dict[str, Any]) -> list[str]:
    problems = []
    if not is_hex_id(batch.get("id")):
        problems.append(f"batch id should be ≥ 32 hex chars: {batch.get('id')!r}")
    if batch.get("status") not in {
        "pending",
        "running",
        "succeeded",
        "failed",
        "canceled",
        "partial",
    }:
        problems.append(f"batch status: {batch.get('status')!r}")
    if not (is_int(batch.get("progress")) and 0 <= batch["progress"] <= 100):
        problems.append(f"batch progress should be an int 0–100: {batch.get('progress')!r}")
    counts = batch.get("counts")
    if not (
        isinstance(counts, dict)
        and set(counts) >= STATUSES
        and all(is_int(counts[s]) for s in STATUSES)
    ):
        problems.append(f"counts should have all six statuses as ints, zeros included: {counts!r}")
    if not isinstance(batch.get("created_at"), str):
        problems.append(f"batch created_at should be a string: {batch.get('created_at')!r}")
    return problems


def readable_problems(message: Any) -> list[str]:
    """Why `message` is not a short sentence for a person (empty: it is one)."""
    if not isinstance(message, str) or not message.strip():
        return [f"error.message should be a non-empty string: {message!r}"]
    problems = []
    for marker in ("Traceback", 'File "', "<class ", "Error(", "\n  "):
        if marker in message:
            problems.append(
                f"error.message looks like a traceback or repr ({marker!r}): {message!r}"
            )
    if len(message) >= 300:
        problems.append(f"error.message is {len(message)} chars (≥ 300): {message!r}")
    if " " not in message.strip():
        problems.append(f"error.message is not a sentence: {message!r}")
    return problems
