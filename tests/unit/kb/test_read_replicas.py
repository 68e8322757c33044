"""Searches on read replicas (jobs.kb.read_replicas): turns, a replica that refuses left alone
while the primary answers, and a search that timed out on a replica not run again on the
primary. (tests/integration/kb/test_kb_apart.py runs them on a real replica, stalled by SIGSTOP.)"""

from __future__ import annotations

import pytest
from redis.exceptions import BusyLoadingError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from jobs.kb import read_replicas
from jobs.kb.read_replicas import ReadReplicas


class Named:
    """A stand-in for a Retriever: what a search reads is who answered."""

    def __init__(self, name: str, fails: BaseException | None = None) -> None:
        self.name, self.fails = name, fails

    def answer(self) -> str:
        if self.fails is not None:
            raise self.fails
        return self.name


def test_searches_take_turns_on_the_replicas_and_the_primary_only_without_any():
    readers = ReadReplicas(Named("primary"), [Named("r1"), Named("r2")])
    assert [readers.read(Named.answer) for _ in range(4)] == ["r1", "r2", "r1", "r2"]
    assert ReadReplicas(Named("primary"), []).read(Named.answer) == "primary"


@pytest.mark.parametrize(
    "failure", [RedisConnectionError("refused"), BusyLoadingError("loading its copy")]
)
def test_a_replica_that_does_not_answer_is_left_alone_while_the_primary_answers(
    monkeypatch, failure
):
    now = [100.0]
    monkeypatch.setattr(read_replicas.time, "monotonic", lambda: now[0])
    down = Named("r1", fails=failure)
    readers = ReadReplicas(Named("primary"), [down, Named("r2")])
    assert readers.read(Named.answer) == "primary"  # r1's turn: it fails, the primary answers
    assert readers.read(Named.answer) == "r2"
    down.fails = None
    assert readers.read(Named.answer) == "primary", "r1 is left alone for a while"
    now[0] += read_replicas.DOWN_SECONDS
    readers.read(Named.answer)
    assert readers.read(Named.answer) == "r1", "then it has its turns again"


class Counted(Named):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.reads = 0

    def answer(self) -> str:
        self.reads += 1
        return super().answer()


def test_a_search_that_timed_out_on_a_replica_is_not_run_again_on_the_primary(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(read_replicas.time, "monotonic", lambda: now[0])
    primary = Counted("primary")
    stalled = Counted("r1")
    stalled.fails = RedisTimeoutError("Timeout reading from 127.0.0.1:6380")
    readers = ReadReplicas(primary, [stalled])
    with pytest.raises(Exception) as refused:  # SearchTimedOut: 503 (webapp.errors)
        readers.read(Counted.answer)
    assert primary.reads == 0, "the timed-out search never reached the primary"
    assert type(refused.value).__name__ == "SearchTimedOut", refused.value
    assert refused.value.code == "search_timeout" and refused.value.retry_after > 0
    assert readers.read(Counted.answer) == "primary", "the next search: the replica left alone"
    now[0] += read_replicas.DOWN_SECONDS
    stalled.fails = None
    assert readers.read(Counted.answer) == "r1"


def test_other_errors_are_not_taken_for_a_lost_replica():
    readers = ReadReplicas(Named("primary"), [Named("r1", fails=ValueError("a bug"))])
    with pytest.raises(ValueError):
        readers.read(Named.answer)


def test_a_replicas_scripts_read_the_live_bits_with_the_read_only_bitfield():
    from jobs.kb.retrieval import _DENSE, _DENSE_RO, _LEXICAL, _LEXICAL_RO

    for script, replicas in ((_LEXICAL, _LEXICAL_RO), (_DENSE, _DENSE_RO)):
        assert "'BITFIELD'" in script.source and "'BITFIELD'" not in replicas.source
        assert "'BITFIELD_RO'" in replicas.source
