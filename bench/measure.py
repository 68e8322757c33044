"""Client-side measurements: sequential latencies, concurrent throughput, conditional GETs.

Requests are prepared (multipart bodies encoded) before the clock starts, so a latency is the
server's answer plus the client's send and receive, not the client's encoding.
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis
import requests
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry

from jobs import QUEUE_NAMES

_LINE = (
    "Intake benchmark document: a plain text paragraph of ordinary words, written so that "
    "the upload looks like a small note a person would send for ingestion.\n"
)
_BODY = (_LINE * (2048 // len(_LINE) + 1))[:2000]


def session() -> requests.Session:
    """A keep-alive session that ignores proxy settings of the environment (loopback only)."""
    s = requests.Session()
    s.trust_env = False
    return s


def text_file(n: int, nonce: str, size: int = 2000) -> tuple[str, bytes, str]:
    """A .txt file of about `size` bytes (2 KB by default: one chunk) whose content differs for
    every n, so no submit is a duplicate."""
    body = _BODY if size == 2000 else (_LINE * (size // len(_LINE) + 1))[:size]
    return f"doc-{nonce}-{n}.txt", f"{body}\n#{nonce}-{n}\n".encode(), "text/plain"


def upload(
    s: requests.Session,
    url: str,
    counter: Iterator[int],
    nonce: str,
    files: int = 1,
    size: int = 2000,
) -> requests.PreparedRequest:
    parts = [("files", text_file(next(counter), nonce, size)) for _ in range(files)]
    return s.prepare_request(requests.Request("POST", url, files=parts))


def send(
    s: requests.Session,
    prepared: requests.PreparedRequest,
    expect: int,
) -> tuple[float, requests.Response]:
    start = time.perf_counter()
    response = s.send(prepared, timeout=60)
    elapsed = time.perf_counter() - start
    if response.status_code != expect:
        raise RuntimeError(
            f"{prepared.method} {prepared.url} answered {response.status_code}, "
            f"expected {expect}: {response.text[:500]}"
        )
    return elapsed, response


def upload_latencies(
    s: requests.Session, url: str, count: int, counter: Iterator[int], nonce: str
) -> list[float]:
    """`count` sequential one-file uploads on one keep-alive connection; seconds each."""
    return [send(s, upload(s, url, counter, nonce), 202)[0] for _ in range(count)]


def get_latencies(s: requests.Session, url: str, count: int) -> list[float]:
    """`count` sequential GETs of `url` (each answered 200) on one keep-alive session; seconds
    each. The request is prepared once, before the clock starts."""
    prepared = s.prepare_request(requests.Request("GET", url))
    return [send(s, prepared, 200)[0] for _ in range(count)]


def throughput(url: str, threads: int, duration: float) -> float:
    """Requests/second of GET `url` from `threads` threads, each with its own keep-alive session,
    for `duration` seconds after every connection is open. Any answer but 200 aborts the run."""
    barrier = threading.Barrier(threads + 1)
    counts = [0] * threads
    errors: list[str] = []
    stop_at = [0.0]

    def run(slot: int) -> None:
        s = session()
        prepared = s.prepare_request(requests.Request("GET", url))
        try:
            send(s, prepared, 200)  # opens the connection before the clock starts
        except Exception as exc:  # reported below, after the barrier
            errors.append(str(exc))
        barrier.wait()
        done = 0
        while time.perf_counter() < stop_at[0]:
            try:
                send(s, prepared, 200)
            except Exception as exc:
                errors.append(str(exc))
                break
            done += 1
        counts[slot] = done
        s.close()

    workers = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    stop_at[0] = time.perf_counter() + duration + 30  # provisional, set properly below
    barrier.wait()
    start = time.perf_counter()
    stop_at[0] = start + duration
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"GET {url} failed: {errors[0]}")
    return sum(counts) / elapsed


def not_modified_share(url: str, polls: int) -> tuple[float, str]:
    """Share of `polls` GETs with If-None-Match (the first answer's ETag) answered 304."""
    s = session()
    _, first = send(s, s.prepare_request(requests.Request("GET", url)), 200)
    etag = first.headers.get("ETag", "")
    prepared = s.prepare_request(requests.Request("GET", url, headers={"If-None-Match": etag}))
    hits = sum(1 for _ in range(polls) if s.send(prepared, timeout=30).status_code == 304)
    s.close()
    return hits / polls, etag


def interleaved(
    rounds: int,
    subject: Callable[[], Any],
    baseline: Callable[[], Any],
) -> list[tuple[Any, Any]]:
    """`rounds` pairs (subject result, baseline result), running AB, BA, AB … to cancel drift."""
    pairs = []
    for i in range(rounds):
        if i % 2 == 0:
            a = subject()
            b = baseline()
        else:
            b = baseline()
            a = subject()
        pairs.append((a, b))
    return pairs


def median(values: list[float]) -> float:
    return statistics.median(values)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return (values[0],) * 3
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return q1, q2, q3


def counter() -> Iterator[int]:
    return itertools.count(1)


def _registry_counts(connection: redis.Redis) -> tuple[int, int]:
    """Jobs in RQ's finished and failed registries of Intake's queues: one round trip."""
    pipe = connection.pipeline(transaction=False)
    for queue in QUEUE_NAMES:
        pipe.zcard(FinishedJobRegistry(queue, connection=connection).key)
        pipe.zcard(FailedJobRegistry(queue, connection=connection).key)
    counts = pipe.execute()
    return sum(counts[::2]), sum(counts[1::2])


class Completion:
    """Waits for RQ jobs to finish, cheaply enough not to steal the workers' CPU.

    Created just before the jobs are enqueued, it polls the counts of RQ's finished and failed
    registries of Intake's queues (two ZCARDs a queue, one round trip, every `interval` s);
    when the finished count has grown by the number of jobs, every job's status is checked
    once. A failed job aborts the benchmark. No other jobs may run meanwhile.
    """

    def __init__(self, connection: redis.Redis, interval: float = 0.01) -> None:
        self.connection, self.interval = connection, interval
        self.finished, self.failed = _registry_counts(connection)

    def wait(self, job_ids: list[str], timeout: float = 120.0) -> float:
        """time.perf_counter() when every job was first seen finished."""
        deadline = time.perf_counter() + timeout
        while True:
            finished, failed = _registry_counts(self.connection)
            now = time.perf_counter()
            if failed > self.failed:
                raise RuntimeError(f"{failed - self.failed} job(s) failed")
            if finished - self.finished >= len(job_ids):
                jobs = Job.fetch_many(job_ids, connection=self.connection)
                open_jobs = [
                    j
                    for j, job in zip(job_ids, jobs)
                    if job is None or job.get_status(refresh=False) != JobStatus.FINISHED
                ]
                if open_jobs:
                    raise RuntimeError(
                        f"{len(open_jobs)} job(s) not finished, yet the "
                        "finished registries grew: other jobs ran"
                    )
                return now
            if now > deadline:
                raise RuntimeError(
                    f"{len(job_ids) - (finished - self.finished)} of "
                    f"{len(job_ids)} jobs not finished after {timeout:g} s"
                )
            time.sleep(self.interval)


def latency_ratio(
    subject: tuple[Any, str], baseline: tuple[Any, str], *, warmup: int, rounds: int, per_round: int
) -> dict[str, Any]:
    """Median latency of GET subject ÷ GET baseline, each (session, url), after a warm-up, in
    interleaved rounds; with the per-round spread and both medians in ms."""
    for session, url in (subject, baseline):
        get_latencies(session, url, warmup)
    pairs = interleaved(
        rounds,
        lambda: get_latencies(*subject, per_round),
        lambda: get_latencies(*baseline, per_round),
    )
    mine = [x for a, _ in pairs for x in a]
    theirs = [x for _, b in pairs for x in b]
    return {
        "ratio": median(mine) / median(theirs),
        "round_ratios": quartiles([median(a) / median(b) for a, b in pairs]),
        "subject_ms": 1000 * median(mine),
        "baseline_ms": 1000 * median(theirs),
    }


def unmeasured(
    figures: dict[str, Any], goals: dict[str, tuple[str, Callable[[float], bool]]]
) -> list[str]:
    """The goals this run has no figure for (a missing font, no CISI collection): a run that
    could not measure a goal has not met it."""
    return [name for name in goals if name not in figures]


def goals_met(
    figures: dict[str, Any], goals: dict[str, tuple[str, Callable[[float], bool]]]
) -> bool:
    """Every goal measured and met."""
    return not unmeasured(figures, goals) and all(
        check(figures[name]) for name, (_, check) in goals.items()
    )


def print_table(
    figures: dict[str, Any],
    goals: dict[str, tuple[str, Callable[[float], bool]]],
    reported: tuple[str, ...] = (),
) -> None:
    """The figures as a table of value, goal and whether it is met (`reported`: no goal); a goal
    whose figure this run could not measure is shown as such, never left out of the table."""
    rows = [("figure", "value", "goal", "met?")]
    for name, value in figures.items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        if name in reported:
            rows.append((name, shown, "reported", "-"))
            continue
        goal, check = goals[name]
        rows.append((name, shown, goal, "yes" if check(value) else "NO"))
    for name in unmeasured(figures, goals):
        rows.append((name, "-", goals[name][0], "NOT MEASURED"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print()
