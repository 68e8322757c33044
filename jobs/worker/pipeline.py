"""ingest_document(task_id): the RQ job that takes one document through
parse → chunk → embed → index.

`ingest_document` is RQ's entry point only: it hands the job, the task id and this process's
parts (jobs.worker.parts: settings, embedder, progress reporter) to `run_attempt`, which uses
nothing else. An attempt first takes its task (jobs.tasks.attempts): only the job of the task's
current run may, and only while the task may start; a job canceled just as it was dequeued, or one
of a run a Retry replaced, ends at once having changed nothing. After that every write of the
attempt is fenced by its own id, and it checks that it still owns the task between steps and
embedding batches, so a cancel, a Retry or a delete stops it at its next checkpoint. Completed
steps and embedding batches are checkpointed, so a retry resumes where the last attempt
stopped. Every failure is classified (jobs.core.failures): a permanent one sets `retries_left = 0`
before the exception leaves the job, so RQ records it as a dead letter at once; a transient
one is left to RQ's Retry, and the task shows `retrying` until the next attempt starts.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from redis import Redis
from redis.client import Pipeline
from rq import get_current_job

from jobs.core import keys, logs, metrics, queues
from jobs.core.clock import iso_in, now_iso
from jobs.core.failures import AttemptFailed, CancelRequested, IntakeError, PermanentError
from jobs.core.redis_client import WORKER
from jobs.core.settings import MIB, Settings
from jobs.embedding.budget import BudgetWait, EmbeddingBudget, WaitingGate
from jobs.embedding.embedders import Embedding, HttpEmbedder, LocalEmbedder
from jobs.kb import index
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import originals, states, transitions
from jobs.tasks import record as task_record
from jobs.tasks import records as tasks
from jobs.tasks.attempts import AttemptFence, Refused, Superseded
from jobs.text import ocr
from jobs.text.chunking import Chunk, chunk_blocks
from jobs.text.parsers import ParsedDocument
from jobs.text.sandbox import parse_bounded
from jobs.worker import checkpoints, parts, scan_reading
from jobs.worker.classify import classify
from jobs.worker.parts import Parts
from jobs.worker.progress import dashboard_text

#: What the parse (OCR above all) may spend of an attempt's INTAKE_JOB_TIMEOUT: the rest is
#: kept for embedding and indexing, so a scan too long to read fails with its reason instead of
#: being killed by RQ's timeout and retried.
PARSE_SHARE_OF_JOB = 0.8
#: What waits for the embedding budget may reach of an attempt's INTAKE_JOB_TIMEOUT, less one
#: request's timeout: the rest is kept for that request and the indexing, so an attempt that
#: would wait longer fails with its reason (and resumes from its checkpoints) instead of being
#: killed by RQ's timeout.
BUDGET_WAIT_SHARE_OF_JOB = 0.9
#: A parse and chunking quicker than this is not checkpointed in a round trip of its own: its
#: checkpoint travels with the next write of the attempt (the first embedding batch's, or the
#: failure's), so a tiny document's attempt is one round trip shorter. Only a worker lost in
#: between loses it, and its retry then redoes less than this much work.
QUICK_STEP_SECONDS = 0.5


class Attempt:
    """One attempt at one task: its record, parts, fence, progress reporter and checkpoints."""

    def __init__(
        self, job: Any, record: task_record.TaskRecord, parts_: Parts, fence: AttemptFence
    ) -> None:
        self.started = time.monotonic()
        self.job = job
        self.connection: Redis = job.connection
        self.record = record
        self.task_id = record.id
        self.tenant = record.tenant
        self.settings = parts_.settings
        self.embedder = parts_.embedder
        self.fence = fence
        self.version = parts_.version
        self.reporter = parts_.reporter(
            fence,
            job=job,
            ttl_seconds=self.settings.retention_seconds,
            steps=task_record.steps_so_far(record),
            attempt=fence.attempt,
        )
        # Operators see in rq-dashboard which document a job reads, escaped like all its meta.
        job.meta["document"] = dashboard_text(record.filename)
        self.checkpoints = checkpoints.Checkpoints(
            self.connection,
            self.task_id,
            self.version,
            self.settings.retention_seconds,
            stored=fence.prefetched[0],
        )
        #: A checkpoint not sent yet (QUICK_STEP_SECONDS): queued on the attempt's next write.
        self.unsent: Callable[[Pipeline], None] | None = None

    def queue_unsent(self, pipe: Pipeline, *, keep: bool = False) -> None:
        """Queue the checkpoint not sent yet, if any, on `pipe` (which the caller sends);
        `keep` it for a MULTI that may be built again (AttemptFence.commit)."""
        unsent = self.unsent
        if not keep:
            self.unsent = None
        if unsent is not None:
            unsent(pipe)


def ingest_document(task_id: str) -> dict[str, Any]:
    """RQ entry point: this job, its task and this process's parts (jobs.worker.parts.current)."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("ingest_document must run inside an RQ job")
    return run_attempt(job, task_id, parts.current())


