"""A one-file upload is one round trip to Redis: its original is stored first, then RQ's
enqueue of its job and the claim travel together (jobs.tasks.submit._submit_one). The claim
pushes the job onto its queue only when it created the task: a duplicate, a refusal or a
server without the script queues nothing, and what went ahead (the original, the job's hash)
is taken back."""

from __future__ import annotations

import pytest
from redis import Redis
from redis.client import Pipeline
from rq import Queue

from jobs.core import keys
from jobs.core.settings import Settings
from jobs.tasks import originals
from jobs.tasks.submit import INLINE_BYTES, job_data
from tests.unit.conftest import upload


@pytest.fixture
def round_trips(monkeypatch):
    """Every command sent alone and every pipeline, by the names of their commands."""
    sent: list[list[str]] = []
    real_execute, real_command = Pipeline.execute, Redis.execute_command

    def execute(pipe, raise_on_error=True):
        sent.append([str(args[0]).upper() for args, _ in pipe.command_stack])
        return real_execute(pipe, raise_on_error)

    def command(client, *args, **options):
        if not isinstance(client, Pipeline):
            sent.append([str(args[0]).upper()])
        return real_command(client, *args, **options)

    monkeypatch.setattr(Pipeline, "execute", execute)
    monkeypatch.setattr(Redis, "execute_command", command)
    return sent


def _stored(document_id: str) -> list[str]:
    prefix = originals.name("default", document_id, "")
    return sorted(originals.store(Settings()).names(prefix))


def _jobs(redis) -> list[bytes]:
    return sorted(k for k in redis.scan_iter("rq:job:*") if k.count(b":") == 2)


def test_a_one_file_upload_is_one_round_trip_holding_the_claim_and_the_job(
    client, redis, round_trips
):
    assert upload(client, ("warm.txt", b"RQ asks the server's version once.")).status_code == 202
    round_trips.clear()
    response = upload(client, ("memo-one-trip.txt", b"The valve was replaced."))
    assert response.status_code == 202
    [trip] = round_trips
    assert trip[-1] == "EVALSHA" and "RPUSH" not in trip, "the claim pushes the job"
    [task] = response.get_json()["tasks"]
    assert _stored("memo-one-trip.txt") == [
        originals.name("default", "memo-one-trip.txt", task["id"])
    ]
    assert redis.lrange("rq:queue:intake-high", 0, -1)[-1] == task["id"].encode()


def test_a_duplicate_takes_back_its_job_and_its_original(client, redis, run_jobs):
    first = upload(client, ("twice.txt", b"Same words, sent twice.")).get_json()["tasks"][0]
    jobs_before = _jobs(redis)
    again = upload(client, ("twice.txt", b"Same words, sent twice.")).get_json()["tasks"][0]
    assert again["id"] == first["id"] and again["duplicate"] is True
    assert _stored("twice.txt") == [originals.name("default", "twice.txt", first["id"])]
    assert _jobs(redis) == jobs_before, "the duplicate's job is gone, hash and all"
    assert redis.lrange("rq:queue:intake-high", 0, -1) == [first["id"].encode()]
    run_jobs()
    assert client.get(f"/api/tasks/{first['id']}").get_json()["status"] == "succeeded"


def test_a_server_that_lost_its_scripts_gets_the_upload_once(client, redis, run_jobs, monkeypatch):
    """A restart or a failover empties the script cache: the claim is refused (NOSCRIPT), and
    the job sent beside it is not queued, so no worker can run it before the claim is sent
    again. Checked at the moment the server refuses, not only after."""
    from jobs.tasks import submit

    assert upload(client, ("before.txt", b"The claim script is loaded now.")).status_code == 202
    redis.script_flush()
    queued_at_refusal: list[list[bytes]] = []
    real_load = submit.Redis.script_load

    def script_load(connection, script):
        queued_at_refusal.append(redis.lrange("rq:queue:intake-high", 0, -1))
        return real_load(connection, script)

    monkeypatch.setattr(submit.Redis, "script_load", script_load)
    queued_before = redis.lrange("rq:queue:intake-high", 0, -1)
    jobs_before = _jobs(redis)
    response = upload(client, ("after.txt", b"Sent to a server without scripts."))
    assert response.status_code == 202, response.get_json()
    assert queued_at_refusal == [queued_before], "nothing was queued by the refused claim"
    [task] = response.get_json()["tasks"]
    assert task["duplicate"] is False
    assert len(_jobs(redis)) == len(jobs_before) + 1
    assert redis.lrange("rq:queue:intake-high", 0, -1).count(task["id"].encode()) == 1
    assert _stored("after.txt") == [originals.name("default", "after.txt", task["id"])]
    run_jobs()
    final = client.get(f"/api/tasks/{task['id']}").get_json()
    assert final["status"] == "succeeded" and final["attempts"] == 1, final


def test_a_refused_upload_leaves_nothing_behind(make_app, redis, monkeypatch):
    monkeypatch.setenv("INTAKE_QUEUE_LIMIT", "1")
    client = make_app().test_client()
    assert upload(client, ("first.txt", b"The first file.")).status_code == 202
    jobs_before = _jobs(redis)
    refused = upload(client, ("second.txt", b"The second file."))
    assert refused.status_code == 503, refused.get_json()
    assert refused.get_json()["error"]["code"] == "queue_full"
    assert _stored("second.txt") == [], "its original was deleted"
    assert _jobs(redis) == jobs_before
    assert redis.llen("rq:queue:intake-high") == 1


def test_a_job_whose_task_was_never_created_does_nothing(client, redis, run_jobs):
    """What a worker does with a duplicate's job it dequeued before the web took it back."""
    Queue("intake-high", connection=redis).enqueue_many([job_data("f" * 32, Settings())])
    run_jobs()
    assert not redis.exists(keys.task("f" * 32))
    assert client.get(f"/api/tasks/{'f' * 32}").status_code == 404
    assert client.get("/api/failed").get_json()["tasks"] == []


def test_a_large_file_is_claimed_before_it_is_stored(make_app, redis, monkeypatch, round_trips):
    """A refused file larger than what an upload holds in memory is never written."""
    monkeypatch.setenv("INTAKE_QUEUE_LIMIT", "1")
    client = make_app().test_client()
    assert upload(client, ("first.txt", b"The first file.")).status_code == 202
    stored: list[str] = []
    real_put = originals.put
    monkeypatch.setattr(originals, "put", lambda *a, **k: stored.append(a[3]) or real_put(*a, **k))
    big = b"A line of a long report.\n" * (INLINE_BYTES // 25 + 100)
    refused = upload(client, ("large.txt", big))
    assert refused.status_code == 503 and refused.get_json()["error"]["code"] == "queue_full"
    assert stored == [] and _stored("large.txt") == []
    round_trips.clear()
    monkeypatch.setenv("INTAKE_QUEUE_LIMIT", "100")
    accepted = make_app().test_client()
    assert upload(accepted, ("large.txt", big)).status_code == 202
    assert round_trips[0][0] == "EVALSHA" and "RPUSH" not in round_trips[0], round_trips
