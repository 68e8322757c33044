"""The embedding budget holds for every worker together (docs/architecture.md §16): real
`rq worker` processes (two per stack), the Procfile's web and the real HTTP embedding server,
which records when every request arrived and was answered.

Each test starts a stack of its own (logical database 9, emptied first) with the settings it
tests, and stops it afterwards:
- INTAKE_EMBEDDING_CONCURRENCY=1 with a slow embedder: the server never holds two requests at
  once, although two workers embed, and the one that waits says so while `running`;
- INTAKE_EMBEDDING_RPM=3: after three requests no worker sends a fourth; the document that waits
  shows the wait (about a minute, counted from the first request), stays `running` at attempt 1,
  and a cancel stops the wait; a search answers by words at once. Seeing the fourth request go
  60 s after the first would make the test a minute longer: the tests of jobs.embedding.budget
  (tests/unit/embedding/test_embedding_budget.py) prove on a short window that the waiter goes once
  the oldest request leaves it, and the wait shown here is that window's end;
- a 429 with Retry-After: 3: no request of any worker reaches the server before it passed, and
  every document succeeds at its first attempt;
- batches over 8 refused (a 413, then a 400 "too many inputs") with INTAKE_EMBEDDING_BATCH_SIZE=32:
  every document succeeds at its first attempt, every request the server took carried at most 8.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobs.core import keys
from tests.integration.faults import CANCEL_BOUND, POLL_INTERVAL, chunk_count, document, task
from tests.integration.fixtures import Stack, start_stack, stop_stack
from tests.integration.helpers import ApiClient, assert_stays, poll
from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal

pytestmark = pytest.mark.integration

DATABASE = 9
TIMEOUT = 90.0


@pytest.fixture
def budget_stack(
    redis_server, embedding_server, tmp_path_factory
) -> Iterator[Callable[..., Stack]]:
    """`budget_stack(**env)`: a web and two workers with the HTTP embedder and `env`."""
    started: list[Stack] = []

    def start(**env: str) -> Stack:
        stack = start_stack(
            redis_server,
            tmp_path_factory,
            "embedding-budget",
            DATABASE,
            {
                "INTAKE_EMBEDDING_URL": embedding_server.url,
                "INTAKE_EMBEDDING_TIMEOUT": "10",
                "INTAKE_MAX_ATTEMPTS": "3",
                "INTAKE_RETRY_BASE_SECONDS": "2",
                **env,
            },
            embedding=embedding_server,
        )
        started.append(stack)
        return stack

    yield start
    for stack in started:
        stop_stack(stack)


def submit(client: ApiClient, words: list[str], paragraphs: int = 6) -> list[str]:
    response, _ = upload(
        client, [txt(f"budget-{word}.txt", document(word, paragraphs)) for word in words]
    )
    assert response.status_code == 202, response.text[:500]
    return [t["id"] for t in response.json()["tasks"]]


def requests_of(stack: Stack, words: list[str]) -> list[Any]:
    return sorted((r for word in words for r in stack.embedding.received(word)), key=lambda r: r.at)


def waiting_task(client: ApiClient, task_ids: list[str], pattern: str) -> dict[str, Any]:
    """Until one task is `running` with a step_detail matching `pattern`; that snapshot."""

    def fetch() -> list[dict[str, Any]]:
        return [task(client, task_id) for task_id in task_ids]

    snaps = poll(
        fetch,
        lambda found: any(
            s["status"] == "running" and re.fullmatch(pattern, s["step_detail"]) for s in found
        ),
        timeout=TIMEOUT,
        interval=POLL_INTERVAL,
        message=f"a running task says {pattern!r}",
    )
    return next(s for s in snaps if re.fullmatch(pattern, s["step_detail"]))


def all_succeeded_at_first_attempt(client: ApiClient, task_ids: list[str]) -> None:
    final, history = wait_terminal(client, task_ids, timeout=TIMEOUT)
    for task_id, done in final.items():
        assert done["status"] == "succeeded", done
        assert done["attempts"] == 1 and done["error"] is None, done
        assert {s["attempts"] for s in history[task_id]} <= {0, 1}, history[task_id]
        assert "retrying" not in {s["status"] for s in history[task_id]}, history[task_id]


def test_concurrency_holds_across_workers_and_the_wait_shows(budget_stack):
    stack = budget_stack(INTAKE_EMBEDDING_CONCURRENCY="1")
    stack.embedding.mode = "slow:1"
    words = [unique_word() for _ in range(4)]
    with ApiClient(stack.url) as client:
        task_ids = submit(client, words)
        waiting = waiting_task(
            client,
            task_ids,
            r"Waiting for the embedding budget \(1 request at a time\): "
            r"\d+ s so far",
        )
        # A worker runs one job at a time: the waiter is in one process, the request it waits
        # for was sent by the other.
        assert stack.embedding.in_flight == 1, stack.embedding.log
        assert waiting["attempts"] == 1 and waiting["error"] is None, waiting
        assert waiting["current_step"] == "embedding", waiting
        all_succeeded_at_first_attempt(client, task_ids)
    calls = requests_of(stack, words)
    assert len(calls) == 4, calls
    assert stack.embedding.max_in_flight == 1, calls
    for earlier, later in zip(calls, calls[1:]):
        assert later.at >= earlier.ended, (earlier, later)


def test_requests_per_minute_hold_across_workers_and_a_wait_can_be_canceled(
    budget_stack, postgres_url
):
    stack = budget_stack(INTAKE_EMBEDDING_RPM="3", INTAKE_VECTOR_DATABASE_URL=postgres_url)
    words = [unique_word() for _ in range(4)]
    with ApiClient(stack.url) as client:
        task_ids = submit(client, words)
        poll(
            lambda: len(requests_of(stack, words)),
            lambda n: n >= 3,
            timeout=TIMEOUT,
            message="three requests",
        )
        first = requests_of(stack, words)[0].at
        waiting = waiting_task(
            client, task_ids, r"Waiting for the embedding budget \(3 requests/min\): \d+ s"
        )
        shown = int(re.search(r"(\d+) s$", waiting["step_detail"]).group(1))
        until_window_ends = 60 - (time.monotonic() - first)
        assert until_window_ends - 3 <= shown <= until_window_ends + 2, (shown, until_window_ends)
        assert waiting["attempts"] == 1 and waiting["error"] is None, waiting

        # No fourth request from either worker, the waiter still running at its first attempt.
        def state() -> tuple[int, str, int]:
            seen = task(client, waiting["id"])
            return len(requests_of(stack, words)), seen["status"], seen["attempts"]

        assert_stays(
            state,
            lambda v: v == (3, "running", 1),
            duration=5.0,
            message="the budget let a fourth request go, or the waiter failed",
        )

        # A search never waits for the budget: words at once, saying why.
        started = time.monotonic()
        found = get_json(client, f"/api/search?q={words[0]}")
        assert time.monotonic() - started < 2.0
        assert found["mode"] == "lexical", found
        assert "embedding budget (3 requests/min)" in found["notice"], found

        response = client.post(f"/api/tasks/{waiting['id']}/cancel")
        assert response.status_code == 202, response.text[:500]
        poll(
            lambda: task(client, waiting["id"])["status"],
            lambda s: s == "canceled",
            timeout=CANCEL_BOUND + 5,
            interval=POLL_INTERVAL,
            message="the waiter canceled",
        )
        others = [t for t in task_ids if t != waiting["id"]]
        all_succeeded_at_first_attempt(client, others)
    assert len(requests_of(stack, words)) == 3
    assert stack.redis().zcard(keys.embedding_window()) == 3


def test_a_retry_after_is_honoured_by_every_worker(budget_stack):
    stack = budget_stack()
    first, *rest = words = [unique_word() for _ in range(3)]
    stack.embedding.fail_next(1, "status:429:3", match=first)
    with ApiClient(stack.url) as client:
        task_ids = submit(client, [first])
        refused = poll(
            lambda: stack.embedding.received(first),
            lambda r: len(r) >= 1,
            timeout=TIMEOUT,
            message="the first request",
        )[0]
        assert refused.mode == "status:429:3"
        task_ids += submit(client, rest)  # the other worker takes one while the pause lasts
        waiting = waiting_task(
            client,
            task_ids,
            r"Waiting for the embedding service, which asked for a pause "
            r"\(HTTP 429\): \d s",
        )
        assert waiting["attempts"] == 1 and waiting["error"] is None, waiting
        all_succeeded_at_first_attempt(client, task_ids)
    later = [r for r in requests_of(stack, words) if r is not refused]
    assert len(later) == 3, later
    assert min(r.at for r in later) >= refused.at + 3.0 - 0.05, (refused, later)


@pytest.mark.parametrize("status", [413, 400])
def test_batches_refused_as_too_large_are_halved_for_every_worker(budget_stack, status):
    stack = budget_stack(INTAKE_EMBEDDING_BATCH_SIZE="32")
    stack.embedding.limit_inputs(8, status=status)
    words = [unique_word() for _ in range(2)]
    assert chunk_count(document(words[0], 60)) > 32
    with ApiClient(stack.url) as client:
        task_ids = submit(client, words, paragraphs=60)
        all_succeeded_at_first_attempt(client, task_ids)
    calls = requests_of(stack, words)
    refused = [r for r in calls if r.mode == f"too_many:{status}"]
    taken = [r for r in calls if r.mode == "ok"]
    assert all(len(r.inputs) <= 8 for r in taken), [len(r.inputs) for r in taken]
    # 32 → 16 → 8: two refusals per worker at most (both may try before either learnt).
    assert 2 <= len(refused) <= 4, [(r.mode, len(r.inputs)) for r in calls]
    assert sum(len(r.inputs) for r in taken) == sum(
        chunk_count(document(word, 60)) for word in words
    )
    assert stack.redis().get(keys.embedding_batch_limit()) == b"8"