def run_attempt(job: Any, task_id: str, parts_: Parts) -> dict[str, Any]:
    """One attempt of the task, with everything it uses handed in. Returns the result
    summary; raises so that RQ sees every failure."""
    fence = AttemptFence(job.connection, task_id)
    try:
        record = fence.start(
            job.id,
            settings=parts_.settings,
            prefetch=lambda pipe: _prefetch(pipe, task_id),
            tenant=_tenant_of(job),
        )
    except (Refused, Superseded) as exc:  # canceled, replaced, deleted: nothing to do or tell
        job.retries_left = 0
        logs.event("attempt_skipped", {"id": task_id}, reason=str(exc))
        return {"skipped": str(exc)}
    attempt = Attempt(job, record, parts_, fence)
    try:
        logs.event("attempt_started", record.log_context(), attempt=fence.attempt)
        return _run(attempt)
    except CancelRequested:
        return _finish_canceled(attempt)
    except Superseded as exc:
        return _superseded(attempt, exc)
    except Exception as exc:
        error = classify(exc, attempt.reporter.current_step)
        logs.event(
            "attempt_failed",
            record.log_context(),
            attempt=fence.attempt,
            step=error.step,
            error=error.code,
            transient=error.transient,
            retries_left=job.retries_left,
        )
        try:
            _record_failure(attempt, error)
        except CancelRequested:
            return _finish_canceled(attempt)
        except Superseded as lost:
            return _superseded(attempt, lost)
        # What RQ keeps (exc_info) is rendered as raw HTML by rq-dashboard: escaped words only.
        raise AttemptFailed(dashboard_text(f"{error.code}: {error.message}")) from None


def _tenant_of(job: Any) -> str | None:
    """The tenant whose queue the job came from (jobs.core.queues), None for another queue."""
    parsed = queues.parse(getattr(job, "origin", None) or "")
    return parsed[0] if parsed else None


def _prefetch(pipe: Pipeline, task_id: str) -> None:
    """What an attempt reads with its start: its checkpoint (Attempt.checkpoints)."""
    pipe.hgetall(keys.checkpoint(task_id))


