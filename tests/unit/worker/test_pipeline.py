"""The pipeline job on fakeredis with an in-process worker: states, failures, progress writes."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from rq.job import Job
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

from jobs.core import keys
from jobs.core.failures import TransientError
from jobs.core.settings import Settings
from jobs.embedding.embedders import LocalEmbedder
from jobs.kb import postings
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import originals
from jobs.tasks.attempts import AttemptFence, Superseded
from jobs.text.terms import TermCounter
from jobs.worker.progress import ProgressReporter
from tests.samples import make_pdf_no_text
from tests.unit.conftest import upload

TEXT = b"Pipelines turn words into vectors. " * 80


def _task(client, task_id):
    return client.get(f"/api/tasks/{task_id}").get_json()


def test_a_document_goes_through_every_step(client, run_jobs, redis):
    task_id = upload(client, ("a.txt", TEXT)).get_json()["tasks"][0]["id"]
    run_jobs()
    task = _task(client, task_id)
    assert task["status"] == "succeeded" and task["progress"] == 100
    assert task["current_step"] == "done" and task["attempts"] == 1
    assert [s["name"] for s in task["steps"]] == ["parsing", "chunking", "embedding", "indexing"]
    assert task["result"]["chunks"] >= 3 and task["result"]["characters"] == len(TEXT.strip())
    assert task["started_at"] and task["ended_at"] and task["error"] is None
    meta = Job.fetch(task_id, connection=redis).get_meta()
    assert meta["progress"] == 100 and meta["current_step"] == "done"
    assert originals.stored(redis, Settings(), "default", "a.txt", task_id), "the original is kept"
    assert int(redis.get(keys.blob_bytes())) == 0, "its bytes wait no more"
    assert redis.hget(keys.task(task_id), "attempt_id") == b"", "the attempt let go of it"
    assert all(s["ended_at"] and s["ended_at"] <= task["ended_at"] for s in task["steps"])


def test_a_bad_file_fails_at_once_with_a_readable_reason(client, run_jobs, redis):
    task_id = upload(client, ("scan.pdf", make_pdf_no_text())).get_json()["tasks"][0]["id"]
    run_jobs()
    task = _task(client, task_id)
    assert task["status"] == "failed" and task["attempts"] == 1
    assert task["error"]["retryable"] is False and task["error"]["step"] == "parsing"
    assert "no text layer" in task["error"]["message"]
    assert task_id in FailedJobRegistry("intake-high", connection=redis).get_job_ids(cleanup=False)
    assert client.get("/api/search?q=anything").get_json()["results"] == []


class _BrokenEmbedder:
    model, dimension, batch_size = "broken", 384, 16

    def embed(self, texts):
        raise TransientError(
            "The embedding service did not answer within 30 s.", code="embedding_timeout"
        )


def test_a_transient_failure_waits_for_a_retry(client, run_jobs, redis):
    task_id = upload(client, ("a.txt", TEXT)).get_json()["tasks"][0]["id"]
    run_jobs(_BrokenEmbedder())
    task = _task(client, task_id)
    assert task["status"] == "retrying" and task["current_step"] == "waiting_retry"
    assert task["error"] == {
        "step": "embedding",
        "type": "embedding_timeout",
        "message": "The embedding service did not answer within 30 s.",
        "retryable": True,
    }
    assert task["next_attempt_at"] and task["attempts"] == 1
    assert task_id in ScheduledJobRegistry("intake-high", connection=redis).get_job_ids(
        cleanup=False
    )


def test_a_task_canceled_as_its_job_is_dequeued_never_starts(client, run_jobs, redis):
    task_id = upload(client, ("a.txt", TEXT)).get_json()["tasks"][0]["id"]
    # The record says canceled while the job is still queued (rq#2160's window).
    redis.hset(keys.task(task_id), mapping={"status": "canceled", "current_step": "canceled"})
    run_jobs()
    task = _task(client, task_id)
    assert task["status"] == "canceled" and task["current_step"] == "canceled"
    assert task["attempts"] == 0 and task["steps"] == []
    assert redis.scard(keys.kb_documents("default")) == 0


class _RecordingFence(AttemptFence):
    """A real fence on fakeredis that also notes when each progress write was sent."""

    def __init__(self, redis, task_id, clock):
        super().__init__(redis, task_id)
        self.clock, self.sent = clock, []

    def write(self, fields, ttl_seconds, pipe=None):
        self.sent.append(self.clock[0])
        return super().write(fields, ttl_seconds, pipe)


def _running(redis, task_id):
    fence = AttemptFence(redis, task_id)
    redis.hset(
        keys.task(task_id),
        mapping={
            "status": "running",
            "tenant": "default",
            "id": task_id,
            "attempt_id": fence.attempt_id,
        },
    )
    return fence


def test_only_a_write_the_fence_let_through_reaches_the_jobs_meta(redis):
    """Progress is copied to RQ's job meta (rq-dashboard) with Job.save_meta(), after the
    fenced write to the task hash applied; an attempt that lost its task changes neither."""
    from rq import Queue

    job = Queue("probe", connection=redis).enqueue("jobs.fairshare.wake_up")
    owner = _running(redis, "a" * 32)
    reporter = ProgressReporter(owner, job=job, ttl_seconds=60)
    reporter.begin_step("parsing", 40, "Reading <b>.txt")
    meta = Job.fetch(job.id, connection=redis).get_meta()
    assert meta["progress"] == 40 and meta["step_detail"] == "Reading &lt;b&gt;.txt"
    reporter.close()
    stale = AttemptFence(redis, "a" * 32)  # another attempt id: fenced out
    late = ProgressReporter(stale, job=job, ttl_seconds=60)
    late.begin_step("embedding", 70, "late")
    assert Job.fetch(job.id, connection=redis).get_meta()["progress"] == 40
    assert redis.hget(keys.task("a" * 32), "progress") == b"40"
    late.close()


def test_progress_writes_stay_within_four_a_second(redis, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("jobs.worker.progress.time.monotonic", lambda: clock[0])
    fence = _RecordingFence(redis, "t" * 32, clock)
    redis.hset(keys.task("t" * 32), mapping={"status": "running", "attempt_id": fence.attempt_id})
    reporter = ProgressReporter(fence, ttl_seconds=60)
    seen = []
    for step in range(200):
        clock[0] += 0.02
        reporter.update(step // 2, f"step {step}")
        seen.append(int(redis.hget(keys.task("t" * 32), "progress") or 0))
    reporter.close()
    busiest = max(sum(1 for w in fence.sent if start <= w < start + 1) for start in fence.sent)
    assert len(fence.sent) >= 6 and busiest <= 2, fence.sent  # 2 a second: room for 2 final
    assert seen == sorted(seen), "progress never decreases"


def test_an_older_run_never_replaces_a_newer_index_entry(redis):
    from jobs.kb.index import IndexedDocument, write
    from jobs.kb.retrieval import Retriever
    from jobs.text.terms import TERMS

    def put(version, text):
        return write(
            redis,
            IndexedDocument("default", "doc", "doc.txt", f"{version:032d}", version, [text], None),
        )

    assert put(2, "newer words") is True
    assert put(1, "older words") is False
    hits = Retriever(redis).lexical("default", TERMS.count(["words"]), 5).hits
    assert [h["text"] for h in hits] == ["newer words"]


def _stored(redis, task_id):
    document_id = _task_record(redis, task_id)["document_id"]
    return redis.hgetall(keys.kb_document("default", document_id))


def _task_record(redis, task_id):
    return {k.decode(): v.decode() for k, v in redis.hgetall(keys.task(task_id)).items()}


def test_every_chunk_s_terms_are_indexed_in_order(client, run_jobs, redis):
    text = b"".join(b"Paragraph %d is about word%d. " % (i, i) * 12 + b"\n\n" for i in range(12))
    task_id = upload(client, ("many.txt", text)).get_json()["tasks"][0]["id"]
    run_jobs(LocalEmbedder(batch_size=2))
    chunks = _task(client, task_id)["result"]["chunks"]
    assert chunks > 4, "more chunks than a batch"
    stored = _stored(redis, task_id)
    ids = list(range(int(stored[b"first"]), int(stored[b"first"]) + chunks))
    texts = [json.loads(r)[2] for r in redis.hmget(keys.kb_texts("default"), ids)]
    assert stored[b"format"] == b"sparse" and int(stored[b"chunks"]) == chunks
    assert (
        redis.hmget(keys.kb_rows("default"), ids)
        == postings.encode(TermCounter().count(texts), ids[0]).rows
    ), "every chunk's terms, in order"
    hits = client.get("/api/search?q=word11").get_json()["results"]
    assert hits and all("word11" in h["text"] for h in hits)


class _DenseEmbedder:
    model, dimension, batch_size = "dense-test", 3, 2

    def embed(self, texts):
        return np.array([[1.0, 0.0, 0.0]] * len(texts), dtype=np.float32)


def test_dense_batches_are_stacked(client, run_jobs, redis, monkeypatch):
    written = []

    class Store:
        def write(self, tenant, first, vectors):
            written.append(vectors.shape)

        def delete(self, tenant, first, stop):
            pass

        def close(self):
            pass

    monkeypatch.setattr(KnowledgeBase, "open_vectors", lambda kb: Store())
    task_id = upload(client, ("a.txt", TEXT)).get_json()["tasks"][0]["id"]
    run_jobs(_DenseEmbedder())
    chunks = _task(client, task_id)["result"]["chunks"]
    stored = _stored(redis, task_id)
    assert stored[b"format"] == b"dense" and int(stored[b"dim"]) == 3
    assert written == [(chunks, 3)], "one matrix of every batch's rows"


def test_a_held_back_step_is_written_as_soon_as_the_throttle_allows(redis):
    task = keys.task("s" * 32)
    reporter = ProgressReporter(_running(redis, "s" * 32), ttl_seconds=60)
    reporter.begin_step("parsing", 2, "Reading")
    reporter.begin_step("embedding", 30, "Embedding chunks 0 of 64")  # held back
    assert redis.hget(task, "current_step") == b"parsing"
    deadline = time.monotonic() + 2
    while redis.hget(task, "current_step") != b"embedding" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert redis.hget(task, "current_step") == b"embedding"
    reporter.close()


class _FailingOverFence(AttemptFence):
    """A real fence on fakeredis whose first `failures` writes find no primary (a failover)."""

    def __init__(self, redis, task_id, failures):
        super().__init__(redis, task_id)
        self.failures = failures

    def write(self, fields, ttl_seconds, pipe=None):
        if self.failures:
            self.failures -= 1
            raise RedisConnectionError(
                "Error 111 connecting to 127.0.0.1:6379. Connection refused."
            )
        return super().write(fields, ttl_seconds, pipe)


def test_a_progress_write_during_a_failover_is_tried_again_not_failing_the_attempt(redis):
    task = keys.task("f" * 32)
    fence = _FailingOverFence(redis, "f" * 32, failures=2)
    redis.hset(task, mapping={"status": "running", "attempt_id": fence.attempt_id})
    reporter = ProgressReporter(fence, ttl_seconds=60)
    reporter.begin_step("embedding", 30, "Embedding chunks 0 of 64")  # refused: no raise
    assert redis.hget(task, "current_step") is None
    deadline = time.monotonic() + 5  # two tries half a second apart, then written
    while redis.hget(task, "current_step") != b"embedding" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert redis.hget(task, "current_step") == b"embedding" and fence.failures == 0
    reporter.close()


def test_progress_never_overwrites_a_cancel(redis):
    task = keys.task("c" * 32)
    fence = _running(redis, "c" * 32)
    redis.hset(task, mapping={"status": "canceled", "current_step": "canceled"})
    reporter = ProgressReporter(fence, ttl_seconds=60)
    reporter.begin_step("embedding", 30, "Embedding")
    assert redis.hget(task, "current_step") == b"canceled"


def test_an_attempt_that_lost_its_task_writes_nothing(redis):
    task = keys.task("d" * 32)
    old = _running(redis, "d" * 32)
    _running(redis, "d" * 32)  # a newer attempt took the task over
    ProgressReporter(old, ttl_seconds=60).begin_step("embedding", 30, "Embedding")
    assert redis.hget(task, "current_step") is None
    with pytest.raises(Superseded):
        old.check()
