"""`python -m bench`: Intake's web side against bare baselines on the same gunicorn server.

Prints progress on stderr, then a table on stdout, and as the LAST line one JSON object of the
figures (ratios and the 200-file batch time) with "goals_met". See docs/benchmarks.md.
"""
from __future__ import annotations

import json
import os
import sys
import time
import uuid
from typing import Any, Callable

import redis

from bench import measure
from bench.servers import Services, cpu_seconds, services

SUBMIT_WARMUP = 30          # per side, not measured
SUBMIT_ROUNDS = 30          # pairs of rounds, order alternating (AB, BA, …)
SUBMIT_PER_ROUND = 10       # sequential requests per side per round: 300 each in all
BATCH_FILES = 200
BATCH_REPEATS = 3
POLL_THREADS = 8
POLL_ROUNDS = 15            # pairs of rounds, order alternating
POLL_SECONDS = 2.0
CONDITIONAL_POLLS = 200

GOALS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "submit_ratio": ("<= 1.2", lambda v: v <= 1.2),
    "batch_submit_200_s": ("< 1", lambda v: v < 1.0),
    "poll_ratio": (">= 0.8", lambda v: v >= 0.8),
    "not_modified_share": ("= 1.0", lambda v: v >= 1.0),
}


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def interleaved(rounds: int, subject: Callable[[], Any], baseline: Callable[[], Any],
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


def with_cpu(svc: Services, run: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """run()'s result and the CPU seconds the client, gunicorn and redis-server used meanwhile,
    with the wall-clock seconds under "wall"."""
    def snapshot() -> dict[str, float]:
        return {"wall": time.perf_counter(), "client": time.process_time(),
                "web": cpu_seconds(svc.gunicorn_pid, with_children=True),
                "redis": cpu_seconds(svc.redis_pid)}
    before = snapshot()
    result = run()
    after = snapshot()
    return result, {k: after[k] - before[k] for k in before}


def bench_submit(svc: Services, nonce: str) -> dict[str, float]:
    s, n = measure.session(), measure.counter()
    api, bare = f"{svc.base}/api/documents", f"{svc.base}/bare/enqueue"
    measure.upload_latencies(s, api, SUBMIT_WARMUP, n, nonce)
    measure.upload_latencies(s, bare, SUBMIT_WARMUP, n, nonce)
    pairs = interleaved(
        SUBMIT_ROUNDS,
        lambda: with_cpu(svc, lambda: measure.upload_latencies(s, api, SUBMIT_PER_ROUND, n, nonce)),
        lambda: with_cpu(svc, lambda: measure.upload_latencies(s, bare, SUBMIT_PER_ROUND, n, nonce)))
    s.close()
    subject = [x for (a, _), _ in pairs for x in a]
    baseline = [x for _, (b, _) in pairs for x in b]
    per_request = len(pairs) * SUBMIT_PER_ROUND
    round_ratios = [measure.median(a) / measure.median(b) for (a, _), (b, _) in pairs]
    return {
        # Rounds are short and finely interleaved, so both sides saw the same machine: the
        # ratio of the pooled medians; the per-round ratios show the noise.
        "ratio": measure.median(subject) / measure.median(baseline),
        "round_ratios": measure.quartiles(round_ratios),
        "subject_ms": 1000 * measure.median(subject),
        "baseline_ms": 1000 * measure.median(baseline),
        "subject_web_cpu_ms": 1000 * sum(c["web"] for (_, c), _ in pairs) / per_request,
        "baseline_web_cpu_ms": 1000 * sum(c["web"] for _, (_, c) in pairs) / per_request,
        "subject_redis_cpu_ms": 1000 * sum(c["redis"] for (_, c), _ in pairs) / per_request,
        "baseline_redis_cpu_ms": 1000 * sum(c["redis"] for _, (_, c) in pairs) / per_request,
        "count": len(subject),
    }


def bench_batch(base: str, nonce: str) -> dict[str, float]:
    s, n = measure.session(), measure.counter()
    url = f"{base}/api/documents"
    seconds = []
    for _ in range(BATCH_REPEATS):
        prepared = measure.upload(s, url, n, f"batch-{nonce}", files=BATCH_FILES)
        elapsed, response = measure.send(s, prepared, 202)
        tasks = response.json()["tasks"]
        if len(tasks) != BATCH_FILES or any(t["duplicate"] for t in tasks):
            raise RuntimeError(f"batch answered {len(tasks)} tasks, some duplicates")
        seconds.append(elapsed)
    s.close()
    return {"seconds": measure.median(seconds), "all": seconds}


def one_task(base: str, nonce: str) -> str:
    s = measure.session()
    prepared = measure.upload(s, f"{base}/api/documents", iter([0]), f"poll-{nonce}")
    _, response = measure.send(s, prepared, 202)
    s.close()
    return response.json()["tasks"][0]["id"]


def bench_poll(svc: Services, task_id: str) -> dict[str, Any]:
    base = svc.base
    api, bare = f"{base}/api/tasks/{task_id}", f"{base}/bare/hgetall/intake:task:{task_id}"
    measure.throughput(api, POLL_THREADS, 1.0)       # warm-up: both gunicorn workers, all threads
    measure.throughput(bare, POLL_THREADS, 1.0)
    pairs = interleaved(
        POLL_ROUNDS,
        lambda: with_cpu(svc, lambda: measure.throughput(api, POLL_THREADS, POLL_SECONDS)),
        lambda: with_cpu(svc, lambda: measure.throughput(bare, POLL_THREADS, POLL_SECONDS)))

    def cores(side: int, who: str) -> float:
        return measure.median([p[side][1][who] / p[side][1]["wall"] for p in pairs])

    round_ratios = [a / b for (a, _), (b, _) in pairs]
    return {
        "ratio": measure.median(round_ratios),
        "round_ratios": measure.quartiles(round_ratios),
        "subject_rps": measure.median([a for (a, _), _ in pairs]),
        "baseline_rps": measure.median([b for _, (b, _) in pairs]),
        "cores": {side: {who: cores(i, who) for who in ("client", "web", "redis")}
                  for i, side in enumerate(("subject", "baseline"))},
    }


def fmt(values: tuple[float, ...]) -> str:
    return "/".join(f"{v:.2f}" for v in values)


def report(figures: dict[str, float], context: list[str]) -> None:
    rows = [("figure", "value", "goal", "met?")]
    for name, value in figures.items():
        goal, check = GOALS[name]
        rows.append((name, f"{value:.3f}", goal, "yes" if check(value) else "NO"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print()
    for line in context:
        print(line)


def main() -> int:
    nonce = uuid.uuid4().hex[:8]
    log("starting redis-server and gunicorn (gthread, 2 workers x 16 threads, as the Procfile)")
    with services() as svc:
        base = svc.base
        store = redis.Redis.from_url(svc.redis_url)
        log(f"submit latency: {SUBMIT_ROUNDS} interleaved rounds x {SUBMIT_PER_ROUND} per side")
        submit = bench_submit(svc, nonce)
        store.flushdb()
        log(f"batch: {BATCH_REPEATS} x POST of {BATCH_FILES} files")
        batch = bench_batch(base, nonce)
        store.flushdb()
        task_id = one_task(base, nonce)
        log(f"poll throughput: {POLL_ROUNDS} interleaved rounds x {POLL_SECONDS:g} s per side, "
            f"{POLL_THREADS} client threads")
        poll = bench_poll(svc, task_id)
        share, etag = measure.not_modified_share(f"{base}/api/tasks/{task_id}",
                                                 CONDITIONAL_POLLS)
        store.close()
    figures = {
        "submit_ratio": round(submit["ratio"], 4),
        "batch_submit_200_s": round(batch["seconds"], 4),
        "poll_ratio": round(poll["ratio"], 4),
        "not_modified_share": round(share, 4),
    }
    context = [
        f"submit: median {submit['subject_ms']:.2f} ms POST /api/documents vs "
        f"{submit['baseline_ms']:.2f} ms POST /bare/enqueue ({submit['count']} each, 1 file ~2 KB; "
        f"per-round ratios q1/median/q3 {fmt(submit['round_ratios'])})",
        f"submit CPU per request: gunicorn {submit['subject_web_cpu_ms']:.2f} vs "
        f"{submit['baseline_web_cpu_ms']:.2f} ms, redis-server {submit['subject_redis_cpu_ms']:.2f}"
        f" vs {submit['baseline_redis_cpu_ms']:.2f} ms",
        f"batch: {BATCH_FILES} files in one POST: "
        + ", ".join(f"{s:.3f}" for s in batch["all"]) + " s "
        f"(median {1000 * batch['seconds'] / BATCH_FILES:.2f} ms per file)",
        f"poll: median {poll['subject_rps']:.0f} req/s GET /api/tasks/<id> vs "
        f"{poll['baseline_rps']:.0f} req/s GET /bare/hgetall/<key> ({POLL_THREADS} threads, "
        f"{POLL_ROUNDS} x {POLL_SECONDS:g} s per side; per-round ratios q1/median/q3 "
        f"{fmt(poll['round_ratios'])})",
        *(f"poll CPU ({side}): client {c['client']:.2f}, gunicorn {c['web']:.2f}, "
          f"redis-server {c['redis']:.2f} cores of {os.cpu_count()}"
          for side, c in poll["cores"].items()),
        f"conditional: {CONDITIONAL_POLLS} polls with If-None-Match {etag}: "
        f"{share:.0%} answered 304",
    ]
    report(figures, context)
    met = all(GOALS[name][1](value) for name, value in figures.items())
    print(json.dumps({**figures, "goals_met": met}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
