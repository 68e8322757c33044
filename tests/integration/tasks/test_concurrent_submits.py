"""Ten identical uploads at once make one task (docs/architecture.md §9): one claim wins, nine
answer it as a duplicate, every batch lists it, and it is embedded once.

On the fault stack, with its bounds and margins: tests/integration/faults.py.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.integration.faults import TASK_TIMEOUT, document
from tests.integration.helpers import ApiClient
from tests.integration.intake_api import get_json, unique_word, wait_terminal

pytestmark = pytest.mark.integration


def test_ten_concurrent_identical_submits_make_one_task(fault):
    word = unique_word()
    name, content = f"double-{word}.txt", document(word).encode()
    start = threading.Barrier(10)
    answers: list[Any] = [None] * 10

    def submit(slot: int) -> None:
        with ApiClient(fault.url) as client:
            start.wait(timeout=10)
            answers[slot] = client.post(
                "/api/documents", files=[("files", (name, content, "text/plain"))]
            )

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert all(a is not None and a.status_code == 202 for a in answers), [
        a and (a.status_code, a.text[:200]) for a in answers
    ]
    entries = [a.json()["tasks"] for a in answers]
    assert all(len(tasks) == 1 for tasks in entries), entries
    ids = {tasks[0]["id"] for tasks in entries}
    assert len(ids) == 1, ids
    assert sorted(tasks[0]["duplicate"] for tasks in entries) == [False] + [True] * 9, entries
    task_id = ids.pop()
    with ApiClient(fault.url) as client:
        final = wait_terminal(client, [task_id], timeout=TASK_TIMEOUT)[0][task_id]
        assert final["status"] == "succeeded" and final["attempts"] == 1, final
        for answer in answers:  # every batch lists and counts the one task
            batch = get_json(client, f"/api/batches/{answer.json()['batch_id']}")
            assert [t["id"] for t in batch["tasks"]] == [task_id], batch
    assert len(fault.embedding.received(word)) == 1  # embedded once
