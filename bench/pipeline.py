"""pipeline_overhead_ratio: N tiny documents through Intake's pipeline against N bare RQ no-op
jobs, drained by the same production workers.

Both sides run on the same `rq worker` processes (jobs.worker.workers.worker_command: IntakeWorker,
a fork per job, the scheduler, Intake's three queues), started once and idle before every round.
A round's clock starts when all its jobs are in the queue and stops when the last of them is
finished (RQ's finished registries, polled every 10 ms: bench.measure.Completion):

- subject: one POST /api/documents of N tiny .txt files (N ≥ 50 go to `intake-bulk`); Intake
  pushes the jobs at the end of the request, so the clock starts when the answer arrives (the
  submit itself is what submit_ratio and batch_submit_200_s measure); then the pipeline
  parse → chunk → embed (local embedder) → index in the workers;
- baseline: `Queue("intake-bulk").enqueue_many` of N `bench.noop.noop` jobs from the client;
  the clock starts when it returns.

Rounds alternate AB, BA, …; the figure is the median of the per-pair ratios.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from rq import Queue

from bench import measure
from bench.servers import Services, workers
from jobs.core import keys

DOCUMENTS = 60
WORKERS = 2
ROUNDS = 7  # pairs of rounds, order alternating
WARMUP_DOCUMENTS = 10  # one unmeasured round per side first: every fork path warm
TINY_BYTES = 120
QUEUE = "intake-bulk"


def run(svc: Services, nonce: str) -> dict[str, Any]:
    connection = redis.Redis.from_url(svc.redis_url)
    queue = Queue(QUEUE, connection=connection)
    session, counter = measure.session(), measure.counter()
    url = f"{svc.base}/api/documents"
    submit_seconds: list[float] = []

    def intake_round(count: int) -> float:
        prepared = measure.upload(
            session, url, counter, f"tiny-{nonce}", files=count, size=TINY_BYTES
        )
        completion = measure.Completion(connection)
        posted, response = measure.send(session, prepared, 202)
        start = time.perf_counter()  # the answer comes once every job is in the queue
        submit_seconds.append(posted)
        ids = [t["id"] for t in response.json()["tasks"]]
        end = completion.wait(ids)
        pipe = connection.pipeline(transaction=False)
        for task_id in ids:
            pipe.hget(keys.task(task_id), "status")
        if set(pipe.execute()) != {b"succeeded"}:
            raise RuntimeError("a tiny document did not succeed")
        return end - start

    def bare_round(count: int) -> float:
        datas = [
            Queue.prepare_data("bench.noop.noop", args=(n,), result_ttl=3600) for n in range(count)
        ]
        completion = measure.Completion(connection)
        jobs = queue.enqueue_many(datas)
        start = time.perf_counter()  # as above: every job is in the queue
        return completion.wait([j.id for j in jobs]) - start

    with workers(svc.redis_url, WORKERS, svc.workdir, prefix="pipeline"):
        intake_round(WARMUP_DOCUMENTS)
        bare_round(WARMUP_DOCUMENTS)
        pairs = measure.interleaved(
            ROUNDS, lambda: intake_round(DOCUMENTS), lambda: bare_round(DOCUMENTS)
        )
    session.close()
    connection.close()
    ratios = [a / b for a, b in pairs]
    return {
        "ratio": measure.median(ratios),
        "round_ratios": measure.quartiles(ratios),
        "subject_s": measure.median([a for a, _ in pairs]),
        "baseline_s": measure.median([b for _, b in pairs]),
        "submit_s": measure.median(submit_seconds),
    }