def _run(attempt: Attempt) -> dict[str, Any]:
    summary, chunks = _parse_and_chunk(attempt)
    vectors = _embed(attempt, [chunk.text for chunk in chunks])
    reporter, record, tenant = attempt.reporter, attempt.record, attempt.tenant
    reporter.begin_step("indexing", 92, f"Indexing {len(chunks)} chunks")
    result = {**summary, "chunks": len(chunks)}
    kb = KnowledgeBase.of(attempt.settings, attempt.connection, WORKER)
    store = kb.open_vectors()
    try:
        staged = index.stage(
            kb.redis,
            index.IndexedDocument(
                tenant=tenant,
                document_id=record.document_id,
                filename=record.filename,
                task_id=attempt.task_id,
                version=record.version,
                texts=[chunk.text for chunk in chunks],
                vectors=vectors,
                locations=[chunk.location for chunk in chunks],
            ),
            store,
        )
    except BaseException:
        if store is not None:
            store.close()
        raise

    def index_and_clean_up(pipe: Pipeline) -> None:
        kb.queue_flip(pipe, attempt.task_id, staged)
        transitions.changed(
            pipe, tenant, attempt.task_id, states.SUCCEED.target, settings=attempt.settings
        )
        metrics.observe_steps(pipe, reporter.steps, reporter.attempt)

    reporter.close()
    reporter.end_step("indexing")  # as its write is sent: the task's end (ended_at) too
    reporter.progress, reporter.current_step = 100, "done"
    reporter.step_detail = f"Indexed {len(chunks)} chunk{'s' if len(chunks) != 1 else ''}"
    try:
        quota = kb.chunk_quota(tenant, record.document_id, len(chunks))
        reporter.commit(
            task_record.succeeded(result, attempt.version, now_iso()),
            queue_more=index_and_clean_up,
            check=quota.check,
            watch=quota.watch,
        )
    except BaseException:
        index.discard(kb.redis, staged)  # a no-op if the flip did land
        if store is not None:
            store.close()
        raise
    try:
        try:  # what fails here, housekeeping applies (jobs.kb.pending_flips)
            kb.apply_after(attempt.task_id, staged)
        except Exception as exc:
            logs.event("flip_left_for_housekeeping", record.log_context(), error=repr(exc))
        # What the versions it and others replaced leave (rows, texts, vectors) is collected
        # in batches, by the job that finds a batch of it waiting: on no one's path, and
        # housekeeping collects the rest within its minute (and what a failure here leaves,
        # and stagings a lost worker left). A first version replaces nothing: no round trip.
        if quota.replaced and index.garbage_waiting(kb.redis, tenant) >= index.RUNS_PER_COLLECTION:
            with contextlib.suppress(Exception):
                index.collect_garbage(kb.redis, tenant, store)
    finally:
        if store is not None:
            store.close()
    logs.event(
        "task_succeeded",
        record.log_context(),
        attempt=reporter.attempt,
        **result,
        steps={s["name"]: [s["attempt"], s["started_at"], s["ended_at"]] for s in reporter.steps},
    )
    return result


def _parse_and_chunk(attempt: Attempt) -> tuple[dict[str, Any], list[Chunk]]:
    """What the parse found (`checkpoints.summary`) and the chunks, or both from an earlier
    attempt's checkpoint (the steps keep that attempt's times)."""
    saved = attempt.checkpoints.chunks()
    if saved is not None:
        return saved
    reporter, settings, record = attempt.reporter, attempt.settings, attempt.record
    began = time.monotonic()
    reporter.begin_step("parsing", 2, f"Reading {record.filename}")
    data = originals.load(
        attempt.connection,
        settings,
        attempt.tenant,
        record.document_id,
        attempt.task_id,
        record.size,
        record.original_of,
    )
    split_at = scan_reading.SPLIT_AT if record.kind == "pdf" else 0
    parsed = _parse(data, record.kind, settings, reporter.update, split_at=split_at)
    if parsed.ocr_pending:  # a long scan: read in page ranges by every free worker
        parsed = scan_reading.read_in_ranges(
            attempt.job,
            attempt.task_id,
            data,
            parsed,
            settings,
            tell=_parse_progress(reporter.update),
            check=attempt.fence.check,
            deadline=attempt.started + settings.job_timeout * PARSE_SHARE_OF_JOB,
        )
    reporter.end_step("parsing")
    attempt.fence.check()
    reporter.begin_step("chunking", 20, f"Splitting {parsed.characters} characters")
    chunks = chunk_blocks(parsed.blocks, settings.chunk_size, settings.chunk_overlap)
    if not chunks:
        raise PermanentError("This document contains no text.", code="no_text", step="chunking")
    reporter.end_step("chunking")
    summary = checkpoints.summary(parsed)
    attempt.unsent = lambda pipe: attempt.checkpoints.save_chunks(summary, chunks, pipe=pipe)
    if time.monotonic() - began >= QUICK_STEP_SECONDS:
        pipe = attempt.connection.pipeline()
        attempt.queue_unsent(pipe)
        attempt.fence.check(pipe)  # one round trip for the checkpoint and the check
    return summary, chunks


