"""The harness itself: a broken fixture must not pass for a broken app, so it is tested first."""

from __future__ import annotations

import signal
import sys

import pytest
import redis
import requests

from tests.integration.embedding_server import DIMENSION, embed
from tests.integration.helpers import assert_stays, poll, wait_until
from tests.integration.processes import ProcessGroup, base_env
from tests.integration.servers import REDIS_SERVER, RedisServer, procfile_command

pytestmark = pytest.mark.integration


def test_wait_until_reports_the_last_value_on_timeout():
    values = iter(range(1000))
    with pytest.raises(AssertionError, match=r"counting: not true after 0.2 s; last value: \d+"):
        poll(lambda: next(values), lambda v: v < 0, timeout=0.2, interval=0.01, message="counting")
    assert wait_until(lambda: 7, timeout=1) == 7
    with pytest.raises(AssertionError, match="went away"):
        assert_stays(lambda: next(values), lambda v: v < 5, duration=1, message="went away")


def test_session_redis_answers(redis_server):
    client = redis_server.client(decode_responses=True)
    assert client.ping()
    assert redis_server.url.endswith(f":{redis_server.port}/0")


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_redis_server_restarts_on_the_same_port_with_or_without_its_data(tmp_path):
    group = ProcessGroup(tmp_path / "logs")
    server = RedisServer(group, tmp_path / "data", name="redis-restart-test")
    try:
        server.start()
        server.client().set("key", "kept")
        port = server.port
        server.stop()
        with pytest.raises(redis.ConnectionError):
            server._probe().ping()
        server.start()
        assert server.port == port and server.client().get("key") == b"kept"
        server.stop(persist=False)
        server.start()
        # A crash after the planned restart: only what the last SHUTDOWN SAVE wrote survives.
        assert server.client().get("key") == b"kept"
        server.client().set("key", "new")
        server.stop(persist=False)
        server.start()
        assert server.client().get("key") == b"kept"
    finally:
        group.stop_all()
    assert not server.process.running


def test_process_group_captures_output_and_stops_stubborn_processes(tmp_path):
    group = ProcessGroup(tmp_path)
    stubborn = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        "print('re' + 'ady', flush=True); time.sleep(60)"
    )
    proc = group.spawn("stubborn", [sys.executable, "-c", stubborn], base_env())
    wait_until(lambda: "\nready" in proc.log_text(), timeout=10, message="child printed ready")
    assert proc.stop(timeout=0.5) == -signal.SIGKILL
    assert "stubborn" in group.report() and "ready" in group.report()


def test_both_workers_are_registered(workers, redis_server):
    assert len(workers.names) == 2
    assert set(workers.names) <= workers.registered()
    assert all(proc.running for proc in workers.processes.values())


def test_procfile_command_expands_variables(tmp_path):
    procfile = tmp_path / "Procfile"
    procfile.write_text(
        "# comment\nweb: FOO=1 gunicorn --bind 0.0.0.0:$PORT --x ${PORT:-5} 'a.b:app'\n"
        "worker: rq worker --url $REDIS_URL\n"
    )
    argv, assignments = procfile_command("web", {"PORT": "8123"}, procfile)
    assert argv == ["gunicorn", "--bind", "0.0.0.0:8123", "--x", "8123", "a.b:app"]
    assert assignments == {"FOO": "1"}
    argv, _ = procfile_command("worker", {"REDIS_URL": "redis://h:1/0"}, procfile)
    assert argv[-1] == "redis://h:1/0"


def test_embedding_server_modes(embedding_server):
    url = embedding_server.url + "/embeddings"
    ok = requests.post(url, json={"model": "m", "input": ["alpha beta", "alpha beta"]}, timeout=5)
    assert ok.status_code == 200
    data = ok.json()["data"]
    assert [d["index"] for d in data] == [0, 1] and data[0]["embedding"] == embed("alpha beta")
    assert len(data[0]["embedding"]) == DIMENSION

    embedding_server.mode = "status:503"
    down = requests.post(url, json={"input": "x"}, timeout=5)
    assert down.status_code == 503 and "Retry-After" not in down.headers
    embedding_server.mode = "status:429:3"
    limited = requests.post(url, json={"input": "x"}, timeout=5)
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "3"

    embedding_server.mode = "ok"
    embedding_server.fail_next(1, "status:500")
    assert requests.post(url, json={"input": "x"}, timeout=5).status_code == 500
    assert requests.post(url, json={"input": "x"}, timeout=5).status_code == 200

    embedding_server.mode = "slow:2"
    with pytest.raises(requests.Timeout):
        requests.post(url, json={"input": "x"}, timeout=0.3)
    assert embedding_server.requests == 6

    embedding_server.mode = "ok"
    embedding_server.limit_inputs(2)
    assert requests.post(url, json={"input": ["a", "b", "c"]}, timeout=5).status_code == 413
    assert requests.post(url, json={"input": ["a", "b"]}, timeout=5).status_code == 200
    embedding_server.limit_inputs(2, status=400)
    refused = requests.post(url, json={"input": ["a", "b", "c"]}, timeout=5)
    assert refused.status_code == 400 and refused.json() == {"detail": "too many inputs"}
    assert [r.mode for r in embedding_server.log[-3:]] == ["too_many:413", "ok", "too_many:400"]
    assert all(r.ended is not None and r.ended >= r.at for r in embedding_server.log[-3:])
    assert embedding_server.max_in_flight == 2, "the slow request was still held meanwhile"


def test_the_fakeredis_fallback_serves_clients_but_skips_a_restart():
    from tests.integration.servers import FakeRedisTcpServer

    server = FakeRedisTcpServer().start()
    try:
        assert server.client().set("k", "v") and server.client().get("k") == b"v"
        assert server.restartable is False
        with pytest.raises(pytest.skip.Exception, match="cannot be stopped and restarted"):
            server.stop()
    finally:
        server.close()
