"""The task hash has one owner (jobs.tasks.record): every state change writes the pairs it
returns, every reader gets a TaskRecord whose attributes are the same names, no Lua script
spells a field of the task hash, and the retry rule is states.can_retry wherever a Retry is
judged."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from jobs import Settings
from jobs.core import keys
from jobs.core.failures import TransientError
from jobs.tasks import record as task_record
from jobs.tasks import states, transitions
from jobs.tasks.record import TaskRecord
from jobs.worker.reconcile import reconcile
from tests.samples import make_pdf_no_text
from tests.unit.conftest import upload
from tests.unit.tasks.test_lifecycle import TEXT, _FailingEmbedder

ROOT = Path(__file__).resolve().parents[3]
# Field names other hashes of Intake have too (a batch: id, tenant, created_at; a webhook
# event: those and status, attempts; a document of the knowledge base: document_id, filename,
# version; a tenant's upload sizes: size). A script may spell these for its own hash.
SHARED = {
    "id",
    "tenant",
    "created_at",
    "status",
    "attempts",
    "document_id",
    "filename",
    "version",
    "size",
}
# The modules whose scripts change a task's state: they spell no field of it at all.
WRITERS = (
    "jobs/tasks/attempts.py",
    "jobs/tasks/lifecycle.py",
    "jobs/worker/reconcile.py",
    "jobs/worker/progress.py",
    "jobs/worker/pipeline.py",
)
# Every writer of record.py: each adds a field of its own name, so a test sees who wrote.
WRITES = (
    "created",
    "started",
    "progressed",
    "succeeded",
    "retrying",
    "failed",
    "lost",
    "canceled",
    "canceled_elsewhere",
    "cancel_noted",
    "retried",
)


def _lua_literals(path: Path) -> list[tuple[int, set[str]]]:
    """The quoted words of a script's file, line by line (jobs.core.scripts: a field of the
    task hash is rendered there from `{{NAME}}`, never spelled)."""
    return [
        (number, set(re.findall(r"'([^']*)'", line)))
        for number, line in enumerate(path.read_text().splitlines(), 1)
    ]


def _scripts_of(module: Path) -> list[Path]:
    """A module's scripts: `lua/<module>.lua` and `lua/<module>_<name>.lua` beside it."""
    folder = module.parent / "lua"
    return sorted([*folder.glob(f"{module.stem}.lua"), *folder.glob(f"{module.stem}_*.lua")])


def test_no_script_spells_a_field_only_the_task_hash_has():
    task_only = set(task_record.FIELDS) - SHARED
    spelled = [
        (str(path.relative_to(ROOT)), line, sorted(words & task_only))
        for path in (ROOT / "jobs").rglob("*.lua")
        for line, words in _lua_literals(path)
        if words & task_only
    ]
    assert spelled == []


def test_the_check_reads_every_script_file():
    assert len(list((ROOT / "jobs").rglob("*.lua"))) >= 40
    assert _lua_literals(ROOT / "jobs" / "tasks" / "lua" / "submit_claim.lua")


@pytest.mark.parametrize("module", WRITERS)
def test_the_scripts_that_change_a_task_spell_none_of_its_fields(module):
    spelled = [
        (str(path.relative_to(ROOT)), line, sorted(words & set(task_record.FIELDS)))
        for path in _scripts_of(ROOT / module)
        for line, words in _lua_literals(path)
        if words & set(task_record.FIELDS)
    ]
    assert spelled == []


def test_every_field_is_named_once():
    assert len(set(task_record.FIELDS)) == len(task_record.FIELDS)


def test_a_record_s_attributes_are_the_fields_of_the_hash_and_its_numbers_are_ints():
    """One spelling: a reader's attribute is the writer's field name."""
    declared = dataclasses.fields(TaskRecord)
    assert tuple(field.name for field in declared) == task_record.FIELDS
    assert {field.name for field in declared if field.type == "int"} == task_record.INT_FIELDS


