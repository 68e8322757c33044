"""scaling_efficiency: the same 200 small documents with 1 and with 4 production workers, each
document's embedding one request to a real local HTTP embedding server that takes 100 ms.

The embedding server is the integration tests' OpenAI-compatible one
(tests/integration/embedding_server.py) in mode "slow:0.1", in this process, on a free port;
the workers get INTAKE_EMBEDDING_URL for it, so the pipeline uses its `HttpEmbedder` (one request
per 64 chunks: a ~2 KB document is one request). The workers are started as the Procfile's
`worker:` line (jobs.worker.workers.worker_command) and are idle before the clock starts; the clock
runs from the answer to the POST of 200 files (one request, so one batch in `intake-bulk`; its
jobs are in the queue by then) to RQ's `finished` on the last job. scaling_efficiency =
T1 / (4 × T4): 1.0 is perfect scaling.

While the workers of the 4-worker run are up, the same server also serves the other two
figures that need an HTTP embedder: meta_writes_per_s_max (bench.metawrites) and, on the
200-task batch T4 produced, batch_poll_ratio (bench.batchpoll).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from bench import measure, metawrites
from bench.servers import Services, workers
from jobs.core import keys
from tests.integration.embedding_server import EmbeddingServer

DOCUMENTS = 200
EMBED_SECONDS = 0.1
WORKERS = 4


@contextmanager
def embedding_server() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer()
    server.mode = f"slow:{EMBED_SECONDS:g}"
    try:
        yield server
    finally:
        server.close()


def drain(
    svc: Services,
    connection: redis.Redis,
    nonce: str,
    count: int = DOCUMENTS,
) -> tuple[float, dict[str, Any]]:
    """POST `count` new ~2 KB documents in one request, wait until RQ finished every job;
    (seconds from the answer, when every job is in the queue, to the last job finished; the
    upload's answer)."""
    s = measure.session()
    prepared = measure.upload(s, f"{svc.base}/api/documents", measure.counter(), nonce, files=count)
    completion = measure.Completion(connection)
    _, response = measure.send(s, prepared, 202)
    start = time.perf_counter()  # the answer comes once every job is in the queue
    s.close()
    body = response.json()
    end = completion.wait([t["id"] for t in body["tasks"]], timeout=200)
    pipe = connection.pipeline(transaction=False)
    for task in body["tasks"]:
        pipe.hget(keys.task(task["id"]), "status")
    if set(pipe.execute()) != {b"succeeded"}:
        raise RuntimeError("a document of the scaling run did not succeed")
    return end - start, body


def run(svc: Services, nonce: str, log: Callable[[str], None]) -> dict[str, Any]:
    """T4, T1, T4 again (the two T4 runs bracket T1, so a drift of the machine's load cancels
    out in their mean); the big document of bench.metawrites runs on the second T4's workers."""
    connection = redis.Redis.from_url(svc.redis_url)
    result: dict[str, Any] = {"t4": []}
    with embedding_server() as server:
        env = {"INTAKE_EMBEDDING_URL": server.url}
        for run_index, count in enumerate((WORKERS, 1, WORKERS)):
            with workers(svc.redis_url, count, svc.workdir, env=env, prefix=f"scale{count}"):
                drain(svc, connection, f"warm{run_index}-{nonce}", count=2 * count)
                log(f"scaling: {DOCUMENTS} documents, {count} worker(s)")
                before = server.requests
                seconds, body = drain(svc, connection, f"run{run_index}-{nonce}")
                result["embedding_requests"] = server.requests - before
                if count == 1:
                    result["t1"] = seconds
                else:
                    result["t4"].append(seconds)
                    result["batch_id"] = body["batch_id"]
                    result["task_id"] = body["tasks"][0]["id"]
                if run_index == 2:
                    log("meta writes: one big document on the same workers")
                    result["meta"] = metawrites.run(svc, connection, nonce)
    connection.close()
    t4 = sum(result["t4"]) / len(result["t4"])
    result["efficiency"] = result["t1"] / (WORKERS * t4)
    return result
