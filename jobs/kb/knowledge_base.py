"""This process's knowledge base: its Redis, its read replicas, its vector engine, and what
callers do with it, the same calls wherever it lives.

Where it lives: on the queue's Redis (the default), or on a Redis of its own (INTAKE_KB_URL).
Why apart at all: the index is most of what Redis holds and every search runs on a Redis core;
on a Redis of its own, a knowledge base that grows cannot fill the queue's memory, and searches
cannot slow the queue. Together is one Redis to run, and a document's flip lands in the very
MULTI of its task's `succeeded`; apart, that MULTI records the flip instead and the worker
applies it on the knowledge base's Redis right after (jobs.kb.pending_flips). Searches only
read, so they can also run on read replicas of the knowledge base's Redis
(INTAKE_KB_REPLICA_URLS): the search rate then grows with the replicas' cores.

Why one object decides: what differs between the two (what a MULTI on the queue's Redis may
WATCH or read of the knowledge base, where the chunk limits are checked, when a flip lands, what
a delete leaves) is decided here and nowhere else, so no caller asks where it lives
(tests/unit/test_rooms.py). Each layout keeps its round trips: together, nothing is added to a
task's commit or an upload's claim; apart, one read or write on the knowledge base's Redis goes
beside them.

Built once per process and queue client (`of`), like its Redis clients: a forked work-horse
inherits them, and redis-py gives a fork connections of its own; the vector engine's
connection is opened per use (`open_vectors`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis import Redis
from redis.client import Pipeline

from jobs.core import keys
from jobs.core.exceptions import LimitReached
from jobs.core.health import REPLICA_PROBE
from jobs.core.redis_client import COMMAND, PROBE, Profile, connect
from jobs.core.scripts import WatchedCheck
from jobs.core.settings import Settings
from jobs.kb import index, pending_flips

if TYPE_CHECKING:
    from jobs.kb.vectors import VectorStore

#: One client per address and profile in a process: its pool is what is shared (a fork's
#: client makes connections of its own, as redis-py does for the queue's).
_clients: dict[tuple[str, Profile], Redis] = {}

#: What the upload's claim is told for a document whose indexed task it reads itself
#: (jobs/tasks/lua/submit_claim.lua), and for a chunk limit it need not check.
READ_IT_THERE, NOT_CHECKED = "?", ""


@dataclass
class ChunkQuota:
    """How a commit holds its document to the chunk limits (jobs.kb.index.check_chunk_limit).

    Together, the read goes with the commit's WATCH (`watch`, `check`), so the limit holds until
    the EXEC. Apart, no WATCH spans two Redis servers: it was read on the knowledge base's Redis
    just before, and concurrent commits may pass a limit by the documents committed at that
    instant. `replaced`: the chunks of the indexed version the flip replaces, as read (0: none,
    so its flip leaves no garbage to collect)."""

    watch: list[str]
    check: WatchedCheck | None = None
    replaced: int = 0


@dataclass(frozen=True)
class ClaimReads:
    """What the upload's claim (jobs/tasks/lua/submit_claim.lua) is given of the knowledge
    base: the chunk limits it checks (NOT_CHECKED: checked here already) and, per document in
    the order asked, the task whose version is indexed ('' for none; READ_IT_THERE: the claim
    reads it on its own Redis)."""

    chunk_limit: int | str
    all_chunk_limit: int | str
    indexed: list[str]


class KnowledgeBase:
    """The knowledge base as one process reaches it: `redis` is the queue's own client unless
    it lives apart; `replicas` take searches in turn (jobs.kb.read_replicas). A process builds
    it with `of`; a test may hand it clients of its own."""

    def __init__(
        self,
        queue: Redis,
        settings: Settings,
        redis: Redis | None = None,
        replicas: Sequence[Redis] = (),
    ) -> None:
        self.queue = queue
        self.settings = settings
        self.redis = queue if redis is None else redis
        self.replicas = list(replicas)

    @classmethod
    def of(cls, settings: Settings, queue: Redis, profile: Profile = COMMAND) -> KnowledgeBase:
        """The process's one for these settings, this queue's client and this profile (the
        web's, a worker's): built at its first use, then the same object."""
        return _built(settings, queue, profile)

    @classmethod
    def on_queue(cls, queue: Redis) -> KnowledgeBase:
        """One on the queue's Redis with the default settings and no vector engine, for the
        callers that are handed none (a test, a one-off script)."""
        return cls(queue, Settings())

    @property
    def apart(self) -> bool:
        """True when it lives on a Redis of its own (GET /api/health's `kb.apart`)."""
        return self.redis is not self.queue

    def open_vectors(self) -> VectorStore | None:
        """A connection to the vector engine of dense embeddings, PostgreSQL with pgvector
        (jobs.kb.vectors), where an HTTP embedder makes them; None for the local embedder,
        which needs none. Opened per use and closed by the caller: a forked work-horse must
        not share its parent's database connection."""
        settings = self.settings
        if not (settings.embedding_url and settings.vector_database_url):
            return None
        from jobs.kb.vectors import VectorStore  # psycopg is loaded only where it is used

        return VectorStore(settings.vector_database_url)

    def keys_on_queue(self, *names: str) -> list[str]:
        """Those of `names` (the knowledge base's keys) that a WATCH or a script on the queue's
        Redis can read: all of them together, none apart."""
        return [] if self.apart else list(names)

    # -- a task's commit (jobs.worker.pipeline) ---------------------------------------------

    def chunk_quota(self, tenant: str, document_id: str, chunks: int) -> ChunkQuota:
        """The check of a document of `chunks` chunks against the chunk limits, for the commit
        that flips it (raises PermanentError `knowledge_base_full` when read here, apart)."""
        limits = (chunks, self.settings.tenant_chunk_limit, self.settings.kb_chunk_limit)
        if self.apart:
            held = index.check_chunk_limit(self.redis, tenant, document_id, *limits)
            return ChunkQuota(watch=[], replaced=held)
        quota = ChunkQuota(watch=index.quota_keys(tenant, document_id))

        def judge(reply: Any) -> None:
            quota.replaced = index.judge_chunk_limit(reply, *limits)

        quota.check = WatchedCheck(index.chunk_limit_read(tenant, document_id), judge)
        return quota

    def queue_flip(self, pipe: Pipeline, task_id: str, staged: index.StagedDocument) -> None:
        """Queue the document's flip on its task's commit (a MULTI on the queue's Redis):
        the flip itself together; apart, the record of it that `apply_after` applies."""
        if self.apart:
            pending_flips.queue_record(pipe, task_id, staged)
        else:
            index.queue_flip(pipe, staged)

    def apply_after(self, task_id: str, staged: index.StagedDocument) -> None:
        """Once the commit landed: apart, apply the flip it recorded (what raises here,
        housekeeping applies: `apply_left`); together it landed with the commit."""
        if self.apart:
            pending_flips.apply(self.redis, self.queue, task_id, staged)

    def apply_left(self) -> int:
        """Apply the recorded flips whose workers died before applying them (housekeeping);
        how many. None are recorded together."""
        return pending_flips.apply_left(self.redis, self.queue) if self.apart else 0

    # -- an upload's claim (jobs.tasks.submit) ----------------------------------------------

    def claim_reads(self, tenant: str, document_ids: list[str]) -> ClaimReads:
        """What the claim is given of the knowledge base for these documents. Together, the
        claim reads it all on its own Redis, in its own round trip: nothing is read here.
        Apart, it is read here in one round trip, and the batch is refused whole
        (LimitReached) when the tenant's or all tenants' chunks are at their limit."""
        if not self.apart:
            return ClaimReads(
                self.settings.tenant_chunk_limit,
                self.settings.kb_chunk_limit,
                [READ_IT_THERE] * len(document_ids),
            )
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(keys.tenant_chunks(tenant))
        pipe.get(keys.kb_total_chunks())
        for document_id in document_ids:
            pipe.hget(keys.kb_document(tenant, document_id), "task_id")
        held, total, *owners = pipe.execute()
        if int(held or 0) >= self.settings.tenant_chunk_limit:
            raise LimitReached("knowledge_base_full")
        if int(total or 0) >= self.settings.kb_chunk_limit:
            raise LimitReached("kb_total_full")
        return ClaimReads(
            NOT_CHECKED, NOT_CHECKED, [owner.decode() if owner else "" for owner in owners]
        )

    # -- a document's delete (jobs.tasks.lifecycle) -----------------------------------------

    def indexed_task(self, reader: Redis | Pipeline, tenant: str, document_id: str) -> Any:
        """The task whose version of the document is indexed (None: none), read on `reader`
        (the delete's pipeline, WATCHing on the queue's Redis) together, on the knowledge
        base's Redis apart (not WATCHed: `queue_removal` leaves a tombstone instead)."""
        return (self.redis if self.apart else reader).hget(
            keys.kb_document(tenant, document_id), "task_id"
        )

    def queue_removal(
        self, pipe: Pipeline, tenant: str, document_id: str, task_ids: list[str]
    ) -> Callable[[list[Any]], bool]:
        """Queue the document's removal on the delete's MULTI (queue's Redis); returns what
        tells, from that MULTI's replies, whether the document had chunks.

        Together, the removal is in the MULTI. Apart, the MULTI forgets the flips its tasks'
        commits recorded, and the removal follows it (when the returned call is made), leaving
        a tombstone that refuses any flip staged before it: a flip already on its way cannot
        bring the document back (jobs.kb.pending_flips)."""
        if self.apart:
            pending_flips.queue_forget(pipe, task_ids)
            return lambda replies: bool(
                index.removal(self.redis, tenant, document_id, tombstone=True)
            )
        at = len(pipe)
        index.queue_removal(pipe, tenant, document_id)
        return lambda replies: bool(replies[at])

    # -- health (jobs.intake) ---------------------------------------------------------------

    def probes(self) -> dict[str, Callable[[], object]]:
        """What health probes of it besides the queue's Redis, each on a client with short
        timeouts (PROBE): its own Redis when apart (together it answers as the queue's does),
        and its read replicas (REPLICA_PROBE, numbered from 1)."""
        found: dict[str, Callable[[], object]] = {}
        if self.apart:
            found["kb"] = _client(self.settings.kb_url, PROBE).ping
        for number, url in enumerate(self.settings.kb_replica_url_list, 1):
            found[REPLICA_PROBE.format(number)] = _client(url, PROBE).ping
        return found


@functools.lru_cache(maxsize=8)
def _built(settings: Settings, queue: Redis, profile: Profile) -> KnowledgeBase:
    """Few in a process (the web's, a worker's and its horses'); a test's come and go."""
    apart = settings.kb_url and settings.kb_url != settings.redis_url
    return KnowledgeBase(
        queue,
        settings,
        _client(settings.kb_url, profile) if apart else None,
        [_client(url, profile) for url in settings.kb_replica_url_list],
    )


def _client(url: str, profile: Profile) -> Redis:
    client = _clients.get((url, profile))
    if client is None:
        client = _clients[url, profile] = connect(url, profile)
    return client
