"""Where the knowledge base lives, for the callers not yet handed a KnowledgeBase
(jobs.kb.knowledge_base, which owns the clients and the decision)."""

from __future__ import annotations

from redis import Redis

from jobs.core.redis_client import COMMAND, Profile
from jobs.core.settings import Settings
from jobs.kb.knowledge_base import KnowledgeBase, _client


def kb_connection(settings: Settings, queue: Redis, profile: Profile = COMMAND) -> Redis:
    """The knowledge base's Redis: `queue` itself unless INTAKE_KB_URL names another."""
    return KnowledgeBase.of(settings, queue, profile).redis


def kb_replicas(settings: Settings, profile: Profile = COMMAND) -> list[Redis]:
    """Clients of the knowledge base's read replicas (INTAKE_KB_REPLICA_URLS); none unset."""
    return [_client(url, profile) for url in settings.kb_replica_url_list]


def apart(kb: Redis, queue: Redis) -> bool:
    """True when the knowledge base is not on the queue's Redis: no MULTI spans both."""
    return kb is not queue
