"""Intake: the web layer's one handle on the domain, built once per web process.

It holds what a process builds once (the Redis client, settings, queues, the batch JSON cache,
the knowledge base, the query embedder) and hands each call to the module that owns it;
outcomes other than success are the named exceptions of jobs.core.exceptions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import urlparse

from redis import Redis

from jobs.core import health, keys
from jobs.core.dependencies import Probes
from jobs.core.exceptions import NoChunks, NoSuchDocument, NoSuchTask, NotNow
from jobs.core.queues import Queues
from jobs.core.redis_client import WEB
from jobs.core.settings import REINDEX_PRIORITY, Settings
from jobs.core.throttle import AuthFailures, ExpensiveReads, SearchSlots
from jobs.embedding.budget import EmbeddingBudget
from jobs.embedding.embedders import make_embedder
from jobs.kb import index
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.kb.search import SearchAnswer, Searcher
from jobs.kb.versions import pipeline_version
from jobs.tasks import dead_letters, library, lifecycle, originals, states
from jobs.tasks import records as tasks
from jobs.tasks import reindex as reindexing
from jobs.tasks.batches import BatchReader
from jobs.tasks.submit import Upload, submit_documents
from jobs.webhooks import deliveries


class Intake:
    """Submit documents, act on tasks and read their state, scoped by tenant."""

    def __init__(self, connection: Redis, settings: Settings) -> None:
        self.connection = connection
        self.settings = settings
        #: The knowledge base: on `connection` itself unless INTAKE_KB_URL names another Redis.
        self.kb = KnowledgeBase.of(settings, connection, WEB)
        self.queues = Queues(connection)  # every tenant's, made as they are first used
        self.batches = BatchReader(connection)
        # The query embedder: the workers' model, with a search's short timeout.
        embedder = make_embedder(settings, timeout=settings.search_embedding_timeout)
        self.pipeline_version = pipeline_version(settings, embedder)  # once: a submit's key
        budget = EmbeddingBudget.from_settings(
            connection, settings, timeout=settings.search_embedding_timeout
        )
        self.searcher = Searcher(
            self.kb.redis,
            embedder,
            breaker_seconds=settings.search_breaker_seconds,
            vectors=self.kb.open_vectors(),
            budget=budget,
            replicas=self.kb.replicas,
        )
        # Limits every web process shares, on the queue's Redis (jobs.core.throttle).
        self.search_slots = SearchSlots(connection, settings.tenant_searches)
        self.expensive_reads = ExpensiveReads(connection, settings.tenant_expensive_reads)
        self.auth_failures = AuthFailures(connection, settings.client_auth_failures)
        self.probes = Probes(self._dependency_probes())

    def _dependency_probes(self) -> dict[str, Callable[[], object]]:
        """What health probes besides the queue's Redis, each on a client of its own with
        short timeouts (jobs.core.dependencies): the store of originals (made on first use, as
        an upload would), the knowledge base's (KnowledgeBase.probes)."""
        settings = self.settings
        # The store's client is made now, not by the first upload or poll: boto3's import and
        # first client take half a second, which a poll would report as a store that hangs.
        originals.store(settings)
        return {"store": lambda: originals.store(settings).probe(), **self.kb.probes()}

    def submit(
        self,
        tenant: str,
        uploads: list[Upload],
        *,
        priority: str | None = None,
        force: bool = False,
        trace_id: str | None = None,
    ) -> dict[str, Any]:
        """Raises LimitReached when the batch is refused whole."""
        return submit_documents(
            self.connection,
            self.queues,
            self.settings,
            tenant,
            uploads,
            pipeline_version=self.pipeline_version,
            priority=priority,
            force=force,
            trace_id=trace_id,
            kb=self.kb,
        )

    def reindex(
        self,
        tenant: str,
        document_ids: list[str] | None,
        *,
        force: bool = False,
        priority: str | None = None,
        trace_id: str | None = None,
    ) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
        """Run documents again from their stored originals (all of the tenant's when
        `document_ids` is None, but those whose last run failed unless `force`) on the `bulk`
        queue unless told otherwise: (the batch, or None when no document was chosen; the ids
        refused or left out). Raises LimitReached like an upload, and before reading the whole
        library when all of it would not fit (jobs.tasks.reindex)."""
        chosen = (
            reindexing.choose_all(self.connection, self.kb, self.settings, tenant, force=force)
            if document_ids is None
            else reindexing.choose(
                self.connection, self.kb, self.settings, tenant, document_ids, force=force
            )
        )
        if not chosen.uploads:
            return None, chosen.rejected
        # Never a forced claim: `force` made each upload a re-run, which answers a live task.
        return self.submit(
            tenant, chosen.uploads, priority=priority or REINDEX_PRIORITY, trace_id=trace_id
        ), chosen.rejected

    def get_task(self, tenant: str, task_id: str) -> dict[str, Any]:
        """One HGETALL. Another tenant's task, like an unknown one, raises NoSuchTask."""
        record = tasks.load(self.connection, task_id) if tasks.is_id(task_id) else None
        if record is None or record.tenant != tenant:
            raise NoSuchTask()
        return tasks.view(record)

    def chunks(
        self, tenant: str, task_id: str, *, offset: int = 0, limit: int = 20
    ) -> dict[str, Any]:
        """`{"total", "chunks"}` of a succeeded task's indexed chunks, from `offset`. Raises
        NoSuchTask, or NoChunks unless the task succeeded and its version is the indexed one."""
        task = self.get_task(tenant, task_id)
        found = None
        if task["status"] == states.SUCCEEDED:
            found = index.document_chunks(
                self.kb.redis, tenant, task["document_id"], task_id, offset, limit
            )
        if found is None:
            raise NoChunks(task["status"])
        total, chunks = found
        return {"total": total, "chunks": chunks}

    def cancel(self, tenant: str, task_id: str) -> str:
        """The status it had. Raises NoSuchTask or NotNow."""
        if not tasks.is_id(task_id):
            raise NoSuchTask()
        return lifecycle.cancel_task(self.connection, self.settings, tenant, task_id)

    def retry(self, tenant: str, task_id: str) -> str:
        """The status it had. Raises NoSuchTask, NotNow, NotRetryable or UploadExpired."""
        if not tasks.is_id(task_id):
            raise NoSuchTask()
        return lifecycle.retry_task(self.connection, self.queues, self.settings, tenant, task_id)

    def retry_failed(self, tenant: str, task_ids: list[str]) -> dict[str, int]:
        """Retry the failed tasks among `task_ids`; failed ones that cannot be retried (a bad
        file, an expired upload) are skipped; tasks in other states are left alone."""
        counts = {"retried": 0, "skipped": 0}
        for record in tasks.load_many(self.connection, task_ids):
            if record is None or record.status != states.FAILED:
                continue
            try:
                self.retry(tenant, record.id)
                counts["retried"] += 1
            except (NoSuchTask, NotNow):
                counts["skipped"] += 1
        return counts

    def cancel_many(self, tenant: str, task_ids: list[str]) -> dict[str, int]:
        canceled = 0
        for task_id in task_ids:
            try:
                self.cancel(tenant, task_id)
                canceled += 1
            except (NoSuchTask, NotNow):
                pass
        return {"canceled": canceled}

    def delete_document(self, tenant: str, document_id: str, *, version: str | None = None) -> bool:
        """True when removed. With `version` (a task id), only while that task is still the
        document's current version; False, removing nothing, when another one is. Raises
        NoSuchDocument when there was nothing of it."""
        return lifecycle.delete_document(
            self.connection, self.settings, tenant, document_id, version=version, kb=self.kb
        )

    def original(self, tenant: str, document_id: str) -> originals.Original:
        """The original of a document's current version (lifecycle.current_version), open for
        reading; when that one's is not stored (lost with its store, or dropped after the
        upload retention), the newest version whose original is. Raises NoSuchDocument, for
        another tenant's document too."""
        latest = self.connection.get(keys.document_latest(tenant, document_id))
        indexed = (
            None
            if latest is not None
            else self.kb.redis.hget(keys.kb_document(tenant, document_id), "task_id")
        )
        current = lifecycle.current_version(latest, indexed)
        try:
            return originals.of_task(self.connection, self.settings, tenant, current, document_id)
        except NoSuchDocument:
            if current is None:
                raise
        for task_id in library.older_versions(
            self.connection, self.kb, tenant, document_id, current
        ):
            with contextlib.suppress(NoSuchDocument):
                return originals.of_task(
                    self.connection, self.settings, tenant, task_id, document_id
                )
        raise NoSuchDocument()

    def documents(
        self,
        tenant: str,
        *,
        offset: int = 0,
        limit: int = 50,
        query: str | None = None,
        status: str | None = None,
    ) -> dict[str, Any]:
        """The tenant's documents, newest first, each as its latest task left it; `query`
        filters by id or file name, `status` by the latest task's (ValueError for one not in
        STATUSES)."""
        return library.page(
            self.connection,
            self.kb,
            tenant,
            offset=offset,
            limit=limit,
            query=query,
            status=status,
        )

    def document(self, tenant: str, document_id: str) -> dict[str, Any]:
        """One document and its tasks, newest first. Another tenant's, like an unknown one,
        raises NoSuchDocument."""
        return library.document(self.connection, self.kb, tenant, document_id)

    def list_failed(
        self, tenant: str | None, *, offset: int = 0, limit: int = 50
    ) -> dict[str, Any]:
        return dead_letters.page(self.connection, tenant, offset=offset, limit=limit)

    def webhook_deliveries(
        self, tenant: str, *, offset: int = 0, limit: int = 50
    ) -> dict[str, Any]:
        """The tenant's recent webhook events and how their delivery went, newest first."""
        return {
            **deliveries.page(self.connection, tenant, offset=offset, limit=limit),
            "enabled": bool(self.settings.webhook_url),
        }

    def search(self, tenant: str, query: str, k: int = 10, mode: str | None = None) -> SearchAnswer:
        """`mode`: one of SEARCH_MODES, or None for the service's default (jobs.kb.search).
        Each hit carries its document's `original_url`. Raises Throttled while the tenant has
        INTAKE_TENANT_SEARCHES searches running, SearchTimedOut when a read replica did not
        answer in time."""
        with self.search_slots.held(tenant):
            answer = self.searcher.search(tenant, query, k, mode)
        return replace(answer, results=library.with_original_urls(answer.results))

    def worker_count(self) -> int:
        """How many ingestion workers are registered on this Redis (alive within their TTL);
        webhook workers are not counted."""
        return health.ingestion_workers(self.connection)

    def health(self, per_tenant: bool = True) -> dict[str, Any]:
        """Redis, workers, queues, scheduler, and each dependency (its probe runs while the
        queue's Redis is read); without `per_tenant`, no queue names a tenant
        (jobs.core.health.without_tenants): what an unauthenticated poll may read."""
        checking = self.probes.begin()
        full = health.with_dependencies(
            health.report(self.connection),
            checking.results(),
            apart=self.kb.apart,
            replicas=len(self.kb.replicas),
            store_kind=urlparse(self.settings.storage_address).scheme,
        )
        return full if per_tenant else health.without_tenants(full)
