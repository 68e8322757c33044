"""An attempt's start: the move to `running`, what follows it and the prefetched reads travel
in one round trip when the job's queue names the task's tenant (jobs.tasks.attempts)."""

from __future__ import annotations

import time

from redis.client import Pipeline

from jobs import Settings
from jobs.core import keys
from jobs.core.queues import DEFAULT_TENANT
from jobs.tasks import attempts
from jobs.tasks.attempts import AttemptFence
from tests.unit.tasks.test_lifecycle import TEXT, _one


def _round_trips(monkeypatch) -> list[int]:
    sent: list[int] = []
    execute = Pipeline.execute

    def counted(self, *args, **kwargs):
        sent.append(len(self))
        return execute(self, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "execute", counted)
    return sent


def _announcements(redis):
    pubsub = redis.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(keys.changes_channel())
    return pubsub


def _announced(pubsub) -> list[str]:
    """The task ids announced so far (a subscription's confirmation is read as nothing)."""
    seen, deadline = [], time.monotonic() + 2
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.1)
        if message is None and seen:
            return seen
        if message is not None:
            seen.append(message["data"].decode())
    return seen


def test_a_start_is_announced_in_its_own_round_trip(client, redis, monkeypatch):
    task_id = _one(client, ("a.txt", TEXT))
    redis.script_load(attempts._START.source)  # a server without it is sent the start again
    pubsub = _announcements(redis)
    sent = _round_trips(monkeypatch)
    fence = AttemptFence(redis, task_id)
    record = fence.start(
        task_id,
        settings=Settings(),
        tenant=DEFAULT_TENANT,
        prefetch=lambda pipe: pipe.hgetall(keys.checkpoint(task_id)),
    )
    assert record.status == "running" and fence.prefetched == [{}]
    assert len(sent) == 1, "the start, its announcement and the prefetch: one round trip"
    assert _announced(pubsub) == [task_id]


def test_a_start_whose_queue_names_no_tenant_announces_it_after(client, redis, monkeypatch):
    task_id = _one(client, ("a.txt", TEXT))
    redis.script_load(attempts._START.source)
    pubsub = _announcements(redis)
    sent = _round_trips(monkeypatch)
    AttemptFence(redis, task_id).start(task_id, settings=Settings())
    assert len(sent) == 2
    assert _announced(pubsub) == [task_id]
