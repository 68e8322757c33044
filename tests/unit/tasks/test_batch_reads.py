"""A batch poll reads only the fields a task's JSON needs and reuses each task's JSON while its
fields are unchanged: what it answers must stay exactly what polling each task answers."""

from __future__ import annotations

import json

from jobs.core import keys
from jobs.tasks import records as tasks
from tests.unit.conftest import upload


def _batch(client, batch_id):
    response = client.get(f"/api/batches/{batch_id}")
    assert response.status_code == 200
    return response


def test_a_batch_answers_each_task_as_its_own_poll_does(client, run_jobs):
    body = upload(
        client, ("a.txt", b"Alpha words."), ("b.txt", b"Beta words."), ("c.txt", b"")
    ).get_json()
    ids = [t["id"] for t in body["tasks"]]
    client.post(f"/api/tasks/{ids[1]}/cancel")
    run_jobs()
    batch = _batch(client, body["batch_id"]).get_json()
    assert batch["tasks"] == [client.get(f"/api/tasks/{i}").get_json() for i in ids]
    assert batch["counts"]["succeeded"] == 1 and batch["counts"]["canceled"] == 1
    assert batch["status"] == "partial" and batch["progress"] == 100


def test_a_batch_poll_sees_every_change_of_a_task(client, redis, run_jobs):
    body = upload(client, ("a.txt", b"Alpha words."), ("b.txt", b"Beta words.")).get_json()
    first = _batch(client, body["batch_id"])
    assert _batch(client, body["batch_id"]).data == first.data  # unchanged: same JSON
    task_id = body["tasks"][0]["id"]
    redis.hset(keys.task(task_id), "step_detail", "Moved on")  # any field, any writer
    moved = _batch(client, body["batch_id"])
    assert moved.headers["ETag"] != first.headers["ETag"]
    assert moved.get_json()["tasks"][0]["step_detail"] == "Moved on"
    run_jobs()
    done = _batch(client, body["batch_id"]).get_json()
    assert [t["status"] for t in done["tasks"]] == ["succeeded", "succeeded"]


def test_the_api_text_is_the_batch_dict_serialised(app, client, run_jobs):
    body = upload(client, ("a.txt", b"Alpha words."), ("b.txt", b"Beta words.")).get_json()
    run_jobs()
    text = _batch(client, body["batch_id"]).get_data(as_text=True)
    service = app.extensions["intake"]
    as_dict = service.batches.get("default", body["batch_id"])
    assert text == json.dumps(as_dict, separators=(",", ":"))
    assert service.batches.get_json("default", body["batch_id"]) == text


def test_a_task_view_needs_only_the_view_fields(client, redis, run_jobs):
    body = upload(
        client, ("a.txt", b"Alpha words."), ("b.txt", b"Beta words."), ("c.txt", b"   \n\n   ")
    ).get_json()
    client.post(f"/api/tasks/{body['tasks'][1]['id']}/cancel")
    run_jobs()
    assert [t["status"] for t in _batch(client, body["batch_id"]).get_json()["tasks"]] == [
        "succeeded",
        "canceled",
        "failed",
    ]
    for task in body["tasks"]:
        full = tasks.load(redis, task["id"])
        (raw,) = tasks.load_view_fields(redis, [task["id"]])
        assert tasks.view(tasks.view_record(raw)) == tasks.view(full)
    (missing,) = tasks.load_view_fields(redis, ["0" * 32])
    assert tasks.view_record(missing) is None


def test_the_task_json_cache_stays_bounded_and_right(client, redis):
    from jobs.tasks.batches import TaskJsonCache

    body = upload(client, *[(f"{n}.txt", f"Words {n}.".encode()) for n in range(10)]).get_json()
    ids = [t["id"] for t in body["tasks"]]
    cache = TaskJsonCache(limit=4)
    for _ in range(2):
        for task_id, raw in zip(ids, tasks.load_view_fields(redis, ids)):
            entry = cache.render(task_id, raw)
            assert json.loads(entry.text) == tasks.view(tasks.load(redis, task_id))
            assert len(cache._entries) <= 4


def test_the_lean_read_answers_what_a_pipeline_does_and_survives_an_error(client, redis):
    import pytest
    from redis.exceptions import ResponseError

    body = upload(client, ("a.txt", b"Alpha words."), ("b.txt", b"Beta words.")).get_json()
    ids = [t["id"] for t in body["tasks"]] + ["0" * 32]
    pipe = redis.pipeline(transaction=False)
    for task_id in ids:
        pipe.hmget(keys.task(task_id), tasks.VIEW_FIELDS)
    assert tasks.load_view_fields(redis, ids) == pipe.execute()
    assert tasks.load_view_fields(redis, []) == []
    redis.set(keys.task("1" * 32), "not a hash")
    with pytest.raises(ResponseError):
        tasks.load_view_fields(redis, [ids[0], "1" * 32, ids[1]])
    assert redis.ping() and tasks.load_view_fields(redis, ids[:1])[0][0] == ids[0].encode()
