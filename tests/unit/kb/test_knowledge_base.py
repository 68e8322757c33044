"""One KnowledgeBase decides what differs between a knowledge base on the queue's Redis and one
on a Redis of its own (jobs.kb.knowledge_base), on two fakeredis servers: together, a flip
queued on a task's MULTI lands in that MULTI; apart, the MULTI records it and it lands when
applied after. The same calls, either way: no caller asks where it lives."""

from __future__ import annotations

import json

import fakeredis
import pytest
from redis.client import Pipeline

from jobs.core import keys
from jobs.core.exceptions import LimitReached
from jobs.core.failures import PermanentError
from jobs.core.redis_client import COMMAND, PROBE, WORKER
from jobs.core.settings import Settings
from jobs.kb import index
from jobs.kb.index import IndexedDocument
from jobs.kb.knowledge_base import READ_IT_THERE, KnowledgeBase
from jobs.kb.retrieval import Retriever
from jobs.text.terms import TERMS

TENANT, TASK_KEY = "default", "intake:task:t1"


def _redis() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


@pytest.fixture(params=["together", "apart"])
def kb(request) -> KnowledgeBase:
    queue = _redis()
    settings = Settings(tenant_chunk_limit=5, kb_chunk_limit=8)
    return KnowledgeBase(queue, settings, _redis() if request.param == "apart" else None)


def _stage(kb: KnowledgeBase, task_id: str, version: int, texts: list[str]):
    doc = IndexedDocument(TENANT, "doc", "doc.txt", task_id, version, texts, None)
    return index.stage(kb.redis, doc)


def _found(kb: KnowledgeBase, word: str) -> list[str]:
    answer = Retriever(kb.redis).lexical(TENANT, TERMS.count_query(word), 10)
    return [hit["text"] for hit in answer.hits]


def _commit(kb: KnowledgeBase, task_id: str, staged) -> list:
    """A task's commit as the worker sends it: its `succeeded` and the flip, one MULTI."""
    pipe = kb.queue.pipeline()
    pipe.hset(TASK_KEY, "status", "succeeded")
    kb.queue_flip(pipe, task_id, staged)
    return pipe.execute()


def test_together_the_flip_lands_in_the_task_s_multi_and_nothing_follows(monkeypatch):
    kb = KnowledgeBase(_redis(), Settings())
    assert not kb.apart and kb.redis is kb.queue
    staged = _stage(kb, "t1", 1, ["the hydraulic pump manual"])
    replies = _commit(kb, "t1", staged)
    assert len(replies) == 2 and replies[1] == 1, "the flip's reply, in the same EXEC"
    assert _found(kb, "hydraulic") == ["the hydraulic pump manual"]
    assert kb.queue.hlen(keys.pending_flips()) == 0, "nothing recorded"

    sent = []
    monkeypatch.setattr(Pipeline, "execute", lambda *a, **k: sent.append(a))
    monkeypatch.setattr(type(kb.queue), "execute_command", lambda *a, **k: sent.append(a))
    kb.apply_after("t1", staged)
    assert kb.apply_left() == 0
    assert sent == [], "no round trip after the commit"


def test_apart_the_multi_records_the_flip_and_it_lands_when_applied_after():
    queue, other = _redis(), _redis()
    kb = KnowledgeBase(queue, Settings(), other)
    assert kb.apart
    staged = _stage(kb, "t1", 1, ["the turbine inspection"])
    replies = _commit(kb, "t1", staged)
    assert len(replies) == 2, "the record, in the same EXEC"
    assert queue.hexists(keys.pending_flips(), "t1"), "recorded on the queue's Redis"
    assert _found(kb, "turbine") == [], "not flipped by the commit"

    kb.apply_after("t1", staged)
    assert _found(kb, "turbine") == ["the turbine inspection"]
    assert queue.hlen(keys.pending_flips()) == 0, "applied, then forgotten"
    assert not queue.keys("intake:kb:*"), "nothing of the knowledge base on the queue's Redis"


def test_apart_a_flip_whose_worker_died_is_applied_by_housekeeping():
    kb = KnowledgeBase(_redis(), Settings(), _redis())
    staged = _stage(kb, "t1", 1, ["the valve report"])
    _commit(kb, "t1", staged)  # … and the worker died before `apply_after`
    assert kb.apply_left() == 0, "its worker may still apply it"
    record = json.loads(kb.queue.hget(keys.pending_flips(), "t1"))
    kb.queue.hset(keys.pending_flips(), "t1", json.dumps({**record, "at": 0}))  # long ago
    assert kb.apply_left() == 1
    assert _found(kb, "valve") == ["the valve report"]