def _parse(
    data: bytes,
    kind: str,
    settings: Settings,
    update: Callable[[int, str], None],
    *,
    split_at: int = 0,
) -> ParsedDocument:
    """Every format, plain text and Markdown included, is read in a killable child under a
    deadline and a memory bound (jobs.text.sandbox): no file can hold a worker or take its memory,
    however it was crafted. A parser's progress ("OCR page 3 of 80") moves the bar through the
    parsing step's share of it. A PDF with at least `split_at` pages to read by OCR comes back
    with its text layers only and those pages named (`ocr_pending`), to be read in page ranges
    (jobs.worker.scan_reading)."""
    options = scan_reading.options(settings, _parse_progress(update), split_at=split_at)
    return parse_bounded(
        data,
        kind,
        options=options,
        seconds=settings.parse_timeout,
        memory_bytes=settings.parse_memory_mb * MIB,
        max_chars=settings.parse_max_chars,
        budget_seconds=settings.job_timeout * PARSE_SHARE_OF_JOB,
    )


def _parse_progress(update: Callable[[int, str], None]) -> Callable[[str], None]:
    """A parser's progress ("OCR page 3 of 80") moving the bar through the parsing step's share
    of it."""

    def progress(detail: str) -> None:
        number, count = ocr.page_numbers(detail) or (0, 1)
        update(2 + 17 * max(number - 1, 0) // max(count, 1), detail)

    return progress


def _embed(attempt: Attempt, chunks: list[str]) -> Embedding | None:
    """Dense vectors, in batches; each batch is checkpointed and followed by an ownership check.
    An HTTP embedder's requests pass the shared embedding budget (jobs.embedding.budget) first.
    The local embedder has no dense model: the step is shown and ends at once, with no vectors
    (every chunk's search terms are counted at indexing, whatever the embedder)."""
    embedder = attempt.embedder
    reporter, total = attempt.reporter, len(chunks)
    reporter.begin_step("embedding", 30, f"Embedding chunks 0 of {total}")
    if isinstance(embedder, LocalEmbedder):
        pipe = attempt.connection.pipeline()
        attempt.queue_unsent(pipe)
        reporter.update(90, f"Embedding chunks {total} of {total}")
        attempt.fence.check(pipe)  # one round trip for the checkpoint and the check
        reporter.end_step("embedding")
        return None
    gate = _budget_gate(attempt, embedder) if isinstance(embedder, HttpEmbedder) else None
    blocks = []
    for start in range(0, total, embedder.batch_size):
        batch = chunks[start : start + embedder.batch_size]
        block = attempt.checkpoints.embedding(start)
        if block is not None and len(block) != len(batch):
            block = None  # saved under another batch size (another worker's): embed it again
        pipe = attempt.connection.pipeline()
        if block is None:
            if gate is not None and isinstance(embedder, HttpEmbedder):
                block = embedder.embed(batch, gate=gate)
            else:
                block = embedder.embed(batch)
            attempt.checkpoints.save_embedding(start, block, pipe=pipe)
        attempt.queue_unsent(pipe)  # a failed embed leaves it to the failure's write
        blocks.append(block)
        done = min(start + embedder.batch_size, total)
        reporter.update(30 + 60 * done // total, f"Embedding chunks {done} of {total}")
        attempt.fence.check(pipe)  # one round trip for the checkpoint and the check
    reporter.end_step("embedding")
    return np.vstack(blocks)


def _budget_gate(attempt: Attempt, embedder: HttpEmbedder) -> WaitingGate:
    """The attempt's way through the embedding budget: its waits shown in step_detail, and
    none reaching past what the attempt's job timeout leaves for them."""
    timeout = getattr(attempt.job, "timeout", None) or attempt.settings.job_timeout
    deadline = None
    if timeout > 0:  # RQ's -1: no timeout
        deadline = attempt.started + max(
            0.5 * timeout, BUDGET_WAIT_SHARE_OF_JOB * timeout - embedder.timeout
        )
    budget = EmbeddingBudget.from_settings(
        attempt.connection, attempt.settings, timeout=embedder.timeout
    )
    return WaitingGate(budget, on_wait=BudgetWaits(attempt), deadline=deadline)


class BudgetWaits:
    """Shows a wait for the embedding budget as the task's step_detail, which the reporter
    throttles (the text changes once a second), then puts the step's own text back. The wait
    is neither a failure nor an attempt: the status stays `running`. About once a second it
    checks that the attempt still owns its task, so a cancel stops a long wait at once."""

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.resume: str | None = None
        self.began = 0.0
        self.checked = 0.0

    def __call__(self, wait: BudgetWait | None) -> None:
        reporter, now = self.attempt.reporter, time.monotonic()
        if wait is None:
            if self.resume is not None:
                reporter.update(reporter.progress, self.resume)
                logs.event(
                    "embedding_budget_waited",
                    self.attempt.record.log_context(),
                    attempt=reporter.attempt,
                    seconds=round(now - self.began, 3),
                )
            self.resume = None
            return
        if self.resume is None:
            self.resume, self.began = reporter.step_detail, now
        if wait.text != reporter.step_detail:
            reporter.update(reporter.progress, wait.text)
        if now - self.checked >= 1.0:
            self.checked = now
            self.attempt.fence.check()


def _stretch_retry(job: Any, seconds: float) -> None:
    """Make the coming retry's delay (RQ's retry_intervals) at least `seconds`: a service's
    Retry-After, or what the budget still makes a request wait."""
    intervals = list(job.retry_intervals or [0])
    index = max(len(intervals) - job.retries_left, 0)
    intervals[index] = max(int(intervals[index]), math.ceil(seconds))
    job.retry_intervals = intervals


def _finish_canceled(attempt: Attempt) -> dict[str, Any]:
    """The cancel already set the status; leave the record's step and the job meta saying so.

    No automatic retry: RQ must not run a canceled task again.
    """
    attempt.job.retries_left = 0
    reporter = attempt.reporter
    reporter.close()
    reporter.current_step = "canceled"
    reporter.write_canceled()
    logs.event("task_canceled", attempt.record.log_context(), attempt=reporter.attempt)
    return {"canceled": True}


def _superseded(attempt: Attempt, reason: Superseded) -> dict[str, Any]:
    """Another attempt or run owns the task now (or it was deleted): stop, writing nothing."""
    attempt.job.retries_left = 0
    attempt.reporter.close()
    logs.event(
        "attempt_superseded",
        attempt.record.log_context(),
        attempt=attempt.reporter.attempt,
        reason=str(reason),
    )
    return {"superseded": True}


def _record_failure(attempt: Attempt, error: IntakeError) -> None:
    """Write `retrying` with the next attempt's time, or `failed` (a dead letter).

    Either way the task gives its upload's bytes back to the budgets (its original stays in the
    store); a failure for good drops its checkpoints at once (a bad file: no Retry can use
    them), a retryable one keeps them for INTAKE_UPLOAD_RETENTION_HOURS.
    """
    job, reporter = attempt.job, attempt.reporter
    reporter.close()
    if not error.transient:
        job.retries_left = 0
    as_dict = error.as_dict(error.step or reporter.current_step)
    tenant, task_id = attempt.tenant, attempt.task_id
    if job.retries_left:
        retry_after = getattr(error, "retry_after", None)  # TransientError's
        if retry_after:
            _stretch_retry(job, retry_after)
        delay = job.get_retry_interval()
        reporter.current_step = states.STEP_OF[states.WAIT_FOR_RETRY.target]
        words = tasks.attempt_words(reporter.attempt + 1, attempt.record.max_attempts, delay)

        def retry_later(pipe: Pipeline) -> None:
            attempt.queue_unsent(pipe, keep=True)
            transitions.changed(
                pipe, tenant, task_id, states.WAIT_FOR_RETRY.target, settings=attempt.settings
            )
            metrics.count(pipe, "retries_total")

        reporter.commit(
            task_record.retrying(as_dict, iso_in(delay), words, now_iso()), queue_more=retry_later
        )
        return
    reporter.current_step = states.STEP_OF[states.FAIL.target]

    def dead_letter(pipe: Pipeline) -> None:
        if error.retryable:  # kept for a Retry (jobs.tasks.transitions: until the retention)
            attempt.queue_unsent(pipe, keep=True)
        transitions.changed(
            pipe,
            tenant,
            task_id,
            states.FAIL.target,
            settings=attempt.settings,
            retryable=error.retryable,
        )
        metrics.observe_steps(pipe, reporter.steps, reporter.attempt)

    reporter.commit(task_record.failed(as_dict, now_iso()), queue_more=dead_letter)
