"""A worker machine cut off from the network mid-job (docs/architecture.md §17): its task is
re-driven by another worker within the crash bound, the cut-off worker stops its work-horse as soon
as its own writes fail (jobs.workers.IntakeWorker.stop_horse_left_behind), and when the link comes
back no state goes backwards and the document is indexed once.

Real processes and a real network cut: one worker runs in a network namespace of its own,
joined to the test's Redis and embedding server by a veth pair with private addresses that only
this test uses (10.213.n.0/30). Redis and the embedding server listen on the pair's host end, so
the web and the other worker (in the machine's namespace) reach them as before while the
namespace's link is down: `ip link set <host end> down` drops every packet, no RST, a stall.
Needs root and `ip netns`; skipped with the reason elsewhere.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from rq.job import Job

from jobs.worker.workers import worker_command
from runner.redis_service import server_argv
from tests.integration.embedding_server import EmbeddingServer
from tests.integration.faults import CRASH_BOUND, children, chunk_count, document, task
from tests.integration.fixtures import SECRET_KEY, _group
from tests.integration.helpers import ApiClient, assert_stays, free_port, poll
from tests.integration.intake_api import txt, unique_word, upload
from tests.integration.processes import base_env
from tests.integration.servers import REDIS_SERVER, WebServer, WorkerPool

#: The cut-off worker's horse must be gone before the job's heartbeat expires (65 s after the
#: last good one, when another worker may take the task); RQ's worker notices within one 5 s
#: heartbeat and a 15 s socket timeout at most, its teardown as long again: 45 s, 20 s short.
HORSE_STOP_BOUND = 45.0
SLOW = "slow:3"  # every embedding request (one chunk each) takes 3 s
PARAGRAPHS = 24  # ~20 chunks: a minute of embedding, cut a few seconds in


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


def _netns_unavailable() -> str:
    if os.geteuid() != 0:
        return "needs root to create a network namespace and a veth pair"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip` command"
    if REDIS_SERVER is None:
        return "needs a real redis-server"
    probe = f"intake-probe-{uuid.uuid4().hex[:6]}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"network namespaces are not available here: {exc}"
    _ip("netns", "delete", probe)
    return ""


_UNAVAILABLE = _netns_unavailable()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(_UNAVAILABLE), reason=_UNAVAILABLE or "available"),
]


class _Link:
    """A network namespace joined to this one by a veth pair: `host_address` here,
    `worker_address` in there; `cut()` and `restore()` take the host end down and up."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.namespace, self.host_end, peer = f"intake-{tag}", f"ivh{tag}", f"ivw{tag}"
        subnet = random.randrange(256)
        self.host_address, self.worker_address = f"10.213.{subnet}.1", f"10.213.{subnet}.2"
        _ip("netns", "add", self.namespace)
        try:
            _ip("link", "add", self.host_end, "type", "veth", "peer", "name", peer)
            _ip("link", "set", peer, "netns", self.namespace)
            _ip("addr", "add", f"{self.host_address}/30", "dev", self.host_end)
            _ip("link", "set", self.host_end, "up")
            inside = ("netns", "exec", self.namespace, "ip")
            _ip(*inside, "addr", "add", f"{self.worker_address}/30", "dev", peer)
            _ip(*inside, "link", "set", peer, "up")
            _ip(*inside, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def cut(self) -> None:
        _ip("link", "set", self.host_end, "down")

    def restore(self) -> None:
        _ip("link", "set", self.host_end, "up")

    def close(self) -> None:
        subprocess.run(["ip", "link", "delete", self.host_end], capture_output=True, timeout=20)
        subprocess.run(["ip", "netns", "delete", self.namespace], capture_output=True, timeout=20)


@pytest.fixture
def link() -> Iterator[_Link]:
    joined = _Link()
    try:
        yield joined
    finally:
        joined.close()


def test_a_worker_cut_off_mid_job_is_replaced_and_its_late_writes_change_nothing(
    link: _Link, tmp_path_factory
) -> None:
    group = _group(tmp_path_factory, "cut-off")
    port = free_port()
    data = tmp_path_factory.mktemp("cut-off-redis")
    argv = server_argv(port, data, durable=False, executable=REDIS_SERVER or "redis-server")
    argv.insert(argv.index("--bind") + 2, link.host_address)  # both ends' address, loopback too
    argv += ["--protected-mode", "no"]  # reached on a private address only this test has
    server = group.spawn("redis-cut-off", argv, base_env())
    embedder = EmbeddingServer(host=link.host_address)
    redis_url = f"redis://{link.host_address}:{port}/0"
    store = redis.Redis.from_url(redis_url, socket_timeout=5)
    poll(
        store.ping,
        timeout=15,
        message="the test's redis-server answering",
        ignore=(redis.ConnectionError,),
    )
    env = base_env(
        {
            "REDIS_URL": redis_url,
            "SECRET_KEY": SECRET_KEY,
            "INTAKE_EMBEDDING_URL": embedder.url,
            "INTAKE_EMBEDDING_BATCH_SIZE": "1",
            "INTAKE_MAX_ATTEMPTS": "3",
            "INTAKE_RETRY_BASE_SECONDS": "1",
        }
    )
    web = WebServer(_group(tmp_path_factory, "cut-off-web"), env)
    others = WorkerPool(
        _group(tmp_path_factory, "cut-off-workers"), redis_url, env, prefix="itest-near"
    )
    far_name = f"itest-far-{uuid.uuid4().hex[:6]}"
    far = group.spawn(
        f"worker-{far_name}",
        ["ip", "netns", "exec", link.namespace, *worker_command(redis_url, name=far_name)],
        env,
    )
    try:
        web.start()
        poll(
            lambda: {w.decode() for w in store.smembers("rq:workers")},
            lambda names: f"rq:worker:{far_name}" in names,
            timeout=60,
            message="the namespaced worker registered",
        )
        embedder.mode = SLOW
        word = unique_word()
        text = document(word, paragraphs=PARAGRAPHS)
        with ApiClient(web.url, timeout=10) as client:
            answer, _ = upload(client, [txt("cut-off.txt", text)])
            assert answer.status_code == 202, answer.text
            task_id = answer.json()["tasks"][0]["id"]
            poll(
                lambda: (task(client, task_id)["status"], len(embedder.received(word))),
                lambda seen: seen[0] == "running" and seen[1] >= 1,
                timeout=60,
                message="the task embedding on the namespaced worker",
            )
            assert Job.fetch(task_id, connection=store).worker_name == far_name
            horses = poll(
                lambda: [c for c, g in children(far.pid) if c == g],
                lambda found: len(found) == 1,
                timeout=10,
                message="the namespaced worker's work-horse",
            )
            horse = horses[0]
            others.start(1)  # the worker that will take the task over
            before = task(client, task_id)

            link.cut()
            cut_at = time.monotonic()
            poll(
                lambda: os.path.exists(f"/proc/{horse}") and not _zombie(horse),
                lambda alive: not alive,
                timeout=HORSE_STOP_BOUND,
                interval=0.25,
                message=f"the cut-off worker's work-horse {horse} stopped",
            )
            horse_gone = time.monotonic() - cut_at
            embedder.mode = "ok"  # the next attempt need not wait a minute

            final = poll(
                lambda: task(client, task_id),
                lambda t: t["status"] == "succeeded",
                timeout=CRASH_BOUND,
                interval=0.25,
                message="the task re-driven by another worker and succeeded",
            )
            succeeded_after = time.monotonic() - cut_at
            print(
                f"\ncut off: the work-horse stopped {horse_gone:.1f} s after the cut; the "
                f"task succeeded on another worker {succeeded_after:.1f} s after it "
                f"(attempt {final['attempts']})"
            )
            assert final["attempts"] > before["attempts"], (before, final)
            assert Job.fetch(task_id, connection=store).worker_name != far_name

            # The lost machine comes back: nothing of its old attempt shows or changes.
            link.restore()
            restored = final
            assert_stays(
                lambda: task(client, task_id),
                lambda t: (
                    (t["status"], t["attempts"], t["progress"], t["current_step"])
                    == (restored["status"], restored["attempts"], 100, restored["current_step"])
                ),
                duration=8.0,
                interval=0.25,
                message="the task as the new attempt left it",
            )
            # The cut-off worker quits (its supervisor would start it again); it writes no task.
            poll(
                lambda: far.running,
                lambda running: not running,
                timeout=60,
                message="the cut-off worker quit",
            )
            chunks = client.get(f"/api/tasks/{task_id}/chunks", params={"limit": 100}).json()
            assert chunks["total"] == chunk_count(text)
            found = client.get("/api/search", params={"q": word, "k": 50}).json()["results"]
            assert found and {r["task_id"] for r in found} == {task_id}
            pairs = [(r["document_id"], r["chunk"]) for r in found]
            assert len(pairs) == len(set(pairs)) == min(50, chunk_count(text))
    finally:
        link.restore()
        far.stop(10)
        others.stop_all()
        web.stop()
        embedder.close()
        server.stop(10)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False
