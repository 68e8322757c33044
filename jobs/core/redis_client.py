"""How every Intake process reaches Redis: one address, bounded waits (docs/architecture.md §17).

Why one address string: the web, the workers (RQ's command line takes one `--url`), the
scheduler RQ forks, the dashboard, the CLI and the dev runner hand the location along as one
value. It is `redis://…` for one server, or — with REDIS_SENTINELS and REDIS_SENTINEL_MASTER —
`redis+sentinel://host:port,host:port/<master>/<db>` (the form rq-dashboard's Redis-Sentinel-Url
reads too), so every process finds the primary through Sentinel and follows a failover by
itself: a connection to a demoted or dead primary fails, and the next one asks the Sentinels.

Why bounded waits: a Redis that stops answering without refusing (a stalled network) must cost
a request seconds, not the 10 s × 3 of stacked timeouts and retries. Each process kind has a
profile: the web gives up within ~2 s (and answers 503), a worker rides out a failover's
refused connections for ~20 s before an attempt fails (its progress writes "retry rather than
fail"). A TimeoutError is never retried: after one the server is stalled or the command may
have run, and waiting twice as long only stacks up the stall.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis import BlockingConnectionPool, ConnectionPool, Redis
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection
from redis_sentinel_url import parse_sentinel_url

from jobs.core.addresses import SENTINEL_SCHEME

#: Error replies of a Redis that refuses writes for now: a demoted primary (READONLY), one cut
#: off from its replicas under `min-replicas-to-write` (NOREPLICAS), a replica whose primary is
#: down (MASTERDOWN), one still loading its data (LOADING).
REFUSING_WRITES = ("READONLY", "NOREPLICAS", "MASTERDOWN", "LOADING")


@dataclass(frozen=True)
class Profile:
    """How long one kind of process waits on Redis, and how often it tries a connection again.

    `socket_timeout` None leaves it to RQ (a worker's BLMOVE waits 5 s: RQ sets 15 s).
    `retries` apply to connection errors only (refused, reset, no primary known yet)."""

    socket_timeout: float | None
    connect_timeout: float
    retries: int
    backoff_base: float
    backoff_cap: float

    def retry(self) -> Retry:
        return Retry(
            ExponentialWithJitterBackoff(base=self.backoff_base, cap=self.backoff_cap),
            self.retries,
            supported_errors=(RedisConnectionError,),
        )


#: The web: a request answers within ~3 s whatever Redis does (a stall: one 2 s read, then
#: 503; a refused connection: two tries 0.1 s apart, then 503 with Retry-After).
WEB = Profile(
    socket_timeout=2.0, connect_timeout=1.0, retries=1, backoff_base=0.05, backoff_cap=0.1
)
#: Workers and their scheduler: a Sentinel failover (the primary's loss noticed, a replica
#: promoted: a few seconds past `down-after-milliseconds`) passes as refused connections,
#: tried again for ~20 s in all (20 tries, full jitter up to 2 s apart).
WORKER = Profile(
    socket_timeout=None, connect_timeout=2.0, retries=20, backoff_base=0.25, backoff_cap=2.0
)
#: Health's PING of the knowledge base's Redis and its replicas (jobs.core.dependencies): half
#: a second to connect, half for the answer, never tried again, so a PING that fails is over
#: within its probe's second.
PROBE = Profile(
    socket_timeout=0.5, connect_timeout=0.5, retries=0, backoff_base=0.05, backoff_cap=0.1
)
#: Short-lived commands (the CLI, migrations, the dev runner's checks).
COMMAND = Profile(
    socket_timeout=10.0, connect_timeout=2.0, retries=3, backoff_base=0.25, backoff_cap=2.0
)
#: The Sentinels themselves: each is asked in turn, once (redis-py's default would retry each
#: three times, seconds apart: 15 s before a web request learnt that none answers), so a
#: stalled one costs half a second.
SENTINEL_TIMEOUT = 0.5


class FollowingConnection(SentinelManagedConnection):
    """A connection to the Sentinels' current primary on every connect, retries included.

    Why: redis-py's retry of a failed command reconnects the same connection through
    `connect_check_health`, with the address it had — after a failover, the dead primary's —
    so every retry is refused (a work-horse can retry a dead address for 34 s while the replica
    was promoted after 2 s). Only a fresh connection from the pool asks the Sentinels. Here a
    reconnect asks them too, whichever way it comes; a connection that is still up (redis-py's
    public `is_connected`) is left as it is, so a connection taken from the pool asks the
    Sentinels nothing."""

    _address_fresh = False

    def connect_to(self, address: tuple[str, int]) -> None:
        self._address_fresh = True  # just asked the Sentinels: no need to ask twice
        try:
            super().connect_to(address)
        finally:
            self._address_fresh = False

    def connect_check_health(
        self, check_health: bool = True, retry_socket_connect: bool = True
    ) -> None:
        if not self.is_connected and not self._address_fresh and self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        super().connect_check_health(
            check_health=check_health, retry_socket_connect=retry_socket_connect
        )


class SentinelBlockingConnectionPool(SentinelConnectionPool, BlockingConnectionPool):
    """Sentinel's pool with BlockingConnectionPool's bounded wait for a free connection (the
    web's: a thousand streams opening together wait their turn instead of failing)."""


def is_outage(exc: BaseException) -> bool:
    """True when `exc` says Redis cannot serve us now (unreachable, stalled, or refusing
    writes in a failover), not that a command was wrong: a 503 and a retry, never a 500."""
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, ReadOnlyError)):
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith(REFUSING_WRITES)


