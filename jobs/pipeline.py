"""ingest_document(task_id): the RQ job that takes one document through
parse → chunk → embed → index.

The job is the only writer of its task's progress while it runs. It checks the cooperative
cancel flag when it starts and between steps and embedding batches. Every failure is
classified (jobs.failures): a permanent one sets `retries_left = 0` before the exception leaves
the job, so RQ records it as a dead letter at once; a transient one is left to RQ's Retry.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
from redis import Redis
from rq import get_current_job

from jobs import blobs, index, keys, tasks
from jobs.chunking import chunk_text
from jobs.embedding import Embedder, Embedding, SparseRows, make_embedder
from jobs.failures import IntakeError, PermanentError, classify
from jobs.parsers import parse_document
from jobs.progress import ProgressReporter
from jobs.settings import Settings
from jobs.versions import pipeline_version


class Canceled(Exception):
    """A person canceled the task; the job stops at this checkpoint and indexes nothing."""


_embedders: dict[Settings, Embedder] = {}


def _embedder(settings: Settings) -> Embedder:
    """One embedder per worker process and settings, so its HTTP connections are reused."""
    if settings not in _embedders:
        _embedders[settings] = make_embedder(settings)
    return _embedders[settings]


def ingest_document(task_id: str) -> dict[str, Any]:
    """RQ entry point. Returns the result summary; raises so that RQ sees every failure."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("ingest_document must run inside an RQ job")
    connection: Redis = job.connection
    settings = Settings.from_env()
    record = tasks.load(connection, task_id)
    if record is None:
        job.retries_left = 0
        raise PermanentError("The task record is gone (expired or deleted).", code="task_lost")
    steps = tasks.view(record)["steps"]
    reporter = ProgressReporter(connection, task_id, job=job, ttl_seconds=settings.retention_seconds,
                                steps=steps, attempt=int(record.get("attempts") or 0) + 1)
    try:
        _check_cancel(connection, task_id)
        reporter.write({"status": "running", "attempts": reporter.attempt,
                        "started_at": tasks.now_iso(), "ended_at": "", "error": "",
                        "next_attempt_at": "", "current_step": "parsing",
                        "step_detail": "Starting"})
        return _run(connection, settings, record, reporter)
    except Canceled:
        _finish_canceled(reporter)
        return {"canceled": True}
    except Exception as exc:
        _record_failure(connection, job, record, reporter, classify(exc, reporter.current_step))
        raise


def _run(connection: Redis, settings: Settings, record: dict[str, str],
         reporter: ProgressReporter) -> dict[str, Any]:
    task_id = record["id"]
    reporter.begin_step("parsing", 2, f"Reading {record['filename']}")
    parsed = parse_document(blobs.load(connection, task_id), record["kind"])
    reporter.end_step("parsing")
    _check_cancel(connection, task_id)

    reporter.begin_step("chunking", 20, f"Splitting {len(parsed.text)} characters")
    chunks = chunk_text(parsed.text, settings.chunk_size, settings.chunk_overlap)
    if not chunks:
        raise PermanentError("This document contains no text.", code="no_text", step="chunking")
    reporter.end_step("chunking")
    _check_cancel(connection, task_id)

    vectors = _embed(connection, settings, task_id, chunks, reporter)

    reporter.begin_step("indexing", 92, f"Indexing {len(chunks)} chunks")
    _check_cancel(connection, task_id)
    reporter.end_step("indexing")
    result = {"pages": parsed.pages, "characters": len(parsed.text), "chunks": len(chunks)}
    document = index.IndexedDocument(
        tenant=record["tenant"], document_id=record["document_id"], filename=record["filename"],
        task_id=task_id, version=int(record.get("version") or 0), texts=chunks, vectors=vectors)
    pipe = connection.pipeline()
    index.queue_upsert(pipe, document)
    reporter.progress, reporter.current_step = 100, "done"
    reporter.step_detail = f"Indexed {len(chunks)} chunks"
    reporter.write({"status": "succeeded", "ended_at": tasks.now_iso(), "result": result,
                    "error": "", "next_attempt_at": "",
                    "pipeline_version": pipeline_version(settings)}, pipe=pipe)
    blobs.delete(pipe, task_id)
    pipe.zrem(keys.tenant_failed(record["tenant"]), task_id)
    pipe.execute()
    return result


def _embed(connection: Redis, settings: Settings, task_id: str, chunks: list[str],
           reporter: ProgressReporter) -> Embedding:
    """Every chunk's vector, embedded batch by batch (progress and a cancel check per batch)."""
    embedder = _embedder(settings)
    total = len(chunks)
    reporter.begin_step("embedding", 30, f"Embedding chunks 0 of {total}")
    blocks = []
    for start in range(0, total, embedder.batch_size):
        blocks.append(embedder.embed(chunks[start:start + embedder.batch_size]))
        done = min(start + embedder.batch_size, total)
        reporter.update(30 + 60 * done // total, f"Embedding chunks {done} of {total}")
        _check_cancel(connection, task_id)
    reporter.end_step("embedding")
    if isinstance(blocks[0], SparseRows):
        return SparseRows.concatenate(blocks)
    return np.vstack(blocks)


def _check_cancel(connection: Redis, task_id: str) -> None:
    if connection.exists(keys.cancel_flag(task_id)):
        raise Canceled()


def _finish_canceled(reporter: ProgressReporter) -> None:
    reporter.current_step = "canceled"
    reporter.write({"status": "canceled", "ended_at": tasks.now_iso(), "error": "",
                    "next_attempt_at": "", "step_detail": "Canceled"})


def _record_failure(connection: Redis, job: Any, record: dict[str, str],
                    reporter: ProgressReporter, error: IntakeError) -> None:
    """Write `retrying` with the next attempt's time, or `failed` (a dead letter)."""
    if not error.transient:
        job.retries_left = 0
    failed_step = error.step or reporter.current_step
    fields: dict[str, Any] = {"error": error.as_dict(failed_step)}
    pipe = connection.pipeline()
    if job.retries_left:
        delay = job.get_retry_interval()
        reporter.current_step = "waiting_retry"
        fields.update(status="retrying", next_attempt_at=tasks.iso_in(delay),
                      step_detail=f"Attempt {reporter.attempt + 1} in {delay} s")
    else:
        reporter.current_step = "failed"
        fields.update(status="failed", next_attempt_at="", ended_at=tasks.now_iso(),
                      step_detail=error.message)
        pipe.zadd(keys.tenant_failed(record["tenant"]), {record["id"]: time.time()})
    reporter.write(fields, pipe=pipe)
    pipe.execute()
