"""Where the knowledge base lives: on the queue's Redis (the default), or on a Redis of its
own (INTAKE_KB_URL).

Why apart at all: the index is most of what Redis holds and every search runs on a Redis core;
on a Redis of its own, a knowledge base that grows cannot fill the queue's memory, and searches
cannot slow the queue. Together is one Redis to run, and a document's flip lands in the very
MULTI of its task's `succeeded`; apart, that MULTI records the flip instead and the worker
applies it on the knowledge base's Redis right after (jobs.kb.pending_flips).

Searches only read, so they can also run on read replicas of the knowledge base's Redis
(INTAKE_KB_REPLICA_URLS, `kb_replicas`): the search rate then grows with the replicas' cores.
"""

from __future__ import annotations

from redis import Redis

from jobs.core.redis_client import COMMAND, Profile, connect
from jobs.core.settings import Settings

#: One client per address and profile in a process: its pool is what is shared (a fork's
#: client makes connections of its own, as redis-py does for the queue's).
_clients: dict[tuple[str, Profile], Redis] = {}


def kb_connection(settings: Settings, queue: Redis, profile: Profile = COMMAND) -> Redis:
    """The knowledge base's Redis: `queue` itself unless INTAKE_KB_URL names another."""
    if not settings.kb_url or settings.kb_url == settings.redis_url:
        return queue
    return _client(settings.kb_url, profile)


def kb_replicas(settings: Settings, profile: Profile = COMMAND) -> list[Redis]:
    """Clients of the knowledge base's read replicas (INTAKE_KB_REPLICA_URLS); none unset."""
    return [_client(url, profile) for url in settings.kb_replica_url_list]


def _client(url: str, profile: Profile) -> Redis:
    client = _clients.get((url, profile))
    if client is None:
        client = _clients[url, profile] = connect(url, profile)
    return client


def apart(kb: Redis, queue: Redis) -> bool:
    """True when the knowledge base is not on the queue's Redis: no MULTI spans both."""
    return kb is not queue
