"""A planned restart of redis-server mid-batch loses no task (docs/architecture.md §2): every task
ends succeeded or failed retryably, each still answering from its record.

On the fault stack, with its bounds and margins: tests/integration/faults.py.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.faults import CRASH_BOUND, POLL_INTERVAL, TASK_TIMEOUT, document, task
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import TERMINAL, txt, unique_word, upload

pytestmark = pytest.mark.integration


def test_a_redis_restart_mid_batch_loses_no_task(fault, redis_server):
    words = [unique_word() for _ in range(10)]
    fault.embedding.mode = "slow:1"
    with ApiClient(fault.url) as client:
        response, _ = upload(
            client, [txt(f"restart-{w}.txt", document(w, paragraphs=3)) for w in words]
        )
        assert response.status_code == 202, response.text[:500]
        task_ids = [t["id"] for t in response.json()["tasks"]]
        assert len(task_ids) == 10
        poll(
            lambda: [task(client, t)["status"] for t in task_ids],
            lambda states: "running" in states,
            timeout=TASK_TIMEOUT,
            interval=POLL_INTERVAL,
            message="some task of the batch running",
        )

        redis_server.stop(persist=True)  # SHUTDOWN SAVE: a planned restart
        redis_server.start()
        restarted = time.monotonic()
        before = set(fault.workers.names)

        # A Procfile host restarts a worker that exits; so does this poll (ensure).
        def fetch() -> dict[str, str]:
            fault.workers.ensure(2)
            return {t: task(client, t)["status"] for t in task_ids}

        states = poll(
            fetch,
            lambda s: set(s.values()) <= TERMINAL,
            timeout=CRASH_BOUND + 30,
            interval=0.5,
            message="every task of the batch terminal after the restart",
        )
        took = time.monotonic() - restarted
        exited = sorted(before - set(fault.workers.names))
        summary = {s: list(states.values()).count(s) for s in sorted(set(states.values()))}
        print(
            f"redis restart: terminal {took:.1f} s after it: {summary}; workers that exited: "
            f"{exited}"
        )
        for task_id in task_ids:
            final = task(client, task_id)  # still answers 200 from its record
            assert final["status"] in ("succeeded", "failed"), final
            if final["status"] == "failed":
                assert final["error"]["retryable"] is True, final
