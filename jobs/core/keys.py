"""Every Redis key Intake owns, named in one place: code asks for a key here, never spells one.

Lua scripts get their keys (or, for keys they derive from ids, a prefix from here) as arguments.

Tenant names are validated where tenants are configured; ids are hex. A document's id is
free text, so its keys use a digest of it instead.
"""

from __future__ import annotations

import hashlib

PREFIX = "intake:"
TASK_PREFIX = PREFIX + "task:"


def task(task_id: str) -> str:
    return TASK_PREFIX + task_id


def blob(task_id: str) -> str:
    """An upload an older release kept in Redis; moved to the store when read."""
    return f"{PREFIX}blob:{task_id}"


def batch(batch_id: str) -> str:
    return f"{PREFIX}batch:{batch_id}"


def batch_tasks(batch_id: str) -> str:
    return f"{PREFIX}batch:{batch_id}:tasks"


def tenant_batches(tenant: str) -> str:
    return f"{PREFIX}tenant:{tenant}:batches"


def tenant_failed(tenant: str) -> str:
    return f"{PREFIX}tenant:{tenant}:failed"


def idempotency(digest: str) -> str:
    return f"{PREFIX}idem:{digest}"


def document_digest(document_id: str) -> str:
    return hashlib.sha256(document_id.encode("utf-8")).hexdigest()[:32]


def kb_document(tenant: str, document_id: str) -> str:
    return kb_document_at(tenant, document_digest(document_id))


def kb_document_at(tenant: str, digest: str) -> str:
    """kb_document by the document's digest, for who knows only that (jobs.tasks.originals)."""
    return f"{PREFIX}kb:{tenant}:doc:{digest}"


def kb_documents(tenant: str) -> str:
    return f"{PREFIX}kb:{tenant}:docs"


def kb_generation(tenant: str) -> str:
    return f"{PREFIX}kb:{tenant}:gen"


def kb_pattern() -> str:
    """A SCAN pattern for every key of every tenant's knowledge base (is there one here?)."""
    return f"{PREFIX}kb:*"


def kb_prefix(tenant: str) -> str:
    """The start of every key of a tenant's knowledge base. The search scripts derive from it
    the keys named by what other keys hold: a term's ``i:<bucket>:<level>`` postings (the levels
    its ``m:<bucket>`` hash lists) and a hit's ``doc:<digest>`` (its text record's digest)."""
    return f"{PREFIX}kb:{tenant}:"


def kb_postings(tenant: str, bucket_name: str, level: int) -> str:
    """Chunk ids (4 bytes each) whose BM25 tf part for one term bucket is at one impact level."""
    return f"{kb_prefix(tenant)}i:{bucket_name}:{level}"


def kb_levels(tenant: str, bucket_name: str) -> str:
    """The bucket's impact levels (a hash: level → "largest tf:shortest chunk" of its postings,
    what bounds their scores)."""
    return f"{kb_prefix(tenant)}m:{bucket_name}"


def kb_rows(tenant: str) -> str:
    """chunk id → the chunk's length and its terms' counts (jobs.kb.postings), to score it."""
    return f"{kb_prefix(tenant)}tf"


def kb_term_chunks(tenant: str) -> str:
    """bucket name → in how many of the tenant's indexed chunks the term occurs (its document
    frequency, for BM25's idf)."""
    return f"{kb_prefix(tenant)}df"


def kb_lexical_stats(tenant: str) -> str:
    """`chunks` and `length` (the terms of all indexed chunks: BM25's N and average length),
    and `reference`, the length the impact levels were computed for."""
    return f"{kb_prefix(tenant)}stats"


def kb_cosine_keys(tenant: str) -> list[str]:
    """Patterns of the lexical index before BM25 (cosine weights: ``rows``, ``p:…``, ``l:…``),
    deleted once the tenant's documents are indexed again (jobs.upgrades.kb_layout)."""
    return [f"{kb_prefix(tenant)}rows", f"{kb_prefix(tenant)}p:*", f"{kb_prefix(tenant)}l:*"]


def kb_texts(tenant: str) -> str:
    """chunk id → JSON [document digest, chunk number, text, location]."""
    return f"{kb_prefix(tenant)}texts"


def kb_live(tenant: str) -> str:
    """A bitmap of chunk ids: set while the chunk belongs to a document's indexed version."""
    return f"{kb_prefix(tenant)}live"


def kb_next_chunk(tenant: str) -> str:
    """The next free chunk id: ids are reserved in runs of 8 and never reused."""
    return f"{kb_prefix(tenant)}next"


def kb_staged(tenant: str) -> str:
    """Runs of chunk ids written ahead of their flip ("first:stop" → when), for a crash."""
    return f"{kb_prefix(tenant)}staged"


