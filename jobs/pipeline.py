"""ingest_document(task_id): the RQ job that takes one document through
parse → chunk → embed → index.

The job is the only writer of its task's progress while it runs. It checks the cooperative
cancel flag when it starts, between steps and between embedding batches, and every write that
changes the task's status loses to a cancel (ProgressReporter.commit). Completed steps and
embedding batches are checkpointed, so a retry resumes where the last attempt stopped. Every
failure is classified (jobs.failures): a permanent one sets `retries_left = 0` before the
exception leaves the job, so RQ records it as a dead letter at once; a transient one is left
to RQ's Retry, and the task shows `retrying` until the next attempt starts.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from redis import Redis
from rq import get_current_job

from jobs import blobs, checkpoints, index, keys, lifecycle, logs, metrics, tasks
from jobs.chunking import chunk_text
from jobs.embedding import Embedder, Embedding, SparseRows, make_embedder
from jobs.failures import CancelRequested, IntakeError, PermanentError, classify
from jobs.parsers import ParsedDocument, parse_document
from jobs.progress import ProgressReporter
from jobs.sandbox import parse_bounded
from jobs.settings import Settings
from jobs.versions import pipeline_version

_embedders: dict[Settings, Embedder] = {}


def _embedder(settings: Settings) -> Embedder:
    """One embedder per worker process and settings, so its HTTP connections are reused."""
    if settings not in _embedders:
        _embedders[settings] = make_embedder(settings)
    return _embedders[settings]


class Attempt:
    """One attempt at one task: its record, settings, progress reporter and checkpoints."""

    def __init__(self, job: Any, record: dict[str, str], settings: Settings) -> None:
        self.job = job
        self.connection: Redis = job.connection
        self.record = record
        self.task_id = record["id"]
        self.settings = settings
        self.version = pipeline_version(settings)
        self.reporter = ProgressReporter(
            self.connection, self.task_id, job=job, ttl_seconds=settings.retention_seconds,
            steps=tasks.view(record)["steps"], attempt=int(record.get("attempts") or 0) + 1)
        self.checkpoints = checkpoints.Checkpoints(self.connection, self.task_id, self.version,
                                                   settings.retention_seconds)

    def check_cancel(self, pipe: Any = None) -> None:
        """Raise CancelRequested if a person canceled the task. With `pipe` (writes queued on
        it, e.g. a checkpoint), the check is sent in the same round trip as those writes."""
        flag = keys.cancel_flag(self.task_id)
        if pipe is None:
            canceled = self.connection.exists(flag)
        else:
            pipe.exists(flag)
            canceled = pipe.execute()[-1]
        if canceled:
            raise CancelRequested()


def ingest_document(task_id: str) -> dict[str, Any]:
    """RQ entry point. Returns the result summary; raises so that RQ sees every failure."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("ingest_document must run inside an RQ job")
    record = tasks.load(job.connection, task_id)
    if record is None:
        job.retries_left = 0
        raise PermanentError("The task record is gone (expired or deleted).", code="task_lost")
    attempt = Attempt(job, record, Settings.from_env())
    try:
        # The commit checks the cancel flag itself (WATCHed): a task canceled before its job
        # started raises CancelRequested here, and nothing is written.
        attempt.reporter.commit({"status": "running", "attempts": attempt.reporter.attempt,
                                 "started_at": tasks.now_iso(), "ended_at": "", "error": "",
                                 "next_attempt_at": "", "current_step": "parsing",
                                 "step_detail": "Starting"})
        logs.event("attempt_started", record, attempt=attempt.reporter.attempt)
        return _run(attempt)
    except CancelRequested:
        _finish_canceled(attempt)
        logs.event("task_canceled", record, attempt=attempt.reporter.attempt)
        return {"canceled": True}
    except Exception as exc:
        error = classify(exc, attempt.reporter.current_step)
        logs.event("attempt_failed", record, attempt=attempt.reporter.attempt, step=error.step,
                   error=error.code, transient=error.transient, retries_left=job.retries_left)
        try:
            _record_failure(attempt, error)
        except CancelRequested:
            job.retries_left = 0
            _finish_canceled(attempt)
            return {"canceled": True}
        raise


def _run(attempt: Attempt) -> dict[str, Any]:
    parsed, chunks = _parse_and_chunk(attempt)
    vectors = _embed(attempt, chunks)
    reporter, record = attempt.reporter, attempt.record
    reporter.begin_step("indexing", 92, f"Indexing {len(chunks)} chunks")
    reporter.end_step("indexing")   # the commit below checks the cancel flag (WATCHed)
    characters = len(parsed.text) or attempt.checkpoints.characters()
    result = {"pages": parsed.pages, "characters": characters, "chunks": len(chunks)}
    document = index.IndexedDocument(
        tenant=record["tenant"], document_id=record["document_id"], filename=record["filename"],
        task_id=attempt.task_id, version=int(record.get("version") or 0), texts=chunks,
        vectors=vectors)

    def index_and_clean_up(pipe: Any) -> None:
        index.queue_upsert(pipe, document)
        blobs.delete(pipe, attempt.task_id, int(record.get("size") or 0))
        checkpoints.delete(pipe, attempt.task_id)
        lifecycle.mark_finished(pipe, record["tenant"], attempt.task_id)
        metrics.count(pipe, "tasks_finished_total", status="succeeded")
        metrics.observe_steps(pipe, reporter.steps, reporter.attempt)

    reporter.close()
    reporter.progress, reporter.current_step = 100, "done"
    reporter.step_detail = f"Indexed {len(chunks)} chunk{'s' if len(chunks) != 1 else ''}"
    reporter.commit({"status": "succeeded", "ended_at": tasks.now_iso(), "result": result,
                     "error": "", "next_attempt_at": "", "pipeline_version": attempt.version},
                    queue_more=index_and_clean_up)
    logs.event("task_succeeded", record, attempt=reporter.attempt, **result,
               steps={s["name"]: [s["attempt"], s["started_at"], s["ended_at"]]
                      for s in reporter.steps})
    return result


