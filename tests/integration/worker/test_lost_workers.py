"""Lost workers never leave a task running (docs/architecture.md §8): a worker killed with its
work-horse (a lost machine) within the 2 min bound, a work-horse alone at once.

On the fault stack, with its bounds and margins: tests/integration/faults.py.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from tests.integration.faults import (
    CRASH_BOUND,
    HORSE_BOUND,
    SLOW,
    TASK_TIMEOUT,
    document,
    running_worker,
    submit_one,
    task,
    wait_running_in_embedding,
)
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import unique_word, wait_terminal

pytestmark = pytest.mark.integration


def _left_running(
    client: ApiClient, task_id: str, attempt: int, bound: float, since: float
) -> tuple[dict[str, Any], float]:
    """Poll until the task is no longer `running` its attempt number `attempt` (retrying, a
    later attempt, or terminal); returns that state and the seconds since `since`."""
    seen = poll(
        lambda: task(client, task_id),
        lambda t: t["status"] != "running" or t["attempts"] > attempt,
        timeout=bound + 5,
        interval=0.25,
        message=f"task {task_id} left `running` attempt {attempt}",
    )
    return seen, time.monotonic() - since


def _recovered(final: dict[str, Any]) -> None:
    """After a lost worker: a later attempt succeeded, or it failed as "worker lost"."""
    if final["status"] == "succeeded":
        assert final["attempts"] >= 2, final
    else:
        assert final["status"] == "failed", final
        assert final["error"]["type"] == "worker_lost" and final["error"]["retryable"], final


def _kill_while_embedding(fault, name_prefix: str, kill, bound: float) -> tuple[str, int, dict]:
    """A slow document running in its embedding step, then `kill(worker pid, horse pid)`: waits
    until the task has left `running` within `bound` seconds and is terminal again; returns the
    worker's name and pid and the final task."""
    word = unique_word()
    fault.embedding.mode = SLOW
    with ApiClient(fault.url) as client:
        task_id = submit_one(client, f"{name_prefix}-{word}.txt", document(word))
        running = wait_running_in_embedding(client, fault, task_id, word)
        name, pid, horse = running_worker(fault, task_id)
        kill(pid, horse)
        killed = time.monotonic()
        fault.embedding.mode = "ok"
        seen, took = _left_running(client, task_id, running["attempts"], bound, killed)
        print(
            f"{name_prefix}: task left `running` after {took:.1f} s as {seen['status']} "
            f"(attempts {seen['attempts']})"
        )
        assert took <= bound, f"task still running {took:.1f} s after the kill: {seen}"
        final = wait_terminal(client, [task_id], timeout=TASK_TIMEOUT)[0][task_id]
    _recovered(final)
    return name, pid, final


def test_a_killed_worker_with_its_horse_never_leaves_a_task_running(fault):
    def lost_machine(pid: int, horse: int) -> None:
        os.killpg(pid, signal.SIGKILL)  # the worker and its scheduler (same process group)
        os.kill(horse, signal.SIGKILL)  # and its work-horse (a group of its own)

    name, _, _ = _kill_while_embedding(fault, "lost", lost_machine, CRASH_BOUND)
    assert all(proc.running for n, proc in fault.workers.processes.items() if n != name)


def test_a_killed_work_horse_is_retried_or_failed_promptly(fault):
    name, _, _ = _kill_while_embedding(
        fault, "horse", lambda pid, horse: os.kill(horse, signal.SIGKILL), HORSE_BOUND
    )
    assert fault.workers.processes[name].running  # the parent lived on