def test_the_chunk_quota_goes_with_the_watch_together_and_is_read_before_apart(kb):
    index.write(kb.redis, IndexedDocument(TENANT, "doc", "doc.txt", "t0", 1, ["a", "b"], None))
    quota = kb.chunk_quota(TENANT, "doc", 3)
    if kb.apart:
        assert (quota.watch, quota.check, quota.replaced) == ([], None, 2), "read already"
    else:
        assert quota.watch == index.quota_keys(TENANT, "doc") and quota.check is not None
        assert quota.replaced == 0, "not read yet: the commit's WATCH reads it"
        quota.check.judge([2, 2, 2])  # the tenant's, the document's, all tenants'
        assert quota.replaced == 2

    with pytest.raises(PermanentError, match="knowledge base is full"):
        full = kb.chunk_quota(TENANT, "other", 4)  # 2 held + 4 > 5
        if full.check is not None:
            full.check.judge([2, 0, 2])


def test_the_claim_reads_the_knowledge_base_itself_together_and_is_told_apart(kb):
    index.write(kb.redis, IndexedDocument(TENANT, "doc", "doc.txt", "t0", 1, ["a"] * 5, None))
    if not kb.apart:
        reads = kb.claim_reads(TENANT, ["doc", "new"])
        assert (reads.chunk_limit, reads.all_chunk_limit) == (5, 8)
        assert reads.indexed == [READ_IT_THERE, READ_IT_THERE]
        return
    with pytest.raises(LimitReached) as refused:
        kb.claim_reads(TENANT, ["doc", "new"])
    assert refused.value.limit == "knowledge_base_full"
    reads = kb.claim_reads("other", ["doc"])
    assert (reads.chunk_limit, reads.all_chunk_limit, reads.indexed) == ("", "", [""])


def test_a_delete_removes_in_its_multi_together_and_leaves_a_tombstone_apart(kb):
    first = _stage(kb, "t1", 1, ["the first edition"])
    _commit(kb, "t1", first)
    kb.apply_after("t1", first)
    second = _stage(kb, "t2", 2, ["the second edition"])
    _commit(kb, "t2", second)  # apart: recorded, not applied yet

    with kb.queue.pipeline() as pipe:
        pipe.watch("intake:somewhere", *kb.keys_on_queue(keys.kb_document(TENANT, "doc")))
        assert kb.indexed_task(pipe, TENANT, "doc") == (b"t1" if kb.apart else b"t2")
        pipe.multi()
        pipe.delete("intake:somewhere")
        had_chunks = kb.queue_removal(pipe, TENANT, "doc", ["t1", "t2"])
        pipe.zrem("intake:somewhere-else", "doc")
        replies = pipe.execute()
    assert had_chunks(replies) is True
    assert _found(kb, "edition") == []
    kb.apply_after("t2", second)
    assert _found(kb, "edition") == [], "a flip on its way is refused, not brought back"
    assert kb.queue.hlen(keys.pending_flips()) == 0


def test_what_a_multi_on_the_queue_s_redis_may_read_of_it(kb):
    names = (keys.kb_document(TENANT, "doc"), keys.kb_total_chunks())
    assert kb.keys_on_queue(*names) == ([] if kb.apart else list(names))


def test_one_object_per_settings_queue_and_profile_and_where_it_lives_from_the_settings():
    queue, settings = _redis(), Settings()
    base = KnowledgeBase.of(settings, queue, WORKER)
    assert KnowledgeBase.of(Settings(), queue, WORKER) is base, "built once"
    assert KnowledgeBase.of(settings, queue, COMMAND) is not base
    assert KnowledgeBase.of(settings, _redis(), WORKER) is not base
    assert not base.apart and base.redis is queue and base.replicas == []
    assert base.probes() == {}, "it answers as the queue's Redis does"
    assert not KnowledgeBase.of(Settings(kb_url=settings.redis_url), queue).apart

    elsewhere = Settings(
        kb_url="redis://127.0.0.1:1/3",
        kb_replica_urls="redis://127.0.0.1:1/4,redis://127.0.0.1:1/5",
    )
    apart = KnowledgeBase.of(elsewhere, queue, WORKER)  # no connection until a command
    assert apart.apart and apart.redis is not queue and len(apart.replicas) == 2
    assert apart.redis is KnowledgeBase.of(elsewhere, _redis(), WORKER).redis, "one pool"
    assert sorted(apart.probes()) == ["kb", "kb_replica_1", "kb_replica_2"]
    probe = apart.probes()["kb"].__self__
    assert probe is not apart.redis and probe.connection_pool.connection_kwargs["db"] == 3
    assert probe.connection_pool.connection_kwargs["socket_timeout"] == PROBE.socket_timeout
