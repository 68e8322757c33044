"""The task state machine of docs/architecture.md §3: the six statuses, who may move a task between
them, and what a person may do with a task now.

Why one module: a dozen places need these facts (Lua scripts, the reconciler, the templates,
the page script), and a copy in each could drift. Here they are stated once: the Lua
scripts receive the statuses they may act on as arguments from the `Transition`s below, the
task JSON carries `can_retry` and `can_cancel` from `can_retry`/`can_cancel`. What follows a
move (the active sets, the dead letters, budgets, checkpoints, counters, events) is
jobs.tasks.transitions'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PENDING, RUNNING, RETRYING = "pending", "running", "retrying"
SUCCEEDED, FAILED, CANCELED = "succeeded", "failed", "canceled"
STATUSES: tuple[str, ...] = (PENDING, RUNNING, RETRYING, SUCCEEDED, FAILED, CANCELED)
LIVE: tuple[str, ...] = (PENDING, RUNNING, RETRYING)
TERMINAL: tuple[str, ...] = (SUCCEEDED, FAILED, CANCELED)
# A batch's own statuses: the tasks' (but retrying) and `partial`, a mix of terminal ones.
BATCH_LIVE: tuple[str, ...] = (PENDING, RUNNING)
PARTIAL = "partial"
BATCH_STATUSES: tuple[str, ...] = (*BATCH_LIVE, *TERMINAL, PARTIAL)

# What each status's task is doing, as `current_step` says it when no step runs.
STEP_OF: dict[str, str] = {
    PENDING: "queued",
    RETRYING: "waiting_retry",
    FAILED: "failed",
    CANCELED: "canceled",
    SUCCEEDED: "done",
}


@dataclass(frozen=True)
class Transition:
    """A move from any of `sources` to `target`, made by `actor` only."""

    name: str
    actor: str  # "worker", "person" or "reconciler"
    sources: tuple[str, ...]
    target: str

    def allows(self, status: str | None) -> bool:
        return status in self.sources


# A worker's attempt. It may start from `running` when RQ retries a job whose attempt was lost
# before anyone recorded it (the attempt fence keeps the lost one from writing again).
START = Transition("start", "worker", (PENDING, RETRYING, RUNNING), RUNNING)
SUCCEED = Transition("succeed", "worker", (RUNNING,), SUCCEEDED)
WAIT_FOR_RETRY = Transition("wait_for_retry", "worker", (RUNNING,), RETRYING)
FAIL = Transition("fail", "worker", (RUNNING,), FAILED)
# A person's. A failed task may be retried only when its error says a Retry can help.
CANCEL = Transition("cancel", "person", LIVE, CANCELED)
RETRY = Transition("retry", "person", (FAILED, CANCELED), PENDING)
# The reconciler's, when a task's RQ job says something happened behind Intake's back.
LOSE_ATTEMPT = Transition("lose_attempt", "reconciler", (RUNNING,), RETRYING)
LOSE = Transition("lose", "reconciler", LIVE, FAILED)
CANCELED_ELSEWHERE = Transition("canceled_elsewhere", "reconciler", (PENDING, RETRYING), CANCELED)
TRANSITIONS: tuple[Transition, ...] = (
    START,
    SUCCEED,
    WAIT_FOR_RETRY,
    FAIL,
    CANCEL,
    RETRY,
    LOSE_ATTEMPT,
    LOSE,
    CANCELED_ELSEWHERE,
)

# The webhook event (docs/architecture.md §14) a move to each terminal status sends.
EVENT_TYPES: dict[str, str] = {
    SUCCEEDED: "task.succeeded",
    FAILED: "task.failed",
    CANCELED: "task.canceled",
}

# Submitting content a task of this status already holds returns that task
# (docs/architecture.md §9).
REUSABLE: tuple[str, ...] = (*LIVE, SUCCEEDED)


def is_live(status: str | None) -> bool:
    return status in LIVE


def is_terminal(status: str | None) -> bool:
    return status in TERMINAL


def can_cancel(status: str | None) -> bool:
    return CANCEL.allows(status)


def can_retry(status: str | None, error: Mapping[str, Any] | None) -> bool:
    """A canceled task, or a failed one whose error says a Retry can help (not a bad file).

    The one retry rule: the task JSON's `can_retry` and a Retry (jobs.tasks.lifecycle, whose
    script only checks that the task still holds what this judged) both ask it."""
    if not RETRY.allows(status):
        return False
    return status != FAILED or bool(error and error.get("retryable"))


def batch_status(counts: Mapping[str, int]) -> str:
    """pending (nothing started), running (something live), else the terminal mix."""
    total = sum(counts.values())
    if total == 0 or counts[PENDING] == total:
        return PENDING
    if any(counts[status] for status in LIVE):
        return RUNNING
    for status in TERMINAL:
        if counts[status] == total:
            return status
    return PARTIAL
