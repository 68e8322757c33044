"""The shared embedding budget (jobs.embedding.budget) on fakeredis, whose Lua has Redis TIME,
and the HTTP embedder's answers to Retry-After and to batches refused as too large
(tests/integration/embedding/test_embedding_budget.py proves both again across real worker
processes).

The window and the leases are made short here (constructor arguments; the settings keep the
minute) so that a test sees them pass.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import fakeredis
import numpy as np
import pytest

from jobs.core import keys
from jobs.core.failures import PermanentError, TransientError
from jobs.core.settings import Settings
from jobs.embedding.budget import EmbeddingBudget, NowGate, WaitingGate
from jobs.embedding.embedders import (
    MAX_RETRY_AFTER_SECONDS,
    BudgetUnavailable,
    HttpEmbedder,
    retry_after_seconds,
)
from jobs.kb.search import Searcher
from tests.unit.conftest import upload
from tests.unit.embedding.test_embedding import serving
from tests.unit.kb.test_index import MemoryVectors


@pytest.fixture
def redis():
    return fakeredis.FakeRedis()


@pytest.fixture
def service():
    """A loopback OpenAI-compatible service answering as its `respond` says."""
    with serving() as state:
        yield state


def admitted(budget: EmbeddingBudget, count: int) -> list:
    found = [budget.try_admit() for _ in range(count)]
    assert all(a.admitted for a in found), found
    return found


# -- requests per minute: a sliding-window log ---------------------------------------------------


def test_rpm_admits_n_in_a_window_then_says_how_long_to_wait(redis):
    """Timed on the clock, not hoped: each bound holds however late a sleep wakes up, as long
    as it wakes up within about a second."""
    budget = EmbeddingBudget(redis, rpm=3, window_seconds=2.0)
    began = time.monotonic()
    first = admitted(budget, 1)
    time.sleep(1.0)
    first += admitted(budget, 2)
    refused = budget.try_admit()
    left = 2.0 - (time.monotonic() - began)
    assert not refused.admitted and refused.reason == "rpm"
    assert left - 0.1 < refused.wait <= left + 0.05, "until the oldest leaves the window"
    assert redis.zcard(keys.embedding_window()) == 3, "a refused ask is not logged"
    time.sleep(refused.wait + 0.02)
    assert budget.try_admit().admitted, "the oldest left the window"
    assert not budget.try_admit().admitted, "…and only it: the other two are still in it"
    assert len({a.token for a in first}) == 3


def test_rpm_is_a_sliding_window_not_a_fixed_minute(redis):
    budget = EmbeddingBudget(redis, rpm=2, window_seconds=1.0)
    admitted(budget, 1)
    time.sleep(0.6)
    admitted(budget, 1)
    time.sleep(0.5)  # the first left the window, the second has not
    admitted(budget, 1)
    assert not budget.try_admit().admitted


def test_rpm_log_is_shared_by_every_client_of_the_redis(redis):
    server = fakeredis.FakeServer()
    one, two = fakeredis.FakeRedis(server=server), fakeredis.FakeRedis(server=server)
    admitted(EmbeddingBudget(one, rpm=2), 2)
    assert EmbeddingBudget(two, rpm=2).try_admit().reason == "rpm"


# -- requests in flight: a leased semaphore ------------------------------------------------------


def test_concurrency_holds_slots_until_released(redis):
    budget = EmbeddingBudget(redis, concurrency=2, lease_seconds=30)
    first, _ = admitted(budget, 2)
    refused = budget.try_admit()
    assert not refused.admitted and refused.reason == "concurrency"
    budget.release(first)
    assert budget.try_admit().admitted
    assert not budget.try_admit().admitted


def test_a_lease_frees_the_slot_of_a_holder_that_never_released(redis):
    budget = EmbeddingBudget(redis, concurrency=1, lease_seconds=0.3)
    admitted(budget, 1)  # a worker killed mid-request never releases
    refused = budget.try_admit()
    assert refused.reason == "concurrency" and 0 < refused.wait <= 0.3
    time.sleep(0.35)
    assert budget.try_admit().admitted


def test_both_limits_together(redis):
    budget = EmbeddingBudget(redis, rpm=2, concurrency=1)
    one = budget.try_admit()
    assert budget.try_admit().reason == "concurrency"
    budget.release(one)
    budget.release(budget.try_admit())
    assert budget.try_admit().reason == "rpm", "two went in this minute"


def test_lease_follows_the_request_timeout():
    budget = EmbeddingBudget.from_settings(
        fakeredis.FakeRedis(), Settings(embedding_concurrency=3, embedding_timeout=5)
    )
    assert (budget.rpm, budget.concurrency, budget.lease_ms) == (0, 3, 20_000)


# -- a pause asked for with Retry-After ----------------------------------------------------------


@pytest.mark.parametrize("limits", [{}, {"rpm": 100}, {"concurrency": 5}])
def test_a_pause_stops_every_request_limited_or_not(redis, limits):
    budget = EmbeddingBudget(redis, **limits)
    budget.hold_off(0.4, "HTTP 429")
    refused = budget.try_admit()
    assert (refused.admitted, refused.reason, refused.paused_by) == (False, "pause", "HTTP 429")
    assert 0.1 < refused.wait <= 0.4
    time.sleep(refused.wait + 0.02)
    assert budget.try_admit().admitted


def test_the_longest_pause_wins(redis):
    budget = EmbeddingBudget(redis)
    budget.hold_off(5, "HTTP 503")
    budget.hold_off(1, "HTTP 429")
    refused = budget.try_admit()
    assert refused.wait > 4 and refused.paused_by == "HTTP 503"
    budget.hold_off(9, "HTTP 429")
    assert budget.try_admit().wait > 8


def test_unlimited_runs_no_script_and_keeps_no_log(redis):
    budget = EmbeddingBudget(redis)
    assert not budget.limited
    for _ in range(50):
        assert budget.try_admit().admitted
    assert redis.keys("intake:embedding:*") == []


# -- the gates ---------------------------------------------------------------------------------


def test_waiting_gate_waits_tells_and_releases(redis):
    budget = EmbeddingBudget(redis, rpm=1, concurrency=1, window_seconds=0.5)
    waits = []
    gate = WaitingGate(budget, on_wait=waits.append)
    with gate.admit():
        assert redis.zcard(keys.embedding_holders()) == 1
    assert redis.zcard(keys.embedding_holders()) == 0, "released after the block"
    started = time.monotonic()
    with gate.admit():
        pass
    assert time.monotonic() - started >= 0.4
    assert waits[-1] is None, "the end of the wait is told"
    texts = [w.text for w in waits if w is not None]
    assert texts and all(
        t.startswith("Waiting for the embedding budget (1 requests/min): ") for t in texts
    ), texts


def test_waiting_gate_says_what_a_slot_and_a_pause_wait_for(redis):
    budget = EmbeddingBudget(redis, concurrency=1)
    budget.try_admit()
    refused = budget.try_admit()
    assert budget.describe(refused, 12.4) == (
        "Waiting for the embedding budget (1 request at a time): 12 s so far"
    )
    budget.hold_off(2.5, "HTTP 429")
    assert budget.describe(budget.try_admit(), 0) == (
        "Waiting for the embedding service, which asked for a pause (HTTP 429): 3 s"
    )


def test_waiting_gate_never_waits_past_its_deadline(redis):
    budget = EmbeddingBudget(redis)
    budget.hold_off(30, "HTTP 429")
    gate = WaitingGate(budget, deadline=time.monotonic() + 5)
    started = time.monotonic()
    with pytest.raises(BudgetUnavailable) as caught, gate.admit():
        pass
    assert time.monotonic() - started < 1, "it fails at once, not at the deadline"
    error = caught.value
    assert error.transient and error.code == "embedding_budget"
    assert 29 < error.retry_after <= 30, "the next attempt is scheduled after the pause"
    assert "INTAKE_JOB_TIMEOUT" in error.message and "kept" in error.message


def test_now_gate_never_waits(redis):
    budget = EmbeddingBudget(redis, concurrency=1)
    with NowGate(budget).admit():
        started = time.monotonic()
        with pytest.raises(BudgetUnavailable) as caught, NowGate(budget).admit():
            pass
        assert time.monotonic() - started < 1, "refused at once, not after a wait"
    assert "in use" in caught.value.message
    with NowGate(budget).admit():
        pass  # released: free again
    budget.hold_off(3, "HTTP 429")
    with pytest.raises(BudgetUnavailable) as caught, NowGate(budget).admit():
        pass
    assert caught.value.message == "the embedding service asked for a pause (HTTP 429), 3 s more"


# -- Retry-After -------------------------------------------------------------------------------


def test_retry_after_seconds_and_dates():
    now = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(" 120 ") == 120.0
    date = format_datetime(now + timedelta(seconds=90), usegmt=True)
    assert retry_after_seconds(date, now=now.timestamp()) == pytest.approx(90)
    past = format_datetime(now - timedelta(seconds=90), usegmt=True)
    assert retry_after_seconds(past, now=now.timestamp()) == 0.0
    for unreadable in (None, "", "soon", "-5", "1.5", "Wed, 99 Foo 2030 99:00:00 GMT"):
        assert retry_after_seconds(unreadable) is None, unreadable


def limited_once(service, status, retry_after, then=None):
    """The next request gets `status` with `retry_after`, then the normal answers."""
    answers = [(status, {"error": {"message": "slow down"}}, {"Retry-After": retry_after})]

    def respond(body):
        return answers.pop(0) if answers else (then or service.embeddings)(body)

    service.respond = respond


@pytest.mark.parametrize("status", [429, 503])
def test_a_retry_after_is_waited_out_and_the_request_resent(service, redis, status):
    limited_once(service, status, "1")
    embedder = HttpEmbedder(service.url, "m")
    gate = WaitingGate(EmbeddingBudget(redis), on_wait=lambda wait: None)
    started = time.monotonic()
    vectors = embedder.embed(["text 1", "text 2"], gate=gate)
    assert vectors.shape == (2, 3) and len(service.calls) == 2
    assert time.monotonic() - started >= 0.95, "the resend waited for the pause"


def test_without_a_gate_a_retry_after_is_still_waited_out(service):
    limited_once(service, 503, "1")
    started = time.monotonic()
    assert HttpEmbedder(service.url, "m").embed(["text 1"]).shape == (1, 3)
    assert time.monotonic() - started >= 0.95 and len(service.calls) == 2


def test_a_retry_after_is_told_to_everyone(service, redis):
    limited_once(service, 429, "30")
    with pytest.raises(BudgetUnavailable):
        HttpEmbedder(service.url, "m").embed(["text 1"], gate=NowGate(EmbeddingBudget(redis)))
    assert redis.get(keys.embedding_pause()) == b"HTTP 429"
    assert 29_000 < redis.pttl(keys.embedding_pause()) <= 30_000
    assert len(service.calls) == 1, "the search's gate never resends"


def test_a_retry_after_too_long_to_wait_fails_the_attempt_with_it(service, redis):
    limited_once(service, 429, str(int(MAX_RETRY_AFTER_SECONDS) + 60))
    with pytest.raises(TransientError) as caught:
        HttpEmbedder(service.url, "m").embed(["text 1"], gate=WaitingGate(EmbeddingBudget(redis)))
    error = caught.value
    assert error.code == "embedding_rate_limited" and error.retry_after == 360
    assert "wait 360 s" in error.message
    assert redis.pttl(keys.embedding_pause()) > 350_000, "still told to everyone"


def test_resends_are_bounded(service, redis):
    service.respond = lambda body: (429, {"error": {"message": "no"}}, {"Retry-After": "0"})
    with pytest.raises(TransientError) as caught:
        HttpEmbedder(service.url, "m").embed(["text 1"], gate=WaitingGate(EmbeddingBudget(redis)))
    assert caught.value.code == "embedding_rate_limited"
    assert len(service.calls) == 6, "the request and 5 resends"


def test_a_429_without_retry_after_stays_a_transient_failure(service, redis):
    service.respond = lambda body: (429, {"error": {"message": "busy"}})
    with pytest.raises(TransientError) as caught:
        HttpEmbedder(service.url, "m").embed(["text 1"], gate=WaitingGate(EmbeddingBudget(redis)))
    assert caught.value.retry_after is None and len(service.calls) == 1


# -- batches refused as too large --------------------------------------------------------------

REFUSALS = {
    "413": (413, {"error": {"message": "Request Entity Too Large"}}),
    "openai": (
        400,
        {
            "error": {
                "message": "'$.input' is invalid. Please check the API reference: "
                "https://platform.openai.com/docs/api-reference."
            }
        },
    ),
    "openai-array": (
        400,
        {
            "error": {
                "message": "Invalid 'input': array too long. Expected an "
                "array with maximum length 2048."
            }
        },
    ),
    "voyage": (400, {"detail": "too many inputs"}),
    "voyage-batch": (
        400,
        {"error": {"message": "The batch size limit is 8. Your batch size is 32."}},
    ),
    "cohere": (400, {"message": "invalid request: total number of texts must be at most 8"}),
    "dashscope": (
        400,
        {
            "error": {
                "message": "batch size is invalid, it should not be larger than 8.: input.contents"
            }
        },
    ),
    "gemini": (400, {"error": {"message": "at most 8 requests can be in one batch"}}),
}


def refusing_over(service, limit, refusal):
    def respond(body):
        if len(body["input"]) > limit:
            return refusal
        return service.embeddings(body)

    service.respond = respond


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_a_batch_refused_as_too_large_is_halved_until_taken(service, redis, name):
    refusing_over(service, 8, REFUSALS[name])
    embedder = HttpEmbedder(service.url, "m", batch_size=32)
    gate = WaitingGate(EmbeddingBudget(redis))
    vectors = embedder.embed([f"text {i}" for i in range(40)], gate=gate)
    assert np.allclose(vectors[:, 0] / vectors[:, 1], np.arange(40)), "all, in order"
    sizes = [len(call["body"]["input"]) for call in service.calls]
    assert sizes == [32, 16, 8, 8, 8, 8, 8], sizes
    assert embedder.batch_size == 32, "the pipeline's batches (and checkpoints) do not change"
    assert redis.get(keys.embedding_batch_limit()) == b"8", "every process sends no more"


def test_a_learnt_batch_limit_is_used_by_another_process(service, redis):
    redis.set(keys.embedding_batch_limit(), 8)
    refusing_over(service, 8, REFUSALS["413"])
    HttpEmbedder(service.url, "m", batch_size=32).embed(
        [f"text {i}" for i in range(20)], gate=WaitingGate(EmbeddingBudget(redis))
    )
    assert [len(call["body"]["input"]) for call in service.calls] == [8, 8, 4]


def test_halving_ends_at_one_text_with_a_clear_failure(service, redis):
    service.respond = lambda body: REFUSALS["413"]
    with pytest.raises(PermanentError) as caught:
        HttpEmbedder(service.url, "m", batch_size=4).embed(["text 1", "text 2", "text 3"])
    assert [len(call["body"]["input"]) for call in service.calls] == [3, 1]
    error = caught.value
    assert error.code == "embedding_rejected" and error.retryable
    assert "even with a single text" in error.message and "INTAKE_CHUNK_SIZE" in error.message
    assert redis.get(keys.embedding_batch_limit()) is None


def test_another_400_is_not_taken_for_too_many_inputs(service):
    service.respond = lambda body: (400, {"error": {"message": "The model `m` does not exist"}})
    with pytest.raises(PermanentError):
        HttpEmbedder(service.url, "m").embed(["text 1", "text 2"])
    assert len(service.calls) == 1


def test_the_batch_size_is_a_setting():
    from jobs.embedding.embedders import make_embedder

    embedder = make_embedder(
        Settings(embedding_url="http://127.0.0.1:9/v1", embedding_batch_size=16)
    )
    assert (embedder.batch_size, embedder.request_size) == (16, 16)
    assert (
        Settings.from_mapping(
            {
                "INTAKE_EMBEDDING_BATCH_SIZE": "8",
                "INTAKE_EMBEDDING_RPM": "60",
                "INTAKE_EMBEDDING_CONCURRENCY": "4",
            }
        ).embedding_rpm
        == 60
    )
    for bad in (
        {"INTAKE_EMBEDDING_BATCH_SIZE": "0"},
        {"INTAKE_EMBEDDING_RPM": "-1"},
        {"INTAKE_EMBEDDING_CONCURRENCY": "-2"},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Settings.from_mapping(bad)


# -- in the pipeline -------------------------------------------------------------------------


def test_a_long_retry_after_schedules_the_next_attempt_after_it(
    client, run_jobs, redis, service, monkeypatch
):
    monkeypatch.setenv("INTAKE_EMBEDDING_URL", service.url)
    limited_once(service, 429, "900")
    task_id = upload(client, ("a.txt", b"Words to embed. " * 20)).get_json()["tasks"][0]["id"]
    run_jobs()
    task = client.get(f"/api/tasks/{task_id}").get_json()
    assert task["status"] == "retrying" and task["attempts"] == 1, task
    assert task["error"]["type"] == "embedding_rate_limited", task
    waits = datetime.fromisoformat(task["next_attempt_at"]) - datetime.fromisoformat(
        task["updated_at"]
    )
    assert 899 <= waits.total_seconds() <= 901, task


def searcher_of(redis, service, **limits) -> Searcher:
    embedder = HttpEmbedder(service.url, "m", timeout=2)
    return Searcher(
        redis, embedder, vectors=MemoryVectors(), budget=EmbeddingBudget(redis, **limits)
    )


def test_search_answers_by_words_at_once_during_a_pause(redis, service):
    EmbeddingBudget(redis).hold_off(20, "HTTP 429")
    started = time.monotonic()
    answer = searcher_of(redis, service).search("default", "anything")
    assert time.monotonic() - started < 1
    assert answer.mode == "lexical", answer
    assert "asked for a pause (HTTP 429)" in answer.notice, answer
    assert service.calls == [], "no request during the pause"
    assert redis.get(keys.search_breaker()) is None, "a pause is no failure: the breaker stays"


def test_search_takes_a_free_place_or_answers_by_words(redis, service):
    searcher = searcher_of(redis, service, concurrency=1)
    assert searcher.search("default", "text 1").mode == "hybrid"
    assert redis.zcard(keys.embedding_holders()) == 0, "its slot was released"
    EmbeddingBudget(redis, concurrency=1).try_admit()  # a worker holds the only slot
    answer = searcher.search("default", "text 1")
    assert answer.mode == "lexical" and "is in use" in answer.notice, answer
    assert len(service.calls) == 1


def test_search_told_to_pause_tells_everyone_and_answers_by_words(redis, service):
    limited_once(service, 429, "7")
    answer = searcher_of(redis, service).search("default", "text 1")
    assert answer.mode == "lexical" and "HTTP 429" in answer.notice, answer
    assert redis.pttl(keys.embedding_pause()) > 6000, "every worker waits for it too"
    assert redis.get(keys.search_breaker()) is None