def kb_garbage(tenant: str) -> str:
    """Runs of chunk ids no longer live ("first:stop"), whose rows and texts are to be deleted."""
    return f"{kb_prefix(tenant)}garbage"


def kb_lexical_migrated() -> str:
    """Set once every tenant's documents are indexed for BM25 and the cosine index is gone."""
    return f"{PREFIX}kb:lexical-migrated"


def kb_layout_migrated() -> str:
    """Set once no document of any tenant is left in the layout before chunk ids."""
    return f"{PREFIX}kb:layout-migrated"


def kb_collector(tenant: str) -> str:
    """The lock of the one process collecting the tenant's garbage (jobs.kb.index)."""
    return f"{kb_prefix(tenant)}collector"


def kb_dead(tenant: str) -> str:
    """posting key → how many of its chunk ids are dead: compacted once they are a quarter."""
    return f"{kb_prefix(tenant)}dead"


def pending_flips() -> str:
    """task id → the flip that makes its document searchable, written with the task's
    `succeeded` when the knowledge base lives on another Redis than the queue (on the queue's;
    jobs.kb.pending_flips applies and removes it)."""
    return f"{PREFIX}pending-flips"


def failed_all() -> str:
    """Every tenant's dead letters, for operators."""
    return f"{PREFIX}failed"


def active() -> str:
    """Tasks that are pending, running or retrying: what the reconciler watches."""
    return f"{PREFIX}active"


def canceling() -> str:
    """Ids of running jobs sent RQ's stop command by a cancel: their stopped job must leave the
    failed registry (a cancel is not a dead letter)."""
    return f"{PREFIX}canceling"


def checkpoint(task_id: str) -> str:
    return f"{PREFIX}checkpoint:{task_id}"


def page_ranges(task_id: str) -> str:
    """A scan's page ranges: their plan, claims and replies (jobs.worker.page_ranges)."""
    return f"{PREFIX}ranges:{task_id}"


def page_range_readers(task_id: str) -> str:
    """The RQ jobs reading a scan's ranges now, job id → range: what a cancel stops."""
    return f"{PREFIX}ranges:{task_id}:readers"


def page_ranges_done(task_id: str) -> str:
    """A list each saved range is pushed onto: a reader waiting for the last ranges wakes."""
    return f"{PREFIX}ranges:{task_id}:done"


def originals_sweep() -> str:
    """Held for an hour by the housekeeping that last swept the originals (jobs.tasks.originals)."""
    return f"{PREFIX}originals:sweep"


def reconcile_lock() -> str:
    return f"{PREFIX}reconcile-lock"


def housekeeping_lock() -> str:
    return f"{PREFIX}housekeeping-lock"


def tenant_active(tenant: str) -> str:
    return f"{PREFIX}tenant:{tenant}:active"


def blob_bytes() -> str:
    """Bytes of uploads waiting to be read, all tenants: checked against the shared budget."""
    return f"{PREFIX}blob-bytes"


def legacy_blob_sizes() -> str:
    """The all-tenant task id → size hash of releases before per-tenant budgets (migrated)."""
    return f"{PREFIX}blob-sizes"


def tenant_blob_bytes(tenant: str) -> str:
    """Bytes of one tenant's uploads waiting to be read: checked against its own share."""
    return f"{PREFIX}tenant:{tenant}:blob-bytes"


def tenant_blob_sizes(tenant: str) -> str:
    """task id → size of each upload of a tenant waiting to be read, so a release is counted
    once and a recount finds the tasks that ended without one."""
    return f"{PREFIX}tenant:{tenant}:blob-sizes"


def tenant_stored_sizes(tenant: str) -> str:
    """Hash: task id → bytes of its original in the store (jobs.tasks.stored_bytes)."""
    return f"{PREFIX}tenant:{tenant}:stored-sizes"


def tenant_stored_bytes(tenant: str) -> str:
    """What the tenant's originals take in the store, the sum of its stored sizes."""
    return f"{PREFIX}tenant:{tenant}:stored-bytes"


def tenant_chunks(tenant: str) -> str:
    """How many chunks a tenant's knowledge base holds: checked against its chunk limit."""
    return f"{PREFIX}kb:{tenant}:chunks"


def kb_total_chunks() -> str:
    """How many chunks the knowledge base holds, all tenants together: checked against
    INTAKE_KB_CHUNK_LIMIT, so that no number of tenants can fill Redis. Moved by the same
    scripts as each tenant's count; absent until `jobs.kb.index.ensure_chunk_counts` counted it."""
    return f"{PREFIX}kb:all-chunks"


