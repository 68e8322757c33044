"""Settings shared by the web process and the workers, read from the environment
(docs/architecture.md §19).

Workers never build the Flask app, so the pipeline reads its settings here; the web's Config
builds on the same parser so both sides agree on every limit and on the pipeline version.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from jobs.core.addresses import SENTINEL_SCHEME, sentinel_url

MIB = 1024 * 1024
#: Where originals are kept when INTAKE_STORAGE_URL is unset: one machine's directory.
DEFAULT_STORAGE_DIR = Path(__file__).resolve().parents[2] / "instance" / "originals"
#: What the OCR models in the wheel read (jobs.text.ocr); INTAKE_OCR_LANGUAGES picks among them.
OCR_LANGUAGES: tuple[str, ...] = ("en", "zh")

#: Each priority an upload may ask for and its queue (a tenant's: jobs.core.queues), most urgent
#: first: the one place their names are spelled (the API, its OpenAPI and the CLI read them here).
PRIORITY_QUEUES: dict[str, str] = {"high": "intake-high", "normal": "intake", "bulk": "intake-bulk"}
PRIORITIES: tuple[str, ...] = tuple(PRIORITY_QUEUES)
QUEUE_NAMES: tuple[str, ...] = tuple(PRIORITY_QUEUES.values())
#: An upload's priority unless asked (a page's click too); a re-index's, which never holds up
#: uploads.
NORMAL_PRIORITY, REINDEX_PRIORITY = "normal", "bulk"


@dataclass(frozen=True)
class Settings:
    """Every tunable of Intake with its default; names map to INTAKE_* environment variables."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    # With Sentinels (REDIS_SENTINELS `host:port,…`), `redis_url` becomes the Sentinel address
    # of REDIS_SENTINEL_MASTER (jobs.core.redis_client): every process follows a failover.
    redis_sentinels: str = ""
    redis_sentinel_master: str = "mymaster"
    embedding_url: str = ""
    # PostgreSQL with pgvector for the HTTP embedder's dense vectors (jobs.kb.vectors); unset, `make
    # run` starts one (runner.postgres_service). The local embedder never uses it.
    vector_database_url: str = ""
    embedding_model: str = ""
    embedding_api_key: str = ""
    embedding_timeout: float = 30.0
    search_embedding_timeout: float = 2.0
    search_breaker_seconds: int = 30
    max_attempts: int = 4
    retry_base_seconds: int = 1
    job_timeout: int = 600
    max_file_bytes: int = 512 * MIB
    max_request_bytes: int = 1024 * MIB
    max_files_per_request: int = 500
    queue_limit: int = 10000
    tenant_queue_limit: int = 5000
    # What one tenant's originals may take in the store (jobs.tasks.stored_bytes): an upload
    # past it answers 429 storage_quota.
    tenant_stored_bytes: int = 10 * 1024 * MIB
    # Where originals are kept (jobs.core.object_store): file:///absolute/path or
    # s3://bucket/prefix; empty, the directory instance/originals beside the code, which only
    # serves a fleet on one machine (docs/deploying.md, "Originals").
    storage_url: str = ""
    # What uploads waiting to be read may take in the store, in all and per tenant (the
    # backlog's bytes, given back as each task ends: jobs.tasks.upload_budgets).
    blob_budget_bytes: int = 2048 * MIB
    tenant_blob_budget_bytes: int = 512 * MIB
    tenant_chunk_limit: int = 2_000_000
    # The knowledge base as a whole, all tenants together (keys.kb_total_chunks): what keeps
    # many tenants from filling Redis. At ~1.5–2 KB of Redis per chunk, 6 M chunks ≈ 9–12 GB;
    # size it below Redis `maxmemory` (docs/deploying.md, "The knowledge base").
    kb_chunk_limit: int = 6_000_000
    # Where the knowledge base lives: another Redis than the queue's, or (empty) the queue's
    # own (jobs.kb.knowledge_base; docs/deploying.md, "The knowledge base on a Redis of its own").
    kb_url: str = ""
    # Read replicas of the knowledge base's Redis (`redis://…,redis://…`): searches take turns
    # on them, and on the primary when one does not answer (jobs.kb.read_replicas).
    kb_replica_urls: str = ""
    retention_days: int = 30
    upload_retention_hours: int = 24
    chunk_size: int = 1000
    chunk_overlap: int = 150
    parse_timeout: float = 120.0
    parse_memory_mb: int = 1024
    parse_max_chars: int = 32 * MIB
    ocr: str = "auto"
    ocr_languages: str = "en,zh"
    ocr_max_pages: int = 200
    ocr_page_timeout: float = 60.0
    # Webhooks (jobs.tasks.webhook_events, jobs.webhooks.delivery): unset URL, nothing is recorded
    # or sent.
    webhook_url: str = ""
    webhook_secret: str = ""
    webhook_timeout: float = 10.0
    webhook_retry_base_seconds: int = 10
    # The embedding API's budget, shared by every worker and the search (jobs.embedding.budget):
    # requests per minute and requests in flight, 0 = unlimited; texts per request.
    embedding_rpm: int = 0
    embedding_concurrency: int = 0
    embedding_batch_size: int = 64
    # How long an upload waits for a replica to confirm its records (WAIT, jobs.core.replicas), when
    # the primary has one attached; then 503 not_replicated. Below the web's 2 s read timeout
    # (jobs.core.redis_client.WEB), or the wait would look like a stalled Redis.
    replica_wait_ms: int = 500

    # ---- Per-tenant and per-client limits held in Redis (jobs.core.throttle; docs/deploying.md,
    # "Limits and backpressure"). Many web processes share them, so none is kept in memory.
    # Searches one tenant may have running at once, all web processes together: one more is 429.
    tenant_searches: int = 4
    # Expensive reads per tenant per minute (a batch of more than 250 tasks read or its event
    # stream opened, the library filtered by name or status), counted over 10 s windows: 1200
    # lets 20 open pages poll a large batch every second.
    tenant_expensive_reads: int = 1200
    # Failed sign-ins and failed API keys per client address per minute; then 429 for a minute.
    client_auth_failures: int = 10
    # ---- end of the limits

    @property
    def queue_reserve(self) -> int:
        """The last tenth of `queue_limit`, kept for tenants whose backlog (this upload
        included) is within it: two tenants at their own limits cannot keep everyone else out
        (jobs.tasks.submit)."""
        return self.queue_limit // 10

    @property
    def retention_seconds(self) -> int:
        return self.retention_days * 86400

    @property
    def upload_retention_seconds(self) -> int:
        """How long the checkpoints of a failed (retryable) or canceled task are kept, so that
        a Retry resumes where it stopped (its original stays until its document is deleted)."""
        return self.upload_retention_hours * 3600

    @property
    def storage_address(self) -> str:
        """INTAKE_STORAGE_URL, or the directory instance/originals beside the code."""
        return self.storage_url or DEFAULT_STORAGE_DIR.as_uri()

    @property
    def kb_replica_url_list(self) -> tuple[str, ...]:
        return tuple(url.strip() for url in self.kb_replica_urls.split(",") if url.strip())

    @property
    def ocr_language_list(self) -> tuple[str, ...]:
        return tuple(code.strip().lower() for code in self.ocr_languages.split(",") if code.strip())

    @classmethod
    def from_mapping(cls, env: Mapping[str, Any]) -> Settings:
        """Parse `REDIS_URL` and `INTAKE_*` keys; a bad value raises ValueError naming the
        variable."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            name = f.name.upper() if f.name.startswith("redis_") else "INTAKE_" + f.name.upper()
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            kind: type[Any] = type(f.default)  # every field has a plain default, no factory
            try:
                values[f.name] = kind(raw) if kind is not int else int(str(raw).strip())
            except (TypeError, ValueError):
                raise ValueError(f"{name}={raw!r} is not a valid {kind.__name__}") from None
        if values.get("redis_sentinels"):
            values["redis_url"] = sentinel_url(
                values["redis_sentinels"], values.get("redis_sentinel_master", "mymaster")
            )
        settings = cls(**values)
        settings.validate()
        return settings

    @classmethod
    def from_env(cls) -> Settings:
        return cls.from_mapping(os.environ)

    def validate(self) -> None:
        if self.search_embedding_timeout <= 0 or self.search_breaker_seconds < 1:
            raise ValueError(
                "INTAKE_SEARCH_EMBEDDING_TIMEOUT must be > 0 and INTAKE_SEARCH_BREAKER_SECONDS ≥ 1"
            )
        if self.vector_database_url and not self.vector_database_url.startswith(
            ("postgresql://", "postgres://")
        ):
            raise ValueError("INTAKE_VECTOR_DATABASE_URL must be a postgresql:// URL")
        if self.kb_url and not self.kb_url.startswith(
            ("redis://", "rediss://", "unix://", SENTINEL_SCHEME + "://")
        ):
            raise ValueError(
                f"INTAKE_KB_URL must be a redis://, rediss://, unix:// or {SENTINEL_SCHEME}:// URL"
            )
        if any(
            not url.startswith(("redis://", "rediss://", "unix://"))
            for url in self.kb_replica_url_list
        ):
            raise ValueError(
                "INTAKE_KB_REPLICA_URLS must be redis://, rediss:// or unix:// URLs, "
                "separated by commas"
            )
        if self.storage_url and not self.storage_url.startswith(("file:///", "s3://")):
            raise ValueError(
                "INTAKE_STORAGE_URL must be file:///absolute/path or s3://bucket/prefix"
            )
        if self.tenant_stored_bytes < 1:
            raise ValueError("INTAKE_TENANT_STORED_BYTES must be at least 1 (bytes)")
        if self.kb_chunk_limit < 1:
            raise ValueError("INTAKE_KB_CHUNK_LIMIT must be at least 1 (chunks, all tenants)")
        if self.max_attempts < 1:
            raise ValueError("INTAKE_MAX_ATTEMPTS must be at least 1")
        if self.retry_base_seconds < 1:
            raise ValueError("INTAKE_RETRY_BASE_SECONDS must be a whole number of seconds ≥ 1")
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ValueError("INTAKE_CHUNK_OVERLAP must be ≥ 0 and smaller than INTAKE_CHUNK_SIZE")
        if self.ocr not in ("auto", "off"):
            raise ValueError("INTAKE_OCR must be auto or off")
        if self.ocr_max_pages < 1 or self.ocr_page_timeout <= 0:
            raise ValueError("INTAKE_OCR_MAX_PAGES must be ≥ 1 and INTAKE_OCR_PAGE_TIMEOUT > 0")
        if not self.ocr_language_list:
            raise ValueError("INTAKE_OCR_LANGUAGES must name at least one language, e.g. en,zh")
        if self.webhook_url and not self.webhook_url.startswith(("http://", "https://")):
            raise ValueError("INTAKE_WEBHOOK_URL must be an http:// or https:// URL")
        if self.webhook_timeout <= 0 or self.webhook_retry_base_seconds < 1:
            raise ValueError(
                "INTAKE_WEBHOOK_TIMEOUT must be > 0 and "
                "INTAKE_WEBHOOK_RETRY_BASE_SECONDS a whole number of seconds ≥ 1"
            )
        if self.embedding_rpm < 0 or self.embedding_concurrency < 0:
            raise ValueError(
                "INTAKE_EMBEDDING_RPM and INTAKE_EMBEDDING_CONCURRENCY must be ≥ 0 (0 = unlimited)"
            )
        if self.embedding_batch_size < 1:
            raise ValueError("INTAKE_EMBEDDING_BATCH_SIZE must be at least 1")
        if (
            self.tenant_searches < 1
            or self.tenant_expensive_reads < 1
            or self.client_auth_failures < 1
        ):
            raise ValueError(
                "INTAKE_TENANT_SEARCHES, INTAKE_TENANT_EXPENSIVE_READS and "
                "INTAKE_CLIENT_AUTH_FAILURES must be at least 1"
            )
        if not 1 <= self.replica_wait_ms <= 1500:
            raise ValueError("INTAKE_REPLICA_WAIT_MS must be between 1 and 1500 (milliseconds)")
        unknown = [code for code in self.ocr_language_list if code not in OCR_LANGUAGES]
        if unknown:
            raise ValueError(
                f"INTAKE_OCR_LANGUAGES={self.ocr_languages!r}: the OCR models Intake "
                f"ships read {' and '.join(OCR_LANGUAGES)}, not {', '.join(unknown)}"
            )
