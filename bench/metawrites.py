"""meta_writes_per_s_max: the most progress writes one job made in any second, seen from outside.

One document big enough to spend several seconds embedding (~2,500 chunks: 40 requests of 64
chunks to the 100 ms embedding server) runs on the production workers. Redis itself reports the
writes: the bench's Redis gets `CONFIG SET notify-keyspace-events Kh` (keyspace events of hash
commands) and a listener thread, on its own connection, PSUBSCRIBEs to
`__keyspace@0__:intake:task:*` before the upload and timestamps every event on arrival. Each
progress write is one HSET of the task hash, in the same round trip (MULTI or script) as the
HSET of the RQ job's meta, so counting the task hash's HSETs counts the meta writes.

The upload's own HSET (the idempotency claim writes the new record) comes first and is not a
progress write: it is dropped. The figure is the largest number of the job's writes in any 1 s
window [t, t + 1) (sliding, starting at each write); the table also shows fixed 1 s bins.
"""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any

import redis
import requests

from bench import measure
from bench.servers import Services
from jobs.core import keys

CHUNKS = 2500  # at INTAKE_CHUNK_SIZE 1000 / overlap 150: ~850 new characters each
WORDS = (
    "intake",
    "document",
    "worker",
    "progress",
    "embedding",
    "search",
    "queue",
    "redis",
    "paragraph",
    "sentence",
    "chunk",
    "vector",
    "batch",
    "index",
    "retry",
    "status",
)


def big_text(chunks: int, seed: int) -> bytes:
    """About `chunks` chunks of plain text: paragraphs of ordinary-looking sentences."""
    rng = random.Random(seed)
    target = chunks * 850
    parts, size = [], 0
    while size < target:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize()
        paragraph = ". ".join([sentence] * 3) + ".\n\n"
        parts.append(paragraph)
        size += len(paragraph)
    return "".join(parts).encode()


def sliding_max(times: list[float], window: float = 1.0) -> int:
    """The most events in any interval [t, t + window) that starts at an event."""
    return max((sum(1 for u in times if t <= u < t + window) for t in times), default=0)


def fixed_bins_max(times: list[float], window: float = 1.0) -> int:
    if not times:
        return 0
    counts: dict[int, int] = {}
    for t in times:
        slot = int((t - times[0]) // window)
        counts[slot] = counts.get(slot, 0) + 1
    return max(counts.values())


class KeyspaceListener:
    """Every keyspace event of hashes matching `pattern`, with its arrival time, in a thread."""

    def __init__(self, url: str, pattern: str) -> None:
        self.connection = redis.Redis.from_url(url)
        self.connection.config_set("notify-keyspace-events", "Kh")
        self.pubsub = self.connection.pubsub()
        self.pubsub.psubscribe(pattern)
        confirm = self.pubsub.get_message(timeout=5)
        if not confirm or confirm["type"] != "psubscribe":
            raise RuntimeError(f"no psubscribe confirmation: {confirm!r}")
        self.events: list[tuple[float, str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="keyspace", daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            message = self.pubsub.get_message(timeout=0.2)
            if message and message["type"] == "pmessage":
                self.events.append(
                    (time.perf_counter(), message["channel"].decode(), message["data"].decode())
                )

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.pubsub.close()
        self.connection.config_set("notify-keyspace-events", "")
        self.connection.close()


def run(svc: Services, connection: redis.Redis, nonce: str) -> dict[str, Any]:
    data = big_text(CHUNKS, seed=7) + f"\n{nonce}\n".encode()
    listener = KeyspaceListener(svc.redis_url, f"__keyspace@0__:{keys.task('*')}")
    try:
        s = measure.session()
        prepared = s.prepare_request(
            requests.Request(
                "POST",
                f"{svc.base}/api/documents",
                files=[("files", (f"big-{nonce}.txt", data, "text/plain"))],
            )
        )
        completion = measure.Completion(connection, interval=0.05)
        start = time.perf_counter()
        _, response = measure.send(s, prepared, 202)
        s.close()
        task_id = response.json()["tasks"][0]["id"]
        end = completion.wait([task_id], timeout=120)
        time.sleep(0.2)  # the last events are in flight
    finally:
        listener.close()
    record = {k.decode(): v.decode() for k, v in connection.hgetall(keys.task(task_id)).items()}
    if record.get("status") != "succeeded":
        raise RuntimeError(f"the big document ended {record.get('status')}")
    channel = f"__keyspace@0__:{keys.task(task_id)}"
    hsets = [t for t, ch, event in listener.events if ch == channel and event == "hset"]
    writes = hsets[1:]  # the first is the upload's claim, not a progress write
    result = {
        "max_per_s": sliding_max(writes),
        "max_per_fixed_s": fixed_bins_max(writes),
        "writes": len(writes),
        "job_seconds": end - start,
        "chunks": int(json.loads(record["result"])["chunks"]),
    }
    if len(writes) > 1:
        result["writes_per_s"] = (len(writes) - 1) / (writes[-1] - writes[0])
    return result
