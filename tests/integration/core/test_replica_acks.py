"""An upload answers 202 only once a replica has its records (docs/architecture.md §17,
jobs.core.replicas: WAIT).

A primary redis-server and a replica of it (`--replicaof`) of this module's own, on loopback
ports, with a Procfile web and a worker on the primary. Accepted: the task's hash is on the
replica when the 202 arrives. The replica paused (SIGSTOP): 503 `not_replicated` with
Retry-After within about INTAKE_REPLICA_WAIT_MS; once it runs again, the same files sent again
answer the same task (`duplicate: true`), which succeeds, one task and one job. Without a
replica (the session's plain redis-server) an upload never waits.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from jobs.core import keys
from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import TASK_TIMEOUT, get_json, txt, unique_word, upload
from tests.integration.processes import ProcessGroup
from tests.integration.servers import REDIS_SERVER, RedisServer

pytestmark = pytest.mark.integration

WAIT_MS = 500
MARGIN_S = 2.0  # a loaded machine's answer beside the wait itself


class Pair:
    """A primary and its replica, each a real redis-server."""

    def __init__(self, group: ProcessGroup, data_dir) -> None:
        self.primary = RedisServer(group, data_dir / "primary", name="primary")
        self.replica = RedisServer(group, data_dir / "replica", name="replica")
        self.replica.process.argv += ["--replicaof", "127.0.0.1", str(self.primary.port)]

    def start(self) -> Pair:
        self.primary.start()
        self.replica.start()
        self.wait_in_sync()
        return self

    def wait_in_sync(self, timeout: float = 20.0) -> None:
        """Until the replica confirms a write (WAIT answers 1): listed online is not enough,
        just after its first sync a replica gets the stream only once it acknowledged once."""
        primary = self.primary.client()

        def confirmed() -> int:
            pipe = primary.pipeline(transaction=False)  # WAIT on the connection of the write
            pipe.set("itest:replica-probe", "1")
            pipe.execute_command("WAIT", 1, 200)
            return pipe.execute()[-1]

        poll(
            confirmed,
            lambda acks: acks >= 1,
            timeout=timeout,
            message="the replica confirming a write",
            ignore=(redis.ConnectionError,),
        )

    def pause(self) -> None:
        self.replica.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.replica.process.send_signal(signal.SIGCONT)


@contextmanager
def running_pair(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Pair]:
    """A started Pair, its data and logs under `name`, stopped at the end of the block."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed: a primary and a replica are needed")
    group = ProcessGroup(tmp_path_factory.mktemp(f"logs-{name}"))
    try:
        yield Pair(group, tmp_path_factory.mktemp(name)).start()
    finally:
        group.stop_all(timeout=10)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Iterator[Pair]:
    with running_pair(tmp_path_factory, "replica-acks") as started:
        yield started


@pytest.fixture(scope="module")
def stack(pair: Pair, _embedding_server, tmp_path_factory) -> Iterator[Stack]:
    with running_stack(
        pair.primary,
        tmp_path_factory,
        "replica-acks",
        0,
        {"INTAKE_REPLICA_WAIT_MS": str(WAIT_MS)},
        embedding=_embedding_server,
        workers=1,
    ) as started:
        yield started


def _wait_succeeded(client: ApiClient, task_id: str) -> None:
    poll(
        lambda: get_json(client, f"/api/tasks/{task_id}")["status"],
        lambda status: status == "succeeded",
        timeout=TASK_TIMEOUT,
        message=f"task {task_id} succeeded",
    )


def test_an_accepted_upload_is_on_the_replica_when_the_202_arrives(pair, stack):
    replica = pair.replica.client()
    with ApiClient(stack.url) as client:
        response, _ = upload(client, [txt(f"kept-{unique_word()}.txt", "kept on two machines")])
        assert response.status_code == 202, response.text[:500]
        task_id = response.json()["tasks"][0]["id"]
        seen = replica.hgetall(keys.task(task_id))  # at once: no poll, it must be there
        assert seen[b"status"] == b"pending" and seen[b"id"] == task_id.encode()
        assert replica.exists(keys.batch(response.json()["batch_id"]))
        _wait_succeeded(client, task_id)


def test_a_paused_replica_makes_a_503_whose_resend_is_the_same_task(pair, stack):
    name = f"paused-{unique_word()}.txt"
    primary = pair.primary.client()
    with ApiClient(stack.url) as client:
        pair.pause()
        try:
            refused, seconds = upload(client, [txt(name, "sent while the replica sleeps")])
        finally:
            pair.resume()
        assert refused.status_code == 503, refused.text[:500]
        assert (
            refused.headers["Retry-After"] and refused.json()["error"]["code"] == "not_replicated"
        )
        assert "500 ms" in refused.json()["error"]["message"]
        assert WAIT_MS / 1000 * 0.9 <= seconds < WAIT_MS / 1000 + MARGIN_S, seconds
        stored = primary.get(keys.document_latest("default", name))
        assert stored, "the refused upload was stored all the same"

        pair.wait_in_sync()
        resent, _ = upload(client, [txt(name, "sent while the replica sleeps")])
        assert resent.status_code == 202, resent.text[:500]
        [task] = resent.json()["tasks"]
        assert task["duplicate"] is True and task["id"] == stored.decode()
        assert primary.smembers(keys.document_tasks("default", name)) == {stored}, "one task"
        _wait_succeeded(client, task["id"])
        assert get_json(client, f"/api/tasks/{task['id']}")["attempts"] == 1, "one job, run once"


def test_without_a_replica_an_upload_never_waits(api):
    """The session's redis-server has no replica: no WAIT, so no upload takes its timeout."""
    seconds = []
    for _ in range(3):
        response, elapsed = upload(api, [txt(f"alone-{unique_word()}.txt", "one machine")])
        assert response.status_code == 202, response.text[:500]
        seconds.append(elapsed)
    assert min(seconds) < WAIT_MS / 1000 * 0.9, seconds
