"""A knowledge base on a Redis of its own (jobs.kb.pending_flips), on two fakeredis servers: a
flip recorded with the task's `succeeded` is applied once whoever applies it, one its worker
did not live to apply is applied by housekeeping, and one still on its way when the document
is deleted is refused by the delete's tombstone. (tests/integration/kb/test_kb_apart.py runs the
whole service that way on two real redis-servers.)"""

from __future__ import annotations

import fakeredis
import pytest

from jobs.core import keys
from jobs.kb import index, pending_flips
from jobs.kb.index import IndexedDocument
from jobs.kb.retrieval import Retriever
from jobs.text.terms import TERMS

TENANT = "default"


@pytest.fixture
def queue():
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


@pytest.fixture
def kb():
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


def stage(kb, task_id: str, version: int, texts: list[str]) -> index.StagedDocument:
    return index.stage(kb, IndexedDocument(TENANT, "doc", "doc.txt", task_id, version, texts, None))


def committed(queue, task_id: str, staged: index.StagedDocument) -> None:
    """What an attempt's commit writes on the queue's Redis beside its `succeeded`."""
    pipe = queue.pipeline()
    pending_flips.queue_record(pipe, task_id, staged)
    pipe.execute()


def found(kb, word: str) -> list[str]:
    answer = Retriever(kb).lexical(TENANT, TERMS.count_query(word), 10)
    return [hit["text"] for hit in answer.hits]


def test_a_flip_is_searchable_once_applied_and_applying_it_again_changes_nothing(queue, kb):
    staged = stage(kb, "t1", 1, ["the hydraulic pump manual"])
    committed(queue, "t1", staged)
    assert found(kb, "hydraulic") == [], "staged, not yet flipped"

    assert pending_flips.apply(kb, queue, "t1", staged) is True
    assert found(kb, "hydraulic") == ["the hydraulic pump manual"]
    assert queue.hlen(keys.pending_flips()) == 0
    assert pending_flips.apply(kb, queue, "t1", staged) is True  # housekeeping, say
    assert int(kb.get(keys.tenant_chunks(TENANT))) == 1, "counted once"
    assert not queue.keys("intake:kb:*"), "nothing of the knowledge base on the queue's Redis"


def test_housekeeping_applies_a_flip_whose_worker_died_once_it_is_old_enough(queue, kb):
    staged = stage(kb, "t1", 1, ["the turbine inspection"])
    committed(queue, "t1", staged)  # … and the worker died before applying it

    assert pending_flips.apply_left(kb, queue) == 0, "its worker may still apply it"
    assert found(kb, "turbine") == []
    assert pending_flips.apply_left(kb, queue, older_than=0) == 1
    assert found(kb, "turbine") == ["the turbine inspection"]
    assert queue.hlen(keys.pending_flips()) == 0


def test_a_delete_refuses_a_flip_on_its_way_and_a_later_upload_is_indexed(queue, kb):
    first = stage(kb, "t1", 1, ["the valve report, first edition"])
    assert pending_flips.apply(kb, queue, "t1", first)
    second = stage(kb, "t2", 2, ["the valve report, second edition"])
    committed(queue, "t2", second)
    record = queue.hget(keys.pending_flips(), "t2")  # read by housekeeping, say …

    # … when the document is deleted: the delete forgets the record and leaves a tombstone.
    pipe = queue.pipeline()
    pending_flips.queue_forget(pipe, ["t2"])
    pipe.execute()
    assert index.removal(kb, TENANT, "doc", tombstone=True) == 1
    queue.hset(keys.pending_flips(), "t2", record)
    assert pending_flips.apply_left(kb, queue, older_than=0) == 1
    assert pending_flips.apply(kb, queue, "t2", second) is False, "staged before the delete"
    assert found(kb, "valve") == []
    assert int(kb.get(keys.tenant_chunks(TENANT))) == 0
    assert kb.zcard(keys.kb_staged(TENANT)) == 0, "the refused run is garbage now"

    third = stage(kb, "t3", 3, ["the valve report, third edition"])
    assert pending_flips.apply(kb, queue, "t3", third) is True
    assert found(kb, "valve") == ["the valve report, third edition"]
    assert int(kb.get(keys.tenant_chunks(TENANT))) == 1
