"""An upload confirmed by a replica (WAIT) when one is attached (docs/architecture.md §17,
jobs.core.replicas).

fakeredis knows neither INFO, ROLE nor WAIT, so these tests check the decisions: what a ROLE
reply means, that WAIT is the last command of a pipeline that sends one of an upload's last
writes, after everything else of the upload was sent, in every submit path (and never sent
without a replica), and what 0 confirmations become on the API, the form and the CLI. A
stand-in answers WAIT (`replica`); tests/integration/core/test_replica_acks.py proves the same on a
real primary and replica.
"""

from __future__ import annotations

import io

import pytest
from redis.client import Pipeline
from redis.exceptions import ResponseError

from jobs import NotReplicated, Settings
from jobs.core import keys, replicas
from jobs.tasks.submit import INLINE_BYTES
from tests.unit.conftest import upload

BIG = INLINE_BYTES + 1000  # read again from the request's spooled file as it is stored


def test_role_reply_counts_online_replicas_of_a_primary_only():
    assert replicas.attached([b"master", 3753, [[b"127.0.0.1", b"16402", b"3753"]]]) == 1
    assert replicas.attached([b"master", 0, []]) == 0
    assert replicas.attached(["master", 10, [["a", "1", "9"], ["b", "2", "9"]]]) == 2
    assert replicas.attached([b"slave", b"127.0.0.1", 6379, b"connected", 10]) == 0
    assert replicas.attached(ResponseError("unknown command 'role'")) == 0  # fakeredis, ACLs


def test_replica_wait_ms_defaults_to_500_and_is_validated():
    assert Settings.from_mapping({}).replica_wait_ms == 500
    assert Settings.from_mapping({"INTAKE_REPLICA_WAIT_MS": "250"}).replica_wait_ms == 250
    for bad in ("0", "-1", "1501", "soon"):
        with pytest.raises(ValueError, match="INTAKE_REPLICA_WAIT_MS"):
            Settings.from_mapping({"INTAKE_REPLICA_WAIT_MS": bad})


def test_no_confirmation_is_not_replicated_with_the_timeout_in_its_words():
    replicas.confirm(1, Settings())
    with pytest.raises(NotReplicated) as refused:
        replicas.confirm(0, Settings(replica_wait_ms=500))
    assert refused.value.code == "not_replicated" and "500 ms" in refused.value.message