def metrics() -> str:
    return f"{PREFIX}metrics"


def step_metrics() -> str:
    return f"{PREFIX}metrics:steps"


def document_latest(tenant: str, document_id: str) -> str:
    """The task of a document's latest submitted content: what the document is to become."""
    return f"{PREFIX}tenant:{tenant}:document:{document_digest(document_id)}:latest"


def document_tasks(tenant: str, document_id: str) -> str:
    """Every task ever created for one document of a tenant, so it can be removed whole."""
    return f"{PREFIX}tenant:{tenant}:document:{document_digest(document_id)}:tasks"


def all_document_latest() -> str:
    """The pattern of every tenant's `document_latest` keys: what the one-shot backfill of
    `tenant_documents` scans (jobs.tasks.library)."""
    return f"{PREFIX}tenant:*:document:*:latest"


def tenant_documents(tenant: str) -> str:
    """A tenant's documents (a sorted set: document id → when new content of it was last
    submitted, seconds): the document library's order and count (jobs.tasks.library)."""
    return f"{PREFIX}tenant:{tenant}:documents"


def tenant_documents_filled() -> str:
    """Set once the one-shot backfill has put every document that existed before
    `tenant_documents` into it (jobs.upgrades.library_backfill)."""
    return f"{PREFIX}documents-backfilled"


def web_session(session_id: str) -> str:
    """A signed-in page session: it lives while this key does, and signing out deletes it."""
    return f"{PREFIX}session:{session_id}"


def search_breaker() -> str:
    """Set while search does not call the embedding service (it failed a query): its TTL."""
    return f"{PREFIX}search:breaker"


def search_slots(tenant: str) -> str:
    """The tenant's searches running now (a sorted set of tokens by when their lease ends, ms
    of Redis time): INTAKE_TENANT_SEARCHES."""
    return f"{PREFIX}limits:searches:{tenant}"


def expensive_reads(tenant: str) -> str:
    """The tenant's expensive reads in the current window (a counter expiring with it)."""
    return f"{PREFIX}limits:reads:{tenant}"


def auth_failures(client: str) -> str:
    """Failed sign-ins and API keys of one client address in the current window."""
    return f"{PREFIX}limits:auth:{client}"


def embedding_window() -> str:
    """The embedding requests of the last minute (a sorted set of tokens by Redis time, ms)."""
    return f"{PREFIX}embedding:window"


def embedding_holders() -> str:
    """Embedding requests in flight (a sorted set of tokens by when their lease ends, ms)."""
    return f"{PREFIX}embedding:holders"


def embedding_pause() -> str:
    """Set while no embedding request may go (a Retry-After): its TTL; its value, who asked."""
    return f"{PREFIX}embedding:pause"


def embedding_batch_limit() -> str:
    """The most texts the embedding service took in one request after refusing more."""
    return f"{PREFIX}embedding:batch-limit"


def changes_channel() -> str:
    """The pub/sub channel on which every change of a task's visible state is announced."""
    return f"{PREFIX}changes"


def folder_sync(tenant: str, source: str) -> str:
    """The set of document ids alone that `ingest --sync` of one source recorded in releases
    that did not keep versions: read and emptied, never added to; each id moves to
    `folder_sync_versions` or leaves the record."""
    return f"{PREFIX}tenant:{tenant}:folder-sync:{document_digest(source)}"


def folder_sync_versions(tenant: str, source: str) -> str:
    """document id → the task whose version `ingest --sync` of one source (a folder) brought
    into a tenant's knowledge base, so the next sync removes a document whose file is gone only
    while that version is still the document's."""
    return f"{PREFIX}tenant:{tenant}:folder-sync:{document_digest(source)}:versions"


def task_batches(task_id: str) -> str:
    """The batches that list a task and wait for it to finish (jobs.tasks.webhook_events): its own,
    and a later one that reused it as a duplicate while it was live."""
    return f"{TASK_PREFIX}{task_id}:batches"


def batch_live(batch_id: str) -> str:
    """A batch's tasks not yet finished (jobs.tasks.webhook_events): empty, the batch is
    complete."""
    return f"{PREFIX}batch:{batch_id}:live"


def webhook_event(event_id: str) -> str:
    """One webhook event: what it says and how its delivery went."""
    return f"{PREFIX}webhook:{event_id}"


def tenant_webhooks(tenant: str) -> str:
    """A tenant's recent webhook events (id → when), newest last."""
    return f"{PREFIX}tenant:{tenant}:webhooks"


def queue_tenants() -> str:
    """Tenants whose RQ queues workers listen to besides the static three (jobs.core.queues)."""
    return f"{PREFIX}queue-tenants"
