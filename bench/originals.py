"""The originals: what a 200 MiB upload costs the web's memory, and a re-index against the
first ingest of the same documents.

- upload_200mib_web_rss_mb: one POST of a 200 MiB file to the production-style gunicorn
  (bench.servers.services); the resident memory of its worker processes is sampled every
  10 ms from /proc while the request runs, and the figure is the largest growth of any of them
  over its resident memory before the request, in MiB. The web spools the request's file part
  to a temporary file and streams it to the store 8 MiB at a time, so a file's size must not
  show in it (goal < 64). The file is refused by no limit (512 MiB a file) and is deleted
  after, unread by any worker (none runs meanwhile).
- reindex_docs_per_s_ratio: 200 small documents ingested by 2 production workers (from the
  upload's answer to the last job finished), then the same 200 re-indexed
  (POST /api/documents/reindex with their ids and `force`, from its answer to the last job
  finished): documents per second of the re-index ÷ of the first ingest, in ROUNDS rounds of
  new documents, median (goal ≥ 0.9: reading the stored original again costs no more than
  receiving it did).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import requests

from bench import measure
from bench.servers import Services, workers

UPLOAD_MIB = 200
DOCUMENTS = 200
WORKERS = 2
ROUNDS = 3
MIB = 1024 * 1024


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def upload_memory(svc: Services, nonce: str) -> dict[str, Any]:
    """The largest growth of a gunicorn worker's resident memory while a 200 MiB upload runs."""
    line = f"Line of the {nonce} manual, padded to a steady length for the benchmark.\n".encode()
    content = line * (UPLOAD_MIB * MIB // len(line))
    boundary = f"bench{nonce}"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
            f'filename="manual-{nonce}.txt"\r\nContent-Type: text/plain\r\n\r\n'
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    pids = _children(svc.gunicorn_pid)
    before = {pid: _rss_mib(pid) for pid in pids}
    peak = dict(before)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in pids:
                peak[pid] = max(peak[pid], _rss_mib(pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        response = requests.post(
            f"{svc.base}/api/documents",
            data=body,
            timeout=300,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
    finally:
        done.set()
        sampler.join()
    seconds = time.perf_counter() - started
    if response.status_code != 202:
        raise RuntimeError(
            f"the 200 MiB upload answered {response.status_code}: {response.text[:300]}"
        )
    document = response.json()["tasks"][0]["document_id"]
    requests.delete(f"{svc.base}/api/documents/{document}", timeout=30)
    growth = {pid: peak[pid] - before[pid] for pid in pids}
    return {
        "rss_mb": round(max(growth.values()), 1),
        "seconds": seconds,
        "before_mb": {str(pid): round(before[pid], 1) for pid in pids},
        "peak_mb": {str(pid): round(peak[pid], 1) for pid in pids},
    }


def reindex_rate(svc: Services, nonce: str, log: Callable[[str], None]) -> dict[str, Any]:
    connection = redis.Redis.from_url(svc.redis_url)
    session, counter = measure.session(), measure.counter()
    url = f"{svc.base}/api/documents"
    pairs: list[tuple[float, float]] = []
    with workers(svc.redis_url, WORKERS, svc.workdir, prefix="reindex"):
        for round_ in range(ROUNDS + 1):  # the first round warms every fork path, unmeasured
            prepared = measure.upload(
                session, url, counter, f"reindex-{nonce}-{round_}", files=DOCUMENTS
            )
            completion = measure.Completion(connection)
            _, response = measure.send(session, prepared, 202)
            start = time.perf_counter()
            tasks = response.json()["tasks"]
            ingest = completion.wait([t["id"] for t in tasks]) - start

            completion = measure.Completion(connection)
            answer = session.post(
                f"{url}/reindex",
                timeout=60,
                json={"document_ids": [t["document_id"] for t in tasks], "force": True},
            )
            start = time.perf_counter()
            if answer.status_code != 202:
                raise RuntimeError(f"re-index answered {answer.status_code}: {answer.text[:300]}")
            again = answer.json()["tasks"]
            if len(again) != DOCUMENTS or any(t["duplicate"] for t in again):
                raise RuntimeError("the re-index did not make a task of each document")
            reindex = completion.wait([t["id"] for t in again]) - start
            if round_:
                pairs.append((ingest, reindex))
                log(f"re-index round {round_}: ingest {ingest:.2f} s, re-index {reindex:.2f} s")
    session.close()
    connection.close()
    ratios = [ingest / reindex for ingest, reindex in pairs]
    return {
        "ratio": measure.median(ratios),
        "round_ratios": measure.quartiles(ratios),
        "ingest_s": measure.median([a for a, _ in pairs]),
        "reindex_s": measure.median([b for _, b in pairs]),
    }


def run(svc: Services, nonce: str, log: Callable[[str], None]) -> dict[str, Any]:
    log(f"originals: one {UPLOAD_MIB} MiB upload, the web's memory sampled")
    memory = upload_memory(svc, nonce)
    log(
        f"originals: {DOCUMENTS} documents ingested then re-indexed, {ROUNDS} rounds, "
        f"{WORKERS} workers"
    )
    return {"memory": memory, "reindex": reindex_rate(svc, nonce, log)}


def figures(result: dict[str, Any]) -> dict[str, float]:
    return {
        "upload_200mib_web_rss_mb": result["memory"]["rss_mb"],
        "reindex_docs_per_s_ratio": round(result["reindex"]["ratio"], 4),
    }


def describe(result: dict[str, Any]) -> list[str]:
    memory, rate = result["memory"], result["reindex"]
    return [
        f"originals: a {UPLOAD_MIB} MiB upload took {memory['seconds']:.1f} s; gunicorn "
        f"workers' resident MiB before {memory['before_mb']}, at most {memory['peak_mb']}",
        f"re-index: {DOCUMENTS} documents, median {rate['ingest_s']:.2f} s first ingest vs "
        f"{rate['reindex_s']:.2f} s re-index ({WORKERS} workers; per-round ratios "
        f"q1/median/q3 {'/'.join(f'{v:.2f}' for v in rate['round_ratios'])})",
    ]