def test_a_record_is_read_whole_or_in_part_typed():
    whole = TaskRecord.from_hash(
        {b"id": b"t1", b"tenant": b"acme", b"size": b"12", b"attempts": b"", b"by_test": b"1"}
    )
    assert (whole.id, whole.tenant, whole.size, whole.attempts, whole.error) == (
        "t1",
        "acme",
        12,
        0,
        "",
    )
    assert TaskRecord.from_hash({"id": "t1", "tenant": "acme", "size": "12"}) == whole
    part = TaskRecord.from_row(
        (task_record.STATUS, task_record.RUN), [b"failed", None], task_id="t2"
    )
    assert (part.id, part.status, part.run, part.tenant) == ("t2", "failed", 0, "")
    with pytest.raises(KeyError):
        TaskRecord.from_row(("no_such_field",), [b"1"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.status = "running"  # type: ignore[misc]


@pytest.fixture
def marked(monkeypatch):
    """Each record.py writer adds `by_<its name>` to what it returns."""
    for name in WRITES:
        original = getattr(task_record, name)

        def marking(*args, _name=name, _original=original, **kwargs):
            return {**_original(*args, **kwargs), f"by_{_name}": "1"}

        monkeypatch.setattr(task_record, name, marking)


def _written_by(redis, task_id):
    raw = redis.hgetall(keys.task(task_id))
    return {k.decode()[3:] for k in raw if k.startswith(b"by_")}


def _one(client, *files):
    return upload(client, *files).get_json()["tasks"][0]["id"]


def test_a_cancel_a_retry_and_a_run_write_what_record_returns(client, redis, run_jobs, marked):
    task_id = _one(client, ("a.txt", TEXT))
    assert _written_by(redis, task_id) == {"created"}
    assert client.post(f"/api/tasks/{task_id}/cancel").status_code == 202
    assert client.post(f"/api/tasks/{task_id}/retry").status_code == 202
    run_jobs()
    assert client.get(f"/api/tasks/{task_id}").get_json()["status"] == "succeeded"
    assert _written_by(redis, task_id) == {
        "created",
        "canceled",
        "retried",
        "started",
        "progressed",
        "succeeded",
    }


def test_failures_write_what_record_returns(client, redis, run_jobs, marked, monkeypatch):
    monkeypatch.setenv("INTAKE_MAX_ATTEMPTS", "2")
    bad = _one(client, ("scan.pdf", make_pdf_no_text()))
    run_jobs()
    assert "failed" in _written_by(redis, bad)
    flaky = _one(client, ("b.txt", TEXT))
    run_jobs(_FailingEmbedder(TransientError("down", code="embedding_unavailable")))
    assert "retrying" in _written_by(redis, flaky)


def test_the_reconciler_writes_what_record_returns(client, redis, marked):
    task_id = _one(client, ("a.txt", TEXT))
    redis.delete(f"rq:job:{task_id}")
    assert reconcile(redis, Settings(), grace_seconds=-1)["failed"] == 1
    assert "lost" in _written_by(redis, task_id)


def _failed_retryable(client, redis, run_jobs):
    """A task failed for good with a retryable error, its upload kept for a Retry."""
    from jobs.core.failures import PermanentError

    rejected = PermanentError("Refused.", code="embedding_rejected", retryable=True)
    task_id = _one(client, ("a.txt", TEXT))
    run_jobs(_FailingEmbedder(rejected))
    assert client.get(f"/api/tasks/{task_id}").get_json()["can_retry"] is True
    return task_id


def test_a_retry_is_judged_by_states_can_retry_only(client, redis, run_jobs, monkeypatch):
    """The script holds no rule of its own: whatever can_retry says, the Retry does."""
    task_id = _failed_retryable(client, redis, run_jobs)
    error = json.loads(redis.hget(keys.task(task_id), "error"))
    redis.hset(keys.task(task_id), "error", json.dumps({**error, "retryable": False}))
    assert client.post(f"/api/tasks/{task_id}/retry").status_code == 409
    monkeypatch.setattr(states, "can_retry", lambda status, error: True)
    assert client.post(f"/api/tasks/{task_id}/retry").status_code == 202


def test_a_retry_refused_by_can_retry_changes_nothing(client, redis, run_jobs, monkeypatch):
    task_id = _failed_retryable(client, redis, run_jobs)
    before = redis.hgetall(keys.task(task_id))
    monkeypatch.setattr(states, "can_retry", lambda status, error: False)
    response = client.post(f"/api/tasks/{task_id}/retry")
    assert response.status_code == 409
    assert response.get_json()["error"]["code"] == "not_retryable"
    assert client.get(f"/api/tasks/{task_id}").get_json()["can_retry"] is False
    assert redis.hgetall(keys.task(task_id)) == before


def test_a_retry_that_finds_its_task_changed_judges_it_again(client, redis, run_jobs, monkeypatch):
    """Another Retry lands between this one's read and its script: this one is judged again
    on what the task now holds (pending: nothing to retry)."""
    from jobs.tasks import lifecycle

    task_id = _failed_retryable(client, redis, run_jobs)
    judge = lifecycle._judge_retry
    calls = []

    def judge_then_change(*args):
        judged = judge(*args)
        if not calls:  # someone else's Retry lands after this one read the task
            redis.hset(keys.task(task_id), mapping={"status": states.PENDING, "run": 1})
        calls.append(judged.status)
        return judged

    monkeypatch.setattr(lifecycle, "_judge_retry", judge_then_change)
    response = client.post(f"/api/tasks/{task_id}/retry")
    assert response.status_code == 409 and calls == ["failed"]
    assert redis.hget(keys.task(task_id), "status") == b"pending"


def test_start_goes_through_transitions_changed(client, redis, run_jobs, monkeypatch):
    seen = []
    changed = transitions.changed

    def noting(pipe, tenant, task_id, status, **options):
        seen.append(status)
        changed(pipe, tenant, task_id, status, **options)

    monkeypatch.setattr(transitions, "changed", noting)
    _one(client, ("a.txt", TEXT))
    run_jobs()
    # A start sent to a server without its script is built and sent again whole (scripts.send).
    assert list(dict.fromkeys(seen))[:2] == [states.RUNNING, states.SUCCEEDED]


def test_no_module_outside_tasks_writes_a_task_hash():
    """A task's state has one home (jobs/tasks): the worker reports through the attempt's fence
    (jobs.tasks.attempts) and transitions, and reads the hash at most."""
    jobs = Path(__file__).resolve().parents[3] / "jobs"
    python_write = re.compile(r"\.(hset|hdel|hincrby|hsetnx|hmset|delete)\(\s*keys\.task\(")
    lua_write = re.compile(r"'(HSET|HDEL|HINCRBY|HSETNX|HMSET|DEL|EXPIRE)',\s*task\b")
    found = [
        str(path.relative_to(jobs.parent))
        for path in sorted(jobs.rglob("*"))
        if path.suffix in (".py", ".lua")
        and "tasks" not in path.relative_to(jobs).parts[:1]
        and (python_write if path.suffix == ".py" else lua_write).search(path.read_text())
    ]
    assert found == []
    # The patterns do find a write (so the test would see one outside tasks/).
    assert lua_write.search((jobs / "tasks" / "lua" / "attempts_start.lua").read_text())