def _parse_and_chunk(attempt: Attempt) -> tuple[ParsedDocument, list[str]]:
    """Parse and chunk, or take both from an earlier attempt's checkpoint (steps keep its times)."""
    saved = attempt.checkpoints.chunks()
    if saved is not None:
        return saved
    reporter, settings = attempt.reporter, attempt.settings
    reporter.begin_step("parsing", 2, f"Reading {attempt.record['filename']}")
    parsed = _parse(blobs.load(attempt.connection, attempt.task_id), attempt.record["kind"],
                    settings)
    reporter.end_step("parsing")
    attempt.check_cancel()
    reporter.begin_step("chunking", 20, f"Splitting {len(parsed.text)} characters")
    chunks = chunk_text(parsed.text, settings.chunk_size, settings.chunk_overlap)
    if not chunks:
        raise PermanentError("This document contains no text.", code="no_text", step="chunking")
    reporter.end_step("chunking")
    pipe = attempt.connection.pipeline()
    attempt.checkpoints.save_chunks(parsed, chunks, pipe=pipe)
    attempt.check_cancel(pipe)          # one round trip for the checkpoint and the check
    return parsed, chunks


def _parse(data: bytes, kind: str, settings: Settings) -> ParsedDocument:
    """Plain text is decoded here (linear, bounded by the file size); formats with complex
    parsers run in a killable child under a deadline and a memory bound."""
    if kind in ("txt", "md"):
        return parse_document(data, kind)
    return parse_bounded(data, kind, seconds=settings.parse_timeout,
                         memory_bytes=settings.parse_memory_mb * 1024 * 1024)


def _embed(attempt: Attempt, chunks: list[str]) -> Embedding:
    """Embed in batches; each batch is checkpointed and followed by a cancel check."""
    embedder = _embedder(attempt.settings)
    reporter, total = attempt.reporter, len(chunks)
    reporter.begin_step("embedding", 30, f"Embedding chunks 0 of {total}")
    blocks = []
    for start in range(0, total, embedder.batch_size):
        block = attempt.checkpoints.embedding(start)
        pipe = attempt.connection.pipeline()
        if block is None:
            block = embedder.embed(chunks[start:start + embedder.batch_size])
            attempt.checkpoints.save_embedding(start, block, pipe=pipe)
        blocks.append(block)
        done = min(start + embedder.batch_size, total)
        reporter.update(30 + 60 * done // total, f"Embedding chunks {done} of {total}")
        attempt.check_cancel(pipe)      # one round trip for the checkpoint and the check
    reporter.end_step("embedding")
    if isinstance(blocks[0], SparseRows):
        return SparseRows.concatenate(blocks)
    return np.vstack(blocks)


def _finish_canceled(attempt: Attempt) -> None:
    """The cancel already set the status; leave the record's step and the job meta saying so."""
    reporter = attempt.reporter
    reporter.close()
    reporter.current_step = "canceled"
    pipe = attempt.connection.pipeline()
    lifecycle.mark_finished(pipe, attempt.record["tenant"], attempt.task_id)
    reporter.write({"status": "canceled", "step_detail": "Canceled", "error": "",
                    "next_attempt_at": ""}, pipe=pipe)
    pipe.execute()


def _record_failure(attempt: Attempt, error: IntakeError) -> None:
    """Write `retrying` with the next attempt's time, or `failed` (a dead letter)."""
    job, reporter = attempt.job, attempt.reporter
    reporter.close()
    if not error.transient:
        job.retries_left = 0
    fields: dict[str, Any] = {"error": error.as_dict(error.step or reporter.current_step)}
    if job.retries_left:
        delay = job.get_retry_interval()
        reporter.current_step = "waiting_retry"
        fields.update(status="retrying", next_attempt_at=tasks.iso_in(delay),
                      step_detail=f"Attempt {reporter.attempt + 1} in {delay} s")
        reporter.commit(fields, queue_more=lambda pipe: metrics.count(pipe, "retries_total"))
        return
    reporter.current_step = "failed"
    fields.update(status="failed", next_attempt_at="", ended_at=tasks.now_iso(),
                  step_detail=error.message)
    def dead_letter(pipe: Any) -> None:
        lifecycle.mark_dead_letter(pipe, attempt.record["tenant"], attempt.task_id)
        metrics.count(pipe, "tasks_finished_total", status="failed")
        metrics.observe_steps(pipe, reporter.steps, reporter.attempt)

    reporter.commit(fields, queue_more=dead_letter)
