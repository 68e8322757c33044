"""Fault injection on the running system, shared by the failure tests: the fault stack's
bounds and margins, long documents, the RQ job and work-horse behind a task, pages' forms.

The failure tests run on the `fault` stack (tests/integration/fixtures.py): its own logical
Redis database, the Procfile's web and two `rq worker` processes, all using the HTTP embedder
pointed at the test's embedding server (INTAKE_EMBEDDING_TIMEOUT=4, INTAKE_MAX_ATTEMPTS=3,
INTAKE_RETRY_BASE_SECONDS=2). Each test makes its own documents with a uuid-derived word and
counts only the embedding requests that carry it.

Product bounds and their margins:
- a running task is `canceled` within 2 s of the cancel request's answer (docs/architecture.md §8),
  and its attempt has stopped by then; measured by polling every 50 ms, so the assertion allows
  one poll interval on top (2.05 s);
- a task whose worker died with its work-horse (a lost machine) leaves `running` within 2 min
  (docs/architecture.md §8): asserted ≤ 120 s after the kill, no extra margin (docs/deploying.md
  works it out at about 70 s);
- a task whose work-horse alone was killed is retried or failed within 30 s (RQ notices a dead
  horse at once; the reconciler's grace is 10 s);
- the backoff before attempts 2 and 3 is base·2^n ± 20 % in whole seconds: 2 s, then 3–5 s with
  a base of 2 s, read from `next_attempt_at`; the gaps the embedding server measured between
  attempts are checked against lower bounds 1 s below those delays, because RQ's scheduler keeps
  a retry's due time in whole seconds (it truncates the timestamp) and so may start it up to 1 s
  early.
"""

from __future__ import annotations

import io
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from pypdf import PdfReader, PdfWriter
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.registry import FailedJobRegistry

from jobs.core.settings import QUEUE_NAMES
from jobs.text.chunking import chunk_text
from tests.integration.fixtures import Stack
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, iso, txt, upload
from tests.samples import make_pdf

CANCEL_BOUND = 2.0  # docs/architecture.md §8: a running task stops within 2 s
POLL_INTERVAL = 0.05  # every poll below; the cancel bound allows one on top
CRASH_BOUND = 120.0  # docs/architecture.md §8: a lost worker's task leaves running < 2 min
HORSE_BOUND = 30.0  # a killed work-horse alone is noticed at once; 30 s is a wide margin
TASK_TIMEOUT = 60.0  # a small document through three attempts (2 s + 3–5 s of backoff)
SLOW = "slow:3"  # an embedding request that takes 3 s: below the 4 s timeout
NOT_RETRIED_FOR = 4.0  # > the 2 s first backoff + 1 s of RQ scheduling + a fork


def document(word: str, paragraphs: int = 6) -> str:
    """A text of `paragraphs` ~650-character paragraphs (1000-character chunks: several chunks),
    every one carrying `word` so that every chunk (and every embedding request) does."""
    return "\n\n".join(
        f"Paragraph {n}. "
        + " ".join(
            f"The {word} report, part {n}.{m}, explains how the quarterly figures were "
            f"reconciled with the ledger."
            for m in range(6)
        )
        for n in range(paragraphs)
    )


def chunk_count(text: str) -> int:
    return len(chunk_text(text, 1000, 150))  # the stack's INTAKE_CHUNK_SIZE / _OVERLAP defaults


def submit_one(client: ApiClient, name: str, text: str) -> str:
    response, _ = upload(client, [txt(name, text)])
    assert response.status_code == 202, f"upload: {response.status_code} {response.text[:500]}"
    tasks = response.json()["tasks"]
    assert len(tasks) == 1 and tasks[0]["duplicate"] is False, tasks
    return tasks[0]["id"]


def task(client: ApiClient, task_id: str) -> dict[str, Any]:
    return get_json(client, f"/api/tasks/{task_id}")


def rq_job_status(stack: Stack, job_id: str) -> str | None:
    """The RQ job's own status (None: no job), read through RQ."""
    try:
        return Job.fetch(job_id, connection=stack.redis()).get_status().value
    except NoSuchJobError:
        return None


def in_failed_registry(stack: Stack, task_id: str) -> bool:
    connection = stack.redis()
    return any(
        task_id in FailedJobRegistry(name, connection=connection).get_job_ids(cleanup=False)
        for name in QUEUE_NAMES
    )


def failed_ids(client: ApiClient) -> list[str]:
    return [t["id"] for t in get_json(client, "/api/failed?limit=200")["tasks"]]


def seconds_between(earlier: str, later: str) -> float:
    return (iso(later, "later") - iso(earlier, "earlier")).total_seconds()


def wait_running_in_embedding(
    client: ApiClient, stack: Stack, task_id: str, word: str, timeout: float = TASK_TIMEOUT
) -> dict[str, Any]:
    """Until the task is `running` with an embedding request of it held by the (slow) server:
    the attempt is in its embedding step. (The record's `current_step` is not used: progress
    writes are throttled and a deferred one waits for the next write, so during the first slow
    batch the record may still say "parsing".)"""

    def fetch() -> tuple[dict[str, Any], int]:
        return task(client, task_id), len(stack.embedding.received(word))

    seen, _ = poll(
        fetch,
        lambda v: v[0]["status"] == "running" and v[1] >= 1,
        timeout=timeout,
        interval=POLL_INTERVAL,
        message="task running with an embedding request held by the embedder",
    )
    return seen


class _Forms(HTMLParser):
    """The attributes of every <form> of a page (a bare `hidden` attribute maps to None)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "form":
            self.forms.append(dict(attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def task_page(client: ApiClient, task_id: str) -> tuple[dict[str, str | None], str]:
    """GET /tasks/<id>: (the attributes of its Retry form, the page's text)."""
    response = client.get(f"/tasks/{task_id}")
    assert response.status_code == 200, (response.status_code, response.text[:500])
    assert response.headers["Content-Type"].startswith("text/html"), response.headers
    page = _Forms()
    page.feed(response.text)
    retry_forms = [f for f in page.forms if f.get("data-action") == "retry"]
    assert len(retry_forms) == 1, page.forms
    return retry_forms[0], " ".join(" ".join(page.text).split())


def encrypted_pdf(text: str) -> bytes:
    """A PDF that opens only with the user password "secret"."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(text))))
    writer.encrypt("secret")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def children(pid: int) -> list[tuple[int, int]]:
    """(pid, process group) of every child of `pid`, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append((int(stat.parent.name), int(fields[2])))
    return found


def running_worker(stack: Stack, task_id: str) -> tuple[str, int, int]:
    """(worker name, worker pid, work-horse pid) of the worker running `task_id`'s job.

    RQ records the worker's name on the job; the pool knows its pid; the horse is the child that
    RQ put in a process group of its own (the scheduler, the other possible child, is not)."""
    name = Job.fetch(task_id, connection=stack.redis()).worker_name or ""
    assert name in stack.workers.processes, (name, stack.workers.names)
    pid = stack.workers.processes[name].pid
    assert pid is not None
    horses = poll(
        lambda: [child for child, group in children(pid) if child == group],
        lambda found: len(found) == 1,
        timeout=5,
        interval=POLL_INTERVAL,
        message=f"the work-horse of worker {name} (pid {pid})",
    )
    return name, pid, horses[0]