class Replica:
    """Stands in for the replicas the claim counts and for WAIT: records every pipeline sent,
    answers a WAIT (taken off the pipeline before fakeredis sees it) with `acks`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, attached: int) -> None:
        self.acks, self.pipelines, self.counts = 1, [], []
        real_reported, real_execute = replicas.reported, Pipeline.execute

        def role(online):
            self.counts.append(online)
            real_reported(online)
            return attached

        def execute(pipe, raise_on_error=True):
            names = [str(args[0]).upper() for args, _ in pipe.command_stack]
            self.pipelines.append(names)
            if names and names[-1] == "WAIT":
                wait = pipe.command_stack.pop()[0]
                assert wait[1:] == (1, 500)
                return [*real_execute(pipe, raise_on_error), self.acks]
            return real_execute(pipe, raise_on_error)

        monkeypatch.setattr(replicas, "reported", role)
        monkeypatch.setattr(Pipeline, "execute", execute)

    @property
    def waits(self) -> list[list[str]]:
        return [names for names in self.pipelines if "WAIT" in names]


def _one_task_stored(redis) -> str:
    ids = [
        k.decode()[len(keys.TASK_PREFIX) :]
        for k in redis.scan_iter(keys.TASK_PREFIX + "*")
        if k.decode().count(":") == keys.TASK_PREFIX.count(":")
    ]
    assert len(ids) == 1, ids
    return ids[0]


def test_without_a_replica_no_upload_ever_waits(client, monkeypatch):
    replica = Replica(monkeypatch, attached=0)
    assert upload(client, ("a.txt", b"small one")).status_code == 202
    assert upload(client, ("b.txt", b"x" * BIG)).status_code == 202
    assert upload(client, ("a.txt", b"small one")).get_json()["tasks"][0]["duplicate"]
    assert replica.pipelines and not replica.waits
    assert replica.counts == [-1, -1, -1], "fakeredis refuses INFO: the claim says so"


def test_with_a_replica_wait_follows_a_one_file_upload_behind_a_write_of_its_own(
    client, monkeypatch
):
    assert upload(client, ("warm.txt", b"the claim script is loaded")).status_code == 202
    replica = Replica(monkeypatch, attached=1)
    assert upload(client, ("a.txt", b"y" * 10)).status_code == 202
    first, last = replica.pipelines
    assert first[-1] == "EVALSHA" and "HSET" in first, "RQ's enqueue and the claim in one trip"
    assert last == ["EXPIRE", "WAIT"]


@pytest.mark.parametrize(
    "files",
    [
        [("a.txt", b"y" * 10), ("b.txt", b"z" * 10)],
        [("a.txt", b"y" * BIG)],
        [("a.txt", b"y" * BIG), ("b.txt", b"z" * BIG)],
    ],
    ids=["small-batch", "one-spooled", "spooled-batch"],
)
def test_with_a_replica_wait_ends_the_pipeline_of_a_batch_s_last_jobs(client, monkeypatch, files):
    replica = Replica(monkeypatch, attached=1)
    assert upload(client, *files).status_code == 202
    [last] = replica.waits
    assert replica.pipelines[-1] is last and last[-1] == "WAIT"
    assert "HSET" in last, "RQ's enqueue (the job's hash) is in the pipeline WAIT closes"


def test_an_all_duplicate_upload_waits_too_behind_a_write_of_its_own(client, monkeypatch):
    assert upload(client, ("a.txt", b"same")).status_code == 202
    replica = Replica(monkeypatch, attached=1)
    again = upload(client, ("a.txt", b"same"))
    assert again.status_code == 202 and again.get_json()["tasks"][0]["duplicate"]
    assert replica.waits == [["EXPIRE", "WAIT"]]  # WAIT counts its own connection's writes


def test_unconfirmed_upload_is_a_503_and_its_resend_the_same_task(
    client, redis, monkeypatch, run_jobs
):
    replica = Replica(monkeypatch, attached=1)
    replica.acks = 0
    refused = upload(client, ("a.txt", b"keep me"))
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    error = refused.get_json()["error"]
    assert error["code"] == "not_replicated"
    assert "500 ms" in error["message"] and "duplicate" in error["message"]
    stored = _one_task_stored(redis)  # the upload was stored all the same
    replica.acks = 1
    resent = upload(client, ("a.txt", b"keep me"))
    assert resent.status_code == 202
    [task] = resent.get_json()["tasks"]
    assert task["id"] == stored and task["duplicate"] is True
    assert _one_task_stored(redis) == stored, "nothing doubled"
    run_jobs()
    assert client.get(f"/api/tasks/{stored}").get_json()["status"] == "succeeded"


def test_unconfirmed_form_upload_shows_a_readable_error(make_app, monkeypatch):
    client = make_app(WTF_CSRF_ENABLED=False).test_client()
    replica = Replica(monkeypatch, attached=1)
    replica.acks = 0
    answer = client.post(
        "/upload",
        data={"files": [(io.BytesIO(b"form file"), "f.txt")]},
        content_type="multipart/form-data",
        follow_redirects=True,
    )
    assert answer.status_code == 200
    assert "no replica confirmed it within 500 ms" in answer.get_data(as_text=True)


def test_unconfirmed_cli_ingest_says_so_and_exits_1(app, monkeypatch, tmp_path):
    replica = Replica(monkeypatch, attached=1)
    replica.acks = 0
    (tmp_path / "c.txt").write_text("from the command line")
    result = app.test_cli_runner().invoke(args=["ingest", "--no-wait", str(tmp_path)])
    assert result.exit_code == 1 and "no replica confirmed it" in result.output
