"""Client-side measurements: sequential latencies, concurrent throughput, conditional GETs.

Requests are prepared (multipart bodies encoded) before the clock starts, so a latency is the
server's answer plus the client's send and receive, not the client's encoding.
"""
from __future__ import annotations

import itertools
import statistics
import threading
import time
from typing import Iterator

import requests

_LINE = ("Intake benchmark document: a plain text paragraph of ordinary words, written so that "
         "the upload looks like a small note a person would send for ingestion.\n")
_BODY = (_LINE * (2048 // len(_LINE) + 1))[:2000]


def session() -> requests.Session:
    """A keep-alive session that ignores proxy settings of the environment (loopback only)."""
    s = requests.Session()
    s.trust_env = False
    return s


def text_file(n: int, nonce: str) -> tuple[str, bytes, str]:
    """A ~2 KB .txt file whose content differs for every n, so no submit is a duplicate."""
    return f"doc-{nonce}-{n}.txt", f"{_BODY}\n#{nonce}-{n}\n".encode(), "text/plain"


def upload(s: requests.Session, url: str, counter: Iterator[int], nonce: str,
           files: int = 1) -> requests.PreparedRequest:
    parts = [("files", text_file(next(counter), nonce)) for _ in range(files)]
    return s.prepare_request(requests.Request("POST", url, files=parts))


def send(s: requests.Session, prepared: requests.PreparedRequest, expect: int,
         ) -> tuple[float, requests.Response]:
    start = time.perf_counter()
    response = s.send(prepared, timeout=60)
    elapsed = time.perf_counter() - start
    if response.status_code != expect:
        raise RuntimeError(f"{prepared.method} {prepared.url} answered {response.status_code}, "
                           f"expected {expect}: {response.text[:500]}")
    return elapsed, response


def upload_latencies(s: requests.Session, url: str, count: int, counter: Iterator[int],
                     nonce: str) -> list[float]:
    """`count` sequential one-file uploads on one keep-alive connection; seconds each."""
    return [send(s, upload(s, url, counter, nonce), 202)[0] for _ in range(count)]


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
            send(s, prepared, 200)      # opens the connection before the clock starts
        except Exception as exc:        # reported below, after the barrier
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
    stop_at[0] = time.perf_counter() + duration + 30     # provisional, set properly below
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


def median(values: list[float]) -> float:
    return statistics.median(values)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return (values[0],) * 3
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return q1, q2, q3


def counter() -> Iterator[int]:
    return itertools.count(1)
