"""What follows a task's move (jobs.tasks.transitions): every finished task gives its upload
budget back, and its checkpoint is kept for a Retry (until the upload retention) or dropped,
whoever made the move."""

from __future__ import annotations

import pytest

from jobs import Settings
from jobs.core import keys
from jobs.tasks import states, transitions

TASK, TENANT, SIZE = "t" * 32, "acme", 1234
RETENTION = Settings().upload_retention_seconds


def _reserved_and_checkpointed(redis) -> None:
    redis.hset(keys.tenant_blob_sizes(TENANT), TASK, SIZE)
    redis.set(keys.tenant_blob_bytes(TENANT), SIZE)
    redis.set(keys.blob_bytes(), SIZE)
    redis.hset(keys.checkpoint(TASK), "chunks", "[]")
    redis.hset(keys.page_ranges(TASK), "0", "done")


def _change(redis, status: str, retryable: bool = True) -> None:
    pipe = redis.pipeline()
    transitions.changed(pipe, TENANT, TASK, status, settings=Settings(), retryable=retryable)
    pipe.execute()


@pytest.mark.parametrize(
    ("status", "retryable", "kept"),
    [
        (states.SUCCEEDED, True, False),
        (states.FAILED, True, True),
        (states.FAILED, False, False),
        (states.CANCELED, True, True),
    ],
)
def test_a_finished_task_gives_its_budget_back_and_keeps_a_checkpoint_only_for_a_retry(
    redis, status, retryable, kept
):
    _reserved_and_checkpointed(redis)
    _change(redis, status, retryable)
    assert int(redis.get(keys.tenant_blob_bytes(TENANT))) == 0
    assert int(redis.get(keys.blob_bytes())) == 0
    if kept:
        assert 0 < redis.ttl(keys.checkpoint(TASK)) <= RETENTION
    else:
        assert not redis.exists(keys.checkpoint(TASK), keys.page_ranges(TASK))
    _change(redis, status, retryable)  # recorded twice (a reconciler behind a worker): no change
    assert int(redis.get(keys.blob_bytes())) == 0


@pytest.mark.parametrize("status", states.LIVE)
def test_a_live_move_keeps_the_budget_and_the_checkpoint(redis, status):
    _reserved_and_checkpointed(redis)
    _change(redis, status)
    assert int(redis.get(keys.blob_bytes())) == SIZE
    assert redis.exists(keys.checkpoint(TASK)) and redis.ttl(keys.checkpoint(TASK)) == -1
