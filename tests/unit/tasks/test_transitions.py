"""What follows a task's move (jobs.tasks.transitions): every finished task gives its upload
budget back, and its checkpoint is kept for a Retry (until the upload retention) or dropped,
whoever made the move; a compare-and-set move is all or nothing, in two round trips."""

from __future__ import annotations

import pytest
from redis.connection import AbstractConnection

from jobs import Settings
from jobs.core import keys, metrics, scripts
from jobs.tasks import record as task_record
from jobs.tasks import records, states, transitions

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


COMPARED = (task_record.STATUS, task_record.ATTEMPTS, task_record.ATTEMPT_ID, task_record.JOB_ID)


def _running(redis) -> None:
    _reserved_and_checkpointed(redis)
    redis.hset(
        keys.task(TASK),
        mapping={
            "id": TASK,
            "tenant": TENANT,
            "status": "running",
            "attempts": 1,
            "attempt_id": "a",
        },
    )
    _change(redis, states.PENDING)  # in the active sets


def _lose(redis, judged) -> bool:
    """The reconciler's move of a task whose job is gone, with its counter."""
    return transitions.compare_and_move(
        redis,
        Settings(),
        judged,
        states.LOSE,
        task_record.lost({"code": "job_lost", "message": "Lost.", "retryable": True}, "now"),
        compared=COMPARED,
        also=lambda pipe: metrics.count(pipe, "tasks_lost_total", reason="job_lost"),
    )


def _untouched(redis, status: str) -> None:
    """Nothing of a move to failed happened: the status is `status`, no dead letter, no
    counter, the budget still reserved."""
    assert redis.hget(keys.task(TASK), "status").decode() == status
    assert redis.zscore(keys.failed_all(), TASK) is None
    assert metrics.read(redis)[0] == {}
    assert int(redis.get(keys.blob_bytes())) == SIZE


def test_a_compared_move_writes_the_task_and_what_follows_in_two_round_trips(redis, monkeypatch):
    _running(redis)
    judged = records.load(redis, TASK)
    for script in list(scripts._BY_SHA.values()):  # a server that has them: no SCRIPT LOAD
        redis.script_load(script.source)
    sent = []
    send = AbstractConnection.send_packed_command

    def counted(self, *args, **kwargs):
        sent.append(1)
        return send(self, *args, **kwargs)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    assert _lose(redis, judged)
    assert len(sent) == 2, "the WATCH with its read, then the MULTI"
    moved = records.load(redis, TASK)
    assert moved.status == states.FAILED and moved.ended_at == "now"
    assert redis.zscore(keys.failed_all(), TASK) is not None
    assert redis.zscore(keys.active(), TASK) is None
    assert metrics.read(redis)[0] == {
        "tasks_finished_total|status=failed": 1,
        "tasks_lost_total|reason=job_lost": 1,
    }
    assert int(redis.get(keys.blob_bytes())) == 0


def test_a_task_that_moved_on_since_it_was_judged_is_left_alone(redis):
    _running(redis)
    judged = records.load(redis, TASK)
    redis.hset(keys.task(TASK), "attempt_id", "b")  # a newer attempt took it
    assert not _lose(redis, judged)
    _untouched(redis, states.RUNNING)


def test_a_task_written_between_the_read_and_the_move_is_left_as_its_writer_left_it(
    redis, monkeypatch
):
    """A worker's end lands after the WATCH read the task unchanged: the EXEC fails whole."""
    _running(redis)
    judged = records.load(redis, TASK)
    watch = scripts.watch

    def then_the_worker_succeeds(pipe, *names, reads=()):
        replies = watch(pipe, *names, reads=reads)
        redis.hset(keys.task(TASK), "status", states.SUCCEEDED)  # another connection
        return replies

    monkeypatch.setattr(scripts, "watch", then_the_worker_succeeds)
    assert not _lose(redis, judged)
    _untouched(redis, states.SUCCEEDED)
