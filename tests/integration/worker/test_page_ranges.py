"""The record of a scan's page ranges (jobs.worker.page_ranges) and its rules, against a real
redis-server: the claims, pages and saves of several readers, each one a PageRanges of its own
(a reader's name is its RQ job id), with no worker at all.

Why real Redis: every rule lives in a Lua script judged against the task hash and Redis's own
clock (TIME), so fakeredis or mocks would test another implementation. Each test writes the two
fields of its task that the scripts read (STATUS, JOB_ID) for a fresh task id, on a logical
database no other test uses (a cancel counts finished tasks, which other tests read on DB 0).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import pytest
from redis import Redis
from rq.job import Job

from jobs.core import keys
from jobs.core.failures import CancelRequested
from jobs.core.settings import Settings
from jobs.tasks import lifecycle, states
from jobs.tasks import record as task_record
from jobs.tasks.attempts import Superseded
from jobs.worker import page_ranges
from jobs.worker.page_ranges import MAX_TRIES, Claimed, Failed, Finished, PageRanges, Waiting, cut
from jobs.worker.scan_reading import RANGE_PAGES, range_failure
from tests.integration.helpers import poll

pytestmark = pytest.mark.integration

DATABASE = 15  # nothing else uses this one
TTL = 3600
PAGES = list(range(1, 13))
PLAN = cut(PAGES, RANGE_PAGES)  # three ranges: pages 1–4, 5–8, 9–12
LAPSE = 1  # seconds a lost reader's claim lasts here (CLAIM_SECONDS is 20)
LAPSE_BOUND = LAPSE + 5  # … and how long another reader may wait for it, on a loaded machine
TENANT = "ranges-tenant"


@pytest.fixture
def connection(redis_server) -> Iterator[Redis]:
    client = redis_server.client(db=DATABASE)
    yield client
    client.close()


@pytest.fixture
def task_id(connection: Redis) -> Iterator[str]:
    """A fresh task, running its first run (whose job id is the task's id)."""
    task_id = f"ranges-{secrets.token_hex(8)}"
    connection.hset(
        keys.task(task_id),
        mapping={
            task_record.TENANT: TENANT,
            task_record.STATUS: states.RUNNING,
            task_record.JOB_ID: task_id,
        },
    )
    yield task_id
    pipe = connection.pipeline()
    page_ranges.delete(pipe, task_id)
    pipe.delete(keys.task(task_id))
    pipe.execute()


def reader(
    connection: Redis,
    task_id: str,
    name: str,
    *,
    run: str | None = None,
    claim_seconds: float | None = None,
) -> PageRanges:
    """Reader `name` of the task's run `run` (its first, by default)."""
    ranges = PageRanges(connection, task_id, run or task_id, name, ttl_seconds=TTL)
    if claim_seconds is not None:
        ranges.claim_seconds = claim_seconds
    return ranges


def planned(connection: Redis, task_id: str, plan: list[list[int]] = PLAN) -> PageRanges:
    """The task's own job (reader = run = the task's id), having planned the ranges."""
    own = reader(connection, task_id, task_id)
    own.plan(plan)
    return own


def set_status(connection: Redis, task_id: str, status: str, **fields: str) -> None:
    connection.hset(keys.task(task_id), mapping={task_record.STATUS: status, **fields})


def claimed_by_another(ranges: PageRanges) -> Claimed:
    """Poll `ranges.claim()` until it gets a range (a lost reader's claim lapses first)."""
    return poll(
        ranges.claim,
        lambda outcome: isinstance(outcome, Claimed),
        timeout=LAPSE_BOUND,
        interval=0.05,
        message="a lapsed claim claimed again",
    )


def wait_until_lapsed(connection: Redis, task_id: str, index: int) -> None:
    """Until Redis's clock (the one the scripts judge claims by) is past range `index`'s claim."""
    raw = connection.hget(keys.page_ranges(task_id), f"claim:{index}").decode()
    expires = float(raw.rsplit("|", 1)[1])
    poll(
        connection.time,
        lambda t: t[0] + t[1] / 1e6 > expires,
        timeout=LAPSE_BOUND,
        message=f"the claim of range {index} lapsed",
    )


def reply(index: int) -> bytes:
    return f"reply of range {index}".encode()


def listed_readers(connection: Redis, task_id: str) -> dict[str, int]:
    return {
        k.decode(): int(v) for k, v in connection.hgetall(keys.page_range_readers(task_id)).items()
    }


# 1. Claims, waits and the end of the reading.


def test_each_range_is_handed_out_once_in_order_and_the_reading_ends_when_all_are_saved(
    connection, task_id
):
    """Every free worker reads a part of the scan: no range may be read twice, none skipped,
    and the task's job must know when to wait and when to put the pages together."""
    own = planned(connection, task_id)
    first, second = reader(connection, task_id, "first"), reader(connection, task_id, "second")

    assert own.claim() == Claimed(0, 0)
    assert first.claim() == Claimed(1, 0)
    assert second.claim() == Claimed(2, 0)
    assert listed_readers(connection, task_id) == {task_id: 0, "first": 1, "second": 2}
    assert own.claim() == Waiting(0), "all ranges are held: nothing is handed out twice"
    assert first.claim() == Waiting(0)

    for ranges, index in ((second, 2), (own, 0), (first, 1)):  # saved in any order
        ranges.save(index, len(PLAN[index]), reply(index))
    assert own.claim() == Finished(len(PAGES))
    assert reader(connection, task_id, "late").claim() == Finished(len(PAGES))
    assert own.replies() == [reply(0), reply(1), reply(2)], "the replies come back in order"
    assert listed_readers(connection, task_id) == {}, "a reader that saved is no longer listed"


def test_a_reader_told_to_wait_wakes_when_a_range_is_saved(connection, task_id):
    """The task's job waits for the last ranges on the done list, not by polling: a save must
    wake it at once."""
    own = planned(connection, task_id, [[1, 2, 3, 4]])
    other = reader(connection, task_id, "other")
    assert other.claim() == Claimed(0, 0)
    assert own.claim() == Waiting(0)
    other.save(0, 4, reply(0))
    began = time.monotonic()
    own.wait(5.0)
    assert time.monotonic() - began < 4.0, "the save did not wake the waiting reader"
    assert connection.llen(keys.page_ranges_done(task_id)) == 0
    assert own.claim() == Finished(4)


# 2. A lost reader's range is read again.


def test_a_range_whose_reader_was_lost_is_claimed_by_another_once_its_claim_lapses(
    connection, task_id
):
    """A worker may be killed mid-range: its range must be read by someone else after the
    claim lapses (and not before, or two workers would read it at once)."""
    planned(connection, task_id, [[1, 2, 3, 4]])
    lost = reader(connection, task_id, "lost", claim_seconds=LAPSE)
    assert lost.claim() == Claimed(0, 0)
    lost.page_started(0, 2)

    taker = reader(connection, task_id, "taker")
    assert taker.claim() == Waiting(2), "a live claim is not taken"
    assert claimed_by_another(taker) == Claimed(0, 0), "the lost reader's pages count no more"
    assert listed_readers(connection, task_id)["taker"] == 0
    with pytest.raises(Superseded):
        lost.page_started(0, 3)  # the lost reader, back to life, stops at its next page
    assert taker.page_started(0, 1) == 1


def test_a_slow_reader_whose_claim_lapsed_keeps_its_range_if_nobody_took_it(connection, task_id):
    """On a loaded machine a heartbeat may come late: the range stays its reader's as long as
    nobody else claimed it, and its renewal holds off the others again."""
    planned(connection, task_id, [[1, 2, 3, 4]])
    slow = reader(connection, task_id, "slow", claim_seconds=LAPSE)
    assert slow.claim() == Claimed(0, 0)
    wait_until_lapsed(connection, task_id, 0)
    slow.claim_seconds = page_ranges.CLAIM_SECONDS  # its heartbeat renews as usual
    assert slow.page_started(0, 1) == 1, "the lapsed claim is renewed"
    assert reader(connection, task_id, "other").claim() == Waiting(1)


def test_a_range_let_go_without_a_failure_is_claimed_again_at_once(connection, task_id):
    """A range job that fails for a reason of its own (not the page's) lets its range go: the
    next reader must not wait for the claim to lapse."""
    planned(connection, task_id, [[1, 2, 3, 4]])
    first = reader(connection, task_id, "first")
    assert first.claim() == Claimed(0, 0)
    first.release(0)
    assert "first" not in listed_readers(connection, task_id)
    assert reader(connection, task_id, "second").claim() == Claimed(0, 0)


# 3. A range that kills its readers fails the task.


def test_a_range_that_loses_max_tries_readers_fails_the_task_with_its_pages(connection, task_id):
    """A page that kills every reader (out of memory, a crash) would otherwise be read for
    ever: after MAX_TRIES lost readers the range fails, and the person is told which pages."""
    planned(connection, task_id, [[5, 6, 7, 8]])
    first = reader(connection, task_id, "lost-1", claim_seconds=LAPSE)
    assert first.claim() == Claimed(0, 0)
    for n in range(2, MAX_TRIES + 1):
        assert claimed_by_another(
            reader(connection, task_id, f"lost-{n}", claim_seconds=LAPSE)
        ) == Claimed(0, 0)

    last = reader(connection, task_id, "next")
    outcome = poll(
        last.claim,
        lambda o: not isinstance(o, Waiting),
        timeout=LAPSE_BOUND,
        message="the last lost reader's claim lapsed",
    )
    assert outcome == Failed(0, "reader_lost", None)
    assert reader(connection, task_id, task_id).claim() == outcome, "for every reader after"

    error = range_failure(outcome, [5, 6, 7, 8], Settings())
    assert error.code == "worker_lost" and error.retryable
    assert error.message.startswith("OCR could not read pages 5–8: "), error.message
    assert f"lost {MAX_TRIES} times" in error.message


# 4. A range that fails for good fails every reader's next claim.


def test_a_range_released_with_a_failure_fails_the_next_claim_of_any_reader(connection, task_id):
    """A page past OCR's deadline fails the task: the task's job learns it at its next claim,
    with the code and words the range's reader gave, even while other ranges are unclaimed."""
    own = planned(connection, task_id)
    failing = reader(connection, task_id, "failing")
    assert failing.claim() == Claimed(0, 0)
    message = "Pages 1–4: OCR took longer than 0.01 s on page 2."
    failing.release(0, ("parse_timeout", message))
    assert "failing" not in listed_readers(connection, task_id)

    outcome = own.claim()
    assert outcome == Failed(0, "parse_timeout", message)
    assert reader(connection, task_id, "another").claim() == outcome
    error = range_failure(outcome, PLAN[0], Settings())
    assert (error.code, error.message) == ("parse_timeout", message), "its pages named once"


# 5. Only the task's current run reads, and only while it runs.


def test_a_cancel_stops_every_reader_at_its_next_claim_page_or_save(connection, task_id):
    """A cancel must stop the reading within a page, and nothing read after it may be kept."""
    own = planned(connection, task_id)
    other = reader(connection, task_id, "other")
    assert own.claim() == Claimed(0, 0)
    set_status(connection, task_id, states.CANCELED)
    with pytest.raises(CancelRequested):
        other.claim()
    with pytest.raises(CancelRequested):
        own.page_started(0, 1)
    with pytest.raises(CancelRequested):
        own.save(0, 4, reply(0))
    assert connection.hget(keys.page_ranges(task_id), "text:0") is None


@pytest.mark.parametrize("new_status", [states.PENDING, states.RUNNING])
def test_the_readers_of_a_run_replaced_by_a_retry_are_superseded(connection, task_id, new_status):
    """A Retry starts a new run with a job of its own: the old run's readers must not read
    for it, pending or started, nor write what they read into it."""
    old = planned(connection, task_id)
    assert old.claim() == Claimed(0, 0)
    new_run = lifecycle.run_job_id(task_id, 1)
    set_status(connection, task_id, new_status, **{task_record.JOB_ID: new_run})
    for call in (old.claim, lambda: old.page_started(0, 1), lambda: old.save(0, 4, reply(0))):
        with pytest.raises(Superseded):
            call()
    with pytest.raises(Superseded):
        reader(connection, task_id, "old-range-job").claim()
    if new_status == states.RUNNING:
        assert reader(connection, task_id, new_run, run=new_run).claim() == Claimed(1, 0)


def test_the_readers_of_a_deleted_task_are_superseded(connection, task_id):
    """A deleted document's task is gone: its readers stop, and their pages go nowhere."""
    own = planned(connection, task_id)
    assert own.claim() == Claimed(0, 0)
    connection.delete(keys.task(task_id))
    for call in (own.claim, lambda: own.page_started(0, 1), lambda: own.save(0, 4, reply(0))):
        with pytest.raises(Superseded, match="gone"):
            call()
    assert connection.hget(keys.page_ranges(task_id), "text:0") is None


def test_a_first_run_without_a_recorded_job_id_is_read_by_its_own_readers_only(connection, task_id):
    """A task's first run has the task's id as its job id, recorded or not: its readers must
    read, and a reader naming any other run must not."""
    connection.hdel(keys.task(task_id), task_record.JOB_ID)
    assert planned(connection, task_id).claim() == Claimed(0, 0)
    with pytest.raises(Superseded):
        reader(connection, task_id, "stray", run="someone-else").claim()


def test_a_retrying_task_keeps_what_its_readers_read_but_hands_out_no_range(connection, task_id):
    """Between two attempts of the task's job, the range jobs still reading finish their
    ranges and the next attempt uses them; but no new range is read for an attempt not
    started yet."""
    own = planned(connection, task_id)
    other = reader(connection, task_id, "other")
    assert own.claim() == Claimed(0, 0)
    assert other.claim() == Claimed(1, 0)
    set_status(connection, task_id, states.RETRYING)
    assert other.page_started(1, 2) == 2
    assert other.save(1, 4, reply(1)) == 1
    for ranges in (own, reader(connection, task_id, "third")):
        with pytest.raises(Superseded, match="retrying"):
            ranges.claim()

    set_status(connection, task_id, states.RUNNING)  # the next attempt
    again = planned(connection, task_id)
    assert again.replies()[1] == reply(1), "the range read while retrying is kept"
    assert reader(connection, task_id, "third").claim() == Claimed(2, 4)


# 6. Pages read, and a reader whose range was taken over.


def test_pages_started_count_over_every_range(connection, task_id):
    """The task shows "OCR page 7 of 12" over all ranges: each renewal returns the pages read
    so far by every reader, saved ranges included."""
    own = planned(connection, task_id)
    other = reader(connection, task_id, "other")
    assert own.claim() == Claimed(0, 0)
    assert other.claim() == Claimed(1, 0)
    assert own.page_started(0, 2) == 2
    assert other.page_started(1, 3) == 5
    own.save(0, 4, reply(0))
    assert other.page_started(1, 3) == 7
    assert own.claim() == Claimed(2, 7)


def test_a_reader_whose_range_was_taken_over_is_superseded_at_its_next_page(connection, task_id):
    """Two readers must never both report the same range's pages: the one whose claim
    lapsed and was taken stops."""
    planned(connection, task_id, [[1, 2, 3, 4]])
    slow = reader(connection, task_id, "slow", claim_seconds=LAPSE)
    assert slow.claim() == Claimed(0, 0)
    taker = reader(connection, task_id, "taker")
    claimed_by_another(taker)
    with pytest.raises(Superseded, match="another reader"):
        slow.page_started(0, 1)
    taker.save(0, 4, reply(0))
    with pytest.raises(Superseded):
        slow.page_started(0, 2)  # the range saved by the other: the slow one stops too


# 7. A plan kept, or started over.


def test_planning_the_same_ranges_again_keeps_what_was_read_and_other_ranges_start_over(
    connection, task_id
):
    """A retry of the task reads only the ranges not read yet; but a reading cut otherwise
    (another RANGE_PAGES, another file) must not mix its ranges with the old ones."""
    own = planned(connection, task_id)
    assert own.claim() == Claimed(0, 0)
    own.save(0, 4, reply(0))

    retried = planned(connection, task_id)
    assert retried.replies() == [reply(0), None, None]
    assert retried.claim() == Claimed(1, 4)

    other_plan = cut(PAGES, 6)
    started_over = planned(connection, task_id, other_plan)
    assert started_over.ranges() == other_plan
    assert started_over.replies() == [None, None]
    assert started_over.claim() == Claimed(0, 0)
    assert connection.llen(keys.page_ranges_done(task_id)) == 0


# 8. What a save says is left.


def test_a_save_tells_how_many_ranges_are_left_unclaimed(connection, task_id):
    """A range job enqueues its successor only while ranges are left to claim: none more
    than needed (a range held is not left), and none missing (a lapsed claim is)."""
    own = planned(connection, task_id, cut(PAGES, 3))  # four ranges of three pages
    other = reader(connection, task_id, "other")
    lost = reader(connection, task_id, "lost", claim_seconds=LAPSE)
    assert own.claim() == Claimed(0, 0)
    assert other.claim() == Claimed(1, 0)
    assert own.save(0, 3, reply(0)) == 2, "ranges 2 and 3; range 1 is held"
    assert lost.claim() == Claimed(2, 3)
    assert own.claim() == Claimed(3, 3)
    assert other.save(1, 3, reply(1)) == 0, "ranges 2 and 3 are held"
    wait_until_lapsed(connection, task_id, 2)
    assert own.save(3, 3, reply(3)) == 1, "the lost reader's range is left to claim"
    assert own.claim() == Claimed(2, 9)
    assert own.save(2, 3, reply(2)) == 0


# 9. A cancel stops the range jobs too.


def _job(connection: Redis, job_id: str) -> None:
    """An RQ job record as a started job leaves it (its worker named): what RQ's stop command
    looks up."""
    job = Job.create("builtins.print", connection=connection, id=job_id)
    job.worker_name = f"worker-of-{job_id}"
    job.save()


@pytest.fixture
def cleanup_jobs(connection: Redis) -> Iterator[list[str]]:
    created: list[str] = []
    yield created
    for job_id in created:
        connection.delete(Job.key_for(job_id))
    if created:
        connection.srem(keys.canceling(), *created)


def test_a_cancel_stops_every_reader_of_the_scan(connection, task_id, cleanup_jobs):
    """A cancel must free every worker reading a part of the scan, not only the task's own
    job: each reader is named in the canceling set its worker checks."""
    readers = ["range-job-a", "range-job-b"]
    cleanup_jobs += [task_id, *readers]
    for job_id in cleanup_jobs:
        _job(connection, job_id)
    own = planned(connection, task_id)
    for ranges in (own, *(reader(connection, task_id, name) for name in readers)):
        assert isinstance(ranges.claim(), Claimed)

    assert lifecycle.cancel_task(connection, Settings(), TENANT, task_id) == states.RUNNING
    canceling = {m.decode() for m in connection.smembers(keys.canceling())}
    assert {task_id, *readers} <= canceling
    assert connection.hget(keys.task(task_id), task_record.STATUS) == states.CANCELED.encode()


def test_stopping_the_readers_leaves_the_tasks_own_job_to_its_own_stop(
    connection, task_id, cleanup_jobs
):
    """The task's own job reads ranges too, but it is stopped (once) by the cancel itself."""
    cleanup_jobs += [task_id, "range-job"]
    for job_id in cleanup_jobs:
        _job(connection, job_id)
    own = planned(connection, task_id)
    assert own.claim() == Claimed(0, 0)
    assert reader(connection, task_id, "range-job").claim() == Claimed(1, 0)

    lifecycle._stop_range_readers(connection, task_id, task_id)
    canceling = {m.decode() for m in connection.smembers(keys.canceling())}
    assert "range-job" in canceling and task_id not in canceling


def test_a_cancel_stops_the_readers_even_when_a_lost_readers_job_is_gone(
    connection, task_id, cleanup_jobs, monkeypatch
):
    """A reader lost with its worker stays listed until the task ends, while RQ forgets its
    job (failure_ttl): the cancel must still succeed and stop every reader still there."""
    cleanup_jobs += [task_id, "live-reader"]
    for job_id in cleanup_jobs:
        _job(connection, job_id)
    own = planned(connection, task_id)
    assert own.claim() == Claimed(0, 0)
    assert reader(connection, task_id, "lost-reader").claim() == Claimed(1, 0)  # no RQ job
    assert reader(connection, task_id, "live-reader").claim() == Claimed(2, 0)
    cleanup_jobs.append("lost-reader")

    stopped: list[str] = []
    real_stop = lifecycle.send_stop_job_command

    def recording_stop(conn, job_id, *args, **kwargs):
        stopped.append(job_id)
        return real_stop(conn, job_id, *args, **kwargs)

    monkeypatch.setattr(lifecycle, "send_stop_job_command", recording_stop)
    assert lifecycle.cancel_task(connection, Settings(), TENANT, task_id) == states.RUNNING
    assert "live-reader" in stopped, "a reader after the lost one was not stopped"
    canceling = {m.decode() for m in connection.smembers(keys.canceling())}
    assert {task_id, "live-reader"} <= canceling


def test_a_new_run_keeps_the_pages_read_but_not_the_last_runs_claims_tries_or_failures(
    connection, task_id
):
    """A Retry by hand after a cancel or a failure is a new run: it must not re-read the ranges
    read already, nor inherit the old run's claims (its readers were stopped), the readers it
    lost, or a range failure that failed the old run (or three cancels would fail the scan)."""
    own = planned(connection, task_id)
    assert own.claim() == Claimed(0, 0)
    own.save(0, 4, reply(0))
    assert own.claim() == Claimed(1, 4)
    own.release(1, ("parse_timeout", "Pages 5–8: OCR took too long on a page."))
    set_status(connection, task_id, states.RUNNING, **{task_record.JOB_ID: f"{task_id}-run1"})

    retried = reader(connection, task_id, f"{task_id}-run1", run=f"{task_id}-run1")
    retried.plan(PLAN)
    assert retried.replies() == [reply(0), None, None]
    assert retried.claim() == Claimed(1, 4)  # the failure is gone; page count kept
    stored = connection.hgetall(keys.page_ranges(task_id))
    assert stored[b"tries:1"] == b"1" and b"failed:1" not in stored


def test_a_reader_whose_claim_was_taken_over_is_no_longer_listed_for_a_cancel(connection, task_id):
    """A cancel stops the readers listed: a lost one, whose job RQ may have forgotten, must not
    stay listed once another reader took its range."""
    own = planned(connection, task_id)
    lost = reader(connection, task_id, "lost", claim_seconds=LAPSE)
    assert lost.claim() == Claimed(0, 0)
    assert listed_readers(connection, task_id) == {"lost": 0}
    wait_until_lapsed(connection, task_id, 0)
    assert own.claim() == Claimed(0, 0)
    assert listed_readers(connection, task_id) == {task_id: 0}