def is_sentinel(url: str) -> bool:
    return url.startswith(SENTINEL_SCHEME + "://")


def connect(
    url: str,
    profile: Profile = COMMAND,
    *,
    redis_class: type[Redis] = Redis,
    max_connections: int | None = None,
    pool_timeout: float | None = None,
    **kwargs: Any,
) -> Redis:
    """A client of the Redis at `url` (plain or Sentinel) with `profile`'s waits.

    `max_connections` with `pool_timeout`: a blocking pool (wait that long for a free
    connection, then a ConnectionError: 503 on the web)."""
    options: dict[str, Any] = {
        "socket_connect_timeout": profile.connect_timeout,
        "retry": profile.retry(),
        **kwargs,
    }
    if profile.socket_timeout is not None:
        options["socket_timeout"] = profile.socket_timeout
    blocking = max_connections is not None and pool_timeout is not None
    if blocking:
        options.update(max_connections=max_connections, timeout=pool_timeout)
    if not is_sentinel(url):
        pool_class = BlockingConnectionPool if blocking else ConnectionPool
        return redis_class(connection_pool=pool_class.from_url(url, **options))
    parsed = parse_sentinel_url(url)
    sentinel = Sentinel(
        parsed.hosts,
        sentinel_kwargs={
            "socket_timeout": SENTINEL_TIMEOUT,
            "socket_connect_timeout": SENTINEL_TIMEOUT,
            "retry": Retry(NoBackoff(), 0),
            **parsed.sentinel_options,
        },
        **parsed.client_options,
    )
    pool_class = SentinelBlockingConnectionPool if blocking else SentinelConnectionPool
    return sentinel.master_for(
        parsed.default_client.service,
        redis_class=redis_class,
        connection_pool_class=pool_class,
        connection_class=FollowingConnection,
        **options,
    )


class WorkerRedis(Redis):
    """The client class of `rq worker --connection-class`: RQ builds its connection with
    `from_url(--url)`, which here also understands a Sentinel address and gives the worker
    the WORKER profile (RQ's scheduler and the work-horses copy the pool it makes)."""

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> WorkerRedis:
        return connect(url, WORKER, redis_class=cls, **kwargs)


def dashboard_url(url: str) -> str:
    """The address rq-dashboard connects with (it makes its own client per page): the same
    Redis, with the web's bounded waits written into the URL, which both parsers read."""
    separator = "&" if "?" in url else "?"
    return (
        f"{url}{separator}socket_timeout={WEB.socket_timeout:g}"
        f"&socket_connect_timeout={WEB.connect_timeout:g}"
    )
