"""Limits per tenant and per client, held in Redis (docs/architecture.md §18).

Why in Redis: the Procfile runs several web processes, often on several machines; a limit one
process kept in memory would multiply with them. Every decision is one round trip (a Lua script
that reads the clock with Redis `TIME`, so the machines' clocks never matter), and every key
expires by itself, so nothing is left behind by a process that was killed mid-request:

- searches running at once per tenant (INTAKE_TENANT_SEARCHES): a leased semaphore, a sorted
  set of slot tokens scored by when their lease ends (as jobs.embedding.budget holds embedding
  requests in flight). A search gives its slot back when it ends; a web process killed
  mid-search leaks it only until its lease ends (SEARCH_LEASE_SECONDS, longer than any search
  may take). Why not INCR/DECR with a TTL: a counter's TTL is renewed by every search, so on a
  busy tenant a leaked unit never expires, and a DECR after the key expired goes negative; a
  token per holder expires on its own and is given back exactly once.
- expensive reads per tenant (INTAKE_TENANT_EXPENSIVE_READS a minute) and failed sign-ins and
  API keys per client (INTAKE_CLIENT_AUTH_FAILURES a minute): fixed-window counters, an INCR
  on a key that expires with its window: O(1) and one key per tenant or client.
"""

from __future__ import annotations

import contextlib
import math
import uuid
from collections.abc import Iterator

import redis
from redis import Redis

from jobs.core import keys, scripts
from jobs.core.exceptions import Throttled

#: How long a search's slot is held at most: past every bound a search has (the web's 2 s read
#: timeout per script call, the embedding service's INTAKE_SEARCH_EMBEDDING_TIMEOUT), with a
#: wide margin. Only a web process killed mid-search leaves a slot to this lease.
SEARCH_LEASE_SECONDS = 60
#: The window expensive reads are counted over, and its share of the per-minute limit: a
#: burst is cut within seconds, and a refused client is told to wait seconds, not a minute.
READS_WINDOW_SECONDS = 10
AUTH_WINDOW_SECONDS = 60

_TAKE_SLOT = scripts.load(__file__, "throttle_take_slot")
_COUNT = scripts.load(__file__, "throttle_count")


def _seconds(ms: int) -> int:
    return max(1, math.ceil(int(ms) / 1000))


class SearchSlots:
    """At most `limit` searches of one tenant at once, all web processes together."""

    def __init__(
        self, connection: Redis, limit: int, lease_seconds: int = SEARCH_LEASE_SECONDS
    ) -> None:
        self.connection = connection
        self.limit = limit
        self.lease_ms = lease_seconds * 1000

    def take(self, tenant: str) -> str:
        """A slot's token, or Throttled (429 too_many_searches) when every slot is taken."""
        token = uuid.uuid4().hex
        taken, wait_ms = _TAKE_SLOT(
            self.connection,
            keys={"slots": keys.search_slots(tenant)},
            args={"limit": self.limit, "lease_ms": self.lease_ms, "token": token},
        )
        if not taken:
            # A slot frees when a search ends, most often within a second; the lease is the
            # worst case, not the hint.
            raise Throttled(
                "too_many_searches",
                f"You already have {self.limit} searches running; try again when one has finished.",
                retry_after=min(2, _seconds(wait_ms)),
            )
        return token

    def give_back(self, tenant: str, token: str) -> None:
        """The search is over. A Redis that cannot be reached now leaves the slot to its
        lease, which is what the lease is for."""
        with contextlib.suppress(redis.RedisError):
            self.connection.zrem(keys.search_slots(tenant), token)

    @contextlib.contextmanager
    def held(self, tenant: str) -> Iterator[None]:
        token = self.take(tenant)
        try:
            yield
        finally:
            self.give_back(tenant, token)


class ExpensiveReads:
    """At most `per_minute` expensive reads of one tenant a minute, counted a window at a time
    (READS_WINDOW_SECONDS: a sixth of the limit per 10 s)."""

    def __init__(
        self, connection: Redis, per_minute: int, window_seconds: int = READS_WINDOW_SECONDS
    ) -> None:
        self.connection = connection
        self.window_ms = window_seconds * 1000
        self.limit = max(1, per_minute * window_seconds // 60)
        self.per_minute = per_minute

    def charge(self, tenant: str, what: str) -> None:
        """Count one read before it is done; Throttled (429 too_many_reads) past the limit."""
        count, left = _COUNT(
            self.connection,
            keys={"counter": keys.expensive_reads(tenant)},
            args={"window_ms": self.window_ms, "amount": 1},
        )
        if int(count) > self.limit:
            raise Throttled(
                "too_many_reads",
                f"Too many expensive reads ({what}) for now: at most "
                f"{self.per_minute} a minute. Try again shortly.",
                retry_after=_seconds(left),
            )


class AuthFailures:
    """At most `per_minute` failed sign-ins or API keys from one client address a minute; past
    that, every attempt of that client is refused, a right key too, until the window ends, so
    that guessing cannot go on behind the refusals."""

    MESSAGE = "Too many failed sign-ins or API keys from your address; try again in a minute."

    def __init__(
        self, connection: Redis, per_minute: int, window_seconds: int = AUTH_WINDOW_SECONDS
    ) -> None:
        self.connection = connection
        self.limit = per_minute
        self.window_ms = window_seconds * 1000

    def check(self, client: str) -> None:
        """Throttled (429 too_many_failures) while `client` is past its failures."""
        key = keys.auth_failures(client)
        count = self.connection.get(key)  # one GET: what every keyed request pays
        if count is not None and int(count) >= self.limit:
            left = self.connection.pttl(key)
            raise Throttled("too_many_failures", self.MESSAGE, retry_after=_seconds(max(left, 1)))

    def failed(self, client: str) -> None:
        """One more failure of `client`."""
        _COUNT(
            self.connection,
            keys={"counter": keys.auth_failures(client)},
            args={"window_ms": self.window_ms, "amount": 1},
        )
