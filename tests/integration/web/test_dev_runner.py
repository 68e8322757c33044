"""`make run` as a person uses it (docs/architecture.md §2): `flask --app webapp dev` starts a
redis-server with AOF for the queue and one for the knowledge base, two supervised workers and
the web app; a document goes through and is found, its index on the knowledge base's Redis
alone; a worker killed is started again; Ctrl-C stops every process it started, Redis last.

The runner is started exactly as `make run` starts it, with its Redis data in the test's own
folder (--instance-dir) and on free ports.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import redis

from runner.processes import ManagedProcess, free_port
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal
from tests.integration.processes import REPO_ROOT, VENV_BIN, base_env
from tests.integration.servers import REDIS_SERVER

pytestmark = pytest.mark.integration


def _children(pid: int) -> set[int]:
    """Every live descendant of `pid`."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X"):
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_make_run_serves_a_document_restarts_a_worker_and_stops_everything(tmp_path):
    port = free_port()
    runner = ManagedProcess(
        "dev-runner",
        [
            str(VENV_BIN / "flask"),
            "--app",
            "webapp",
            "dev",
            "--port",
            str(port),
            "--workers",
            "2",
            "--instance-dir",
            str(tmp_path / "instance"),
        ],
        base_env(),
        tmp_path / "runner.log",
        cwd=REPO_ROOT,
    ).start()
    try:
        with ApiClient(f"http://127.0.0.1:{port}") as client:
            health = poll(
                lambda: get_json(client, "/api/health"),
                lambda h: h["workers"]["count"] == 2,
                timeout=60,
                interval=0.2,
                message="the runner's web answering with two workers",
                ignore=(Exception,),
            )
            word = unique_word()
            response, _ = upload(client, [txt(f"dev-{word}.txt", f"The {word} note.")])
            assert response.status_code == 202, response.text
            task_id = response.json()["tasks"][0]["id"]
            assert wait_terminal(client, [task_id])[0][task_id]["status"] == "succeeded"
            assert (tmp_path / "instance" / "redis").is_dir(), "the AOF is in --instance-dir"
            (hit,) = get_json(client, f"/api/search?q={word}")["results"]
            assert hit["task_id"] == task_id
            kb = get_json(client, "/api/health")["dependencies"]["kb"]
            assert kb["apart"] and kb["up"], kb
            assert (tmp_path / "instance" / "redis-kb").is_dir(), "the KB's AOF too"
            state = json.loads((tmp_path / "instance" / "dev-runner.json").read_text())
            queue, knowledge_base = (
                redis.Redis.from_url(state[k]) for k in ("redis_url", "kb_url")
            )
            assert list(knowledge_base.scan_iter(match="intake:kb:*", count=10_000))
            assert not list(queue.scan_iter(match="intake:kb:*", count=10_000)), (
                "no search reads the queue's Redis"
            )

            before = set(health["workers"]["names"])
            # The runner's own children only: a worker forks a scheduler with the same command
            # line, and killing that would leave the worker (and its name) alive.
            processes = _children(runner.pid)
            worker_pids = [
                pid
                for pid in processes
                if b"rq.cli" in Path(f"/proc/{pid}/cmdline").read_bytes()
                and _parent(pid) == runner.pid
            ]
            assert worker_pids, processes
            os.kill(worker_pids[0], signal.SIGKILL)
            poll(
                lambda: get_json(client, "/api/health")["workers"],
                lambda w: w["count"] == 2 and set(w["names"]) != before,
                timeout=60,
                interval=0.5,
                message="the killed worker started again under a new name",
            )
        everything = _children(runner.pid)
        runner.send_signal(signal.SIGINT)  # Ctrl-C
        runner.popen.wait(60)
        assert runner.returncode == 0, runner.tail()
        poll(
            lambda: [pid for pid in everything if _alive(pid)],
            lambda left: left == [],
            timeout=10,
            interval=0.1,
            message="every process the runner started has exited",
        )
        assert "Stopped." in runner.log_text()
    finally:
        runner.stop(15)
