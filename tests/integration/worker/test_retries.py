"""Transient failures retry with growing, jittered backoff and resume where they stopped
(docs/architecture.md §7, §8): two 503s then success, an embedder that hangs past its timeout.

On the fault stack, with its bounds and margins: tests/integration/faults.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration.faults import TASK_TIMEOUT, document, seconds_between, submit_one
from tests.integration.fixtures import Stack
from tests.integration.helpers import ApiClient
from tests.integration.intake_api import (
    iso,
    readable_problems,
    task_shape_problems,
    unique_word,
    wait_terminal,
)

pytestmark = pytest.mark.integration


@dataclass
class Recovered:
    task_id: str
    word: str
    final: dict[str, Any]
    history: list[dict[str, Any]]
    requests: list[Any]


@pytest.fixture(scope="module")
def recovered_after_two_503s(fault_stack: Stack) -> Recovered:
    """One document whose first two embedding attempts get 503, followed until it is terminal."""
    fault_stack.workers.ensure(2)
    fault_stack.embedding.reset()
    word = unique_word()
    fault_stack.embedding.fail_next(2, "status:503", match=word)
    with ApiClient(fault_stack.url) as client:
        task_id = submit_one(client, f"flaky-{word}.txt", document(word))
        final, history = wait_terminal(client, [task_id], timeout=TASK_TIMEOUT)
    return Recovered(
        task_id, word, final[task_id], history[task_id], fault_stack.embedding.received(word)
    )


def test_two_503s_are_retried_with_growing_backoff_and_the_task_succeeds(recovered_after_two_503s):
    run = recovered_after_two_503s
    final = run.final
    assert final["status"] == "succeeded", final
    assert final["attempts"] == 3 and final["max_attempts"] == 3, final
    assert final["error"] is None and final["next_attempt_at"] is None, final
    assert task_shape_problems(final) == [], final
    assert [r.mode for r in run.requests] == ["status:503", "status:503", "ok"], run.requests

    # The polls in between saw `retrying`, with the last error and when the next attempt starts.
    retrying = [snap for snap in run.history if snap["status"] == "retrying"]
    assert {snap["attempts"] for snap in retrying} == {1, 2}, [
        (s["status"], s["attempts"]) for s in run.history
    ]
    for snap in retrying:
        error = snap["error"]
        assert isinstance(error, dict), snap
        assert error["step"] == "embedding" and error["retryable"] is True, snap
        assert error["type"] == "embedding_unavailable", snap
        assert "503" in error["message"] and readable_problems(error["message"]) == [], snap
        assert snap["next_attempt_at"] is not None, snap
        assert snap["current_step"] == "waiting_retry", snap
        assert task_shape_problems(snap) == [], snap

    # The delays Intake chose: base·2^n ± 20 %, whole seconds (written with the failure).
    delays = {}
    for snap in retrying:
        delays[snap["attempts"]] = seconds_between(snap["updated_at"], snap["next_attempt_at"])
    assert 1.5 <= delays[1] <= 2.5, delays  # 2 s ± 20 % → 2 s
    assert 2.5 <= delays[2] <= 5.5, delays  # 4 s ± 20 % → 3, 4 or 5 s
    assert delays[2] > delays[1], delays

    # The gaps the embedder saw between attempts: at least each delay less RQ's 1 s granularity.
    first, second, third = (r.at for r in run.requests)
    gaps = (second - first, third - second)
    print(
        f"backoff: scheduled {delays[1]:.2f} s, {delays[2]:.2f} s; "
        f"measured {gaps[0]:.2f} s, {gaps[1]:.2f} s"
    )
    assert gaps[0] >= round(delays[1]) - 1.0, (gaps, delays)
    assert gaps[1] >= round(delays[2]) - 1.0, (gaps, delays)
    assert gaps[0] < 10 and gaps[1] < 12, (gaps, delays)  # not stuck either


def test_a_retry_after_an_embedding_failure_does_not_parse_or_chunk_again(recovered_after_two_503s):
    steps = {step["name"]: step for step in recovered_after_two_503s.final["steps"]}
    assert list(steps) == ["parsing", "chunking", "embedding", "indexing"], steps
    assert steps["parsing"]["attempt"] == 1, steps
    assert steps["chunking"]["attempt"] == 1, steps
    assert steps["embedding"]["attempt"] == 3, steps
    assert steps["indexing"]["attempt"] == 3, steps
    # Parsing and chunking kept the first attempt's timing: they ended before the embedder was
    # first asked, long before the third attempt started.
    assert iso(steps["chunking"]["ended_at"], "chunking.ended_at") <= iso(
        steps["embedding"]["started_at"], "embedding.started_at"
    )
    assert (
        seconds_between(steps["chunking"]["ended_at"], steps["embedding"]["started_at"]) >= 2.0
    ), steps


def test_an_embedder_that_hangs_past_the_timeout_is_retried(fault):
    word = unique_word()
    fault.embedding.fail_next(1, "hang", match=word)
    with ApiClient(fault.url) as client:
        task_id = submit_one(client, f"hung-{word}.txt", document(word))
        final, history = wait_terminal(client, [task_id], timeout=TASK_TIMEOUT)
        done = final[task_id]
        assert done["status"] == "succeeded" and done["attempts"] == 2, done
        errors = [s["error"] for s in history[task_id] if s["status"] == "retrying"]
        assert errors, history[task_id]
        assert errors[0]["type"] == "embedding_timeout" and errors[0]["retryable"] is True, errors
        assert "4 s" in errors[0]["message"], errors  # INTAKE_EMBEDDING_TIMEOUT, in words
        assert [r.mode for r in fault.embedding.received(word)] == ["hang", "ok"]
