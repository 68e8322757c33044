"""Where every process finds Redis (docs/architecture.md §17): REDIS_SENTINELS becomes one Sentinel
address that the web, the workers' command line and the dashboard all read, with bounded waits.
(Failover itself, on real Sentinels: tests/integration/core/test_failover.py.)"""

from __future__ import annotations

import time

import fakeredis
import pytest
from redis import BlockingConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis_sentinel_url import parse_sentinel_url

from jobs.core.addresses import sentinel_url
from jobs.core.failures import TransientError
from jobs.core.redis_client import (
    WEB,
    WORKER,
    FollowingConnection,
    SentinelBlockingConnectionPool,
    WorkerRedis,
    connect,
    dashboard_url,
    is_outage,
)
from jobs.core.settings import Settings
from jobs.worker.classify import classify
from webapp import create_app


def test_sentinels_and_master_make_one_sentinel_address() -> None:
    settings = Settings.from_mapping(
        {
            "REDIS_SENTINELS": "10.0.0.1:26379, 10.0.0.2,10.0.0.3:5000",
            "REDIS_SENTINEL_MASTER": "intake",
        }
    )
    assert settings.redis_url == (
        "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:5000/intake/0"
    )
    parsed = parse_sentinel_url(settings.redis_url)  # rq-dashboard's parser reads it too
    assert parsed.hosts == [("10.0.0.1", 26379), ("10.0.0.2", 26379), ("10.0.0.3", 5000)]
    assert parsed.default_client.service == "intake"


def test_sentinels_win_over_redis_url_and_master_defaults_to_mymaster() -> None:
    settings = Settings.from_mapping(
        {"REDIS_SENTINELS": "s1:26379", "REDIS_URL": "redis://elsewhere:6379/0"}
    )
    assert settings.redis_url == "redis+sentinel://s1:26379/mymaster/0"


@pytest.mark.parametrize("value", ["", " , ", "host:port", ":26379"])
def test_a_bad_sentinel_list_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(ValueError, match="REDIS_SENTINELS"):
        sentinel_url(value, "mymaster")


def test_the_web_client_gives_up_within_the_bound_and_never_retries_a_timeout() -> None:
    client = connect("redis://127.0.0.1:1/0", WEB, max_connections=8, pool_timeout=1)
    pool = client.connection_pool
    assert isinstance(pool, BlockingConnectionPool) and pool.timeout == 1
    kwargs = pool.connection_kwargs
    assert kwargs["socket_timeout"] + pool.timeout <= 3.0  # architecture.md §17: 503 ≤ 3 s
    retry = kwargs["retry"]
    assert RedisConnectionError in retry._supported_errors
    assert RedisTimeoutError not in retry._supported_errors
    with pytest.raises(RedisConnectionError):  # refused: two quick tries, then the error
        client.ping()


def test_a_sentinel_address_gives_a_pool_that_asks_the_sentinels_on_every_connect() -> None:
    client = connect(
        "redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster/3",
        WEB,
        max_connections=8,
        pool_timeout=1,
    )
    pool = client.connection_pool
    assert isinstance(pool, SentinelBlockingConnectionPool)
    assert pool.service_name == "mymaster" and pool.connection_kwargs["db"] == 3
    assert pool.connection_class is FollowingConnection
    started = time.monotonic()
    with pytest.raises(RedisConnectionError):  # no Sentinel answers: MasterNotFoundError
        client.ping()
    assert time.monotonic() - started < 3.0  # each asked once, not three times seconds apart


def test_rq_builds_the_worker_client_from_the_url_with_the_worker_profile() -> None:
    client = WorkerRedis.from_url("redis+sentinel://127.0.0.1:1/mymaster/0")
    assert isinstance(client, WorkerRedis)
    assert client.connection_pool.connection_kwargs["retry"]._retries == WORKER.retries
    plain = WorkerRedis.from_url("redis://127.0.0.1:6399/2")
    assert plain.connection_pool.connection_kwargs["db"] == 2


def test_the_dashboard_address_carries_the_web_bounds() -> None:
    assert dashboard_url("redis://h:1/0") == (
        "redis://h:1/0?socket_timeout=2&socket_connect_timeout=1"
    )
    parsed = parse_sentinel_url(dashboard_url("redis+sentinel://h:1/m/0"))
    assert parsed.client_options["socket_timeout"] == 2.0


class _RefusingWrites(fakeredis.FakeRedis):
    """A Redis that answers every command as a primary cut off from its replicas does."""

    def execute_command(self, *args, **options):
        raise ResponseError("NOREPLICAS Not enough good replicas to write.")


@pytest.mark.parametrize(
    "reply",
    [
        "NOREPLICAS Not enough good replicas to write.",
        "MASTERDOWN Link with MASTER is down",
        "READONLY You can't write against a read only replica.",
    ],
)
def test_a_redis_refusing_writes_is_an_outage_not_a_bug(reply: str) -> None:
    assert is_outage(ResponseError(reply))
    error = classify(ResponseError(reply), "indexing")
    assert isinstance(error, TransientError) and error.code == "service_unavailable"
    assert not is_outage(ResponseError("WRONGTYPE Operation against a key"))


def test_the_api_answers_503_with_retry_after_while_redis_refuses_writes(monkeypatch) -> None:
    for name in ("REDIS_URL", "SECRET_KEY", "INTAKE_API_KEYS", "INTAKE_ADMIN_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    app = create_app({"TESTING": True, "SECRET_KEY": "test", "REDIS_CONNECTION": _RefusingWrites()})
    response = app.test_client().get("/api/health")
    assert response.status_code == 503
    assert response.headers["Retry-After"]
    assert response.get_json()["error"]["code"] == "redis_unavailable"
