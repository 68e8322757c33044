"""scan_split_speedup: a 40-page scan made searchable by 2 production workers against 1.

A scan with at least 8 pages to read by OCR is read in page ranges of 4 pages
(jobs.worker.scan_reading): the task's own job reads ranges and enqueues range jobs, one per
other registered worker, that any free worker takes; the task's job then puts the pages
together and indexes once. This measures what that buys on this 2-core machine, end to end:
the seconds from an upload to its task `succeeded` (searchable: `time_to_searchable_s` is a few
ms after it) with 1 worker, divided by the same with 2 workers, both measured in this run.

The scan is bench.pdf's `scan_pdf(40)`: 40 pages, one image a page (letter size, 200 dpi,
grey), 18 English lines in 14 pt and the 2 Chinese lines of tests/fixtures/chinese.png a page,
no text layer, ~9 MiB. Its own redis-server and gunicorn (bench.servers.services: bench.app
with the Procfile's web flags). Each measurement: Redis flushed, N workers started exactly as
the Procfile's `worker:` line (jobs.worker.workers.worker_command: IntakeWorker, OCR on by
default) and waited for until RQ lists them and each has logged "OCR engine loaded" (its
warm-up is over, it is idle), then one `POST /api/documents` of the scan. The clock runs from
just before the POST is sent to the task's own `ended_at` (the `succeeded` write, to the ms);
the task is polled meanwhile in Redis every 0.1 s (its status, and its page ranges: which
reader holds which range, when each range is saved), so the poll's own cost is one round trip a
tenth of a second, the same on both sides. The answer of `GET /api/tasks/<id>` must say
`succeeded` with 40 pages, all 40 read by OCR; anything else aborts the bench. The workers are
stopped after each measurement.

Order: 2 workers, 1 worker, 2 workers again (as bench.scaling brackets its baseline): a linear
drift of the shared machine's load cancels out in the mean of the two 2-worker times.
scan_split_speedup = T1 / mean(T2); goal ≥ 1.7 (2 is the ideal on 2 cores: the text-layer pass
before the ranges, the last range's wait and the indexing after them are not split, and the
bench's own client, gunicorn and redis-server share the cores).

Reported beside it, per measurement, from the poll and RQ's job records (range jobs keep
theirs 600 s): how long the text-layer pass, the reading of the ranges and the rest (pages put
together; then chunked, embedded, indexed) took; how many ranges the task's job and the range jobs
read and their median seconds; the range jobs enqueued, how many found nothing left to read,
how long they waited in the queue; how long the first worker out of ranges sat idle until the
last range was saved (and how much of it was the task's job waiting); the idle gaps of each
worker between two of its ranges; and the machine's busy and stolen cores
(/proc/stat) over the measurement.

`python -m bench.scan_split` prints the context lines and, last, one JSON object;
`--keep-logs DIR` copies the workers' logs (RQ's own format) there.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import redis
import requests
from rq import Worker
from rq.job import Job
from rq.registry import FinishedJobRegistry

from bench import measure
from bench.pdf import OCR_LINES, scan_pdf
from bench.servers import Services, services, wait_until, workers
from jobs.core import keys
from jobs.worker.scan_reading import RANGE_PAGES, READ_FUNCTION

PAGES = 40
ORDER = (2, 1, 2)  # workers of each measurement, in order
TIMEOUT = 1200.0  # seconds for one scan to succeed
POLL_SECONDS = 0.1
WARM_LINE = "OCR engine loaded"

Log = Callable[[str], None]


def _cpu_ticks() -> tuple[float, float, float]:
    """(busy, steal) seconds of all cores so far, from /proc/stat's first line; time.time()."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq) / hz, steal / hz, time.time()


def _epoch(iso: bytes | str | None) -> float | None:
    if not iso:
        return None
    text = iso.decode() if isinstance(iso, bytes) else iso
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _wait_warm(workdir: Path, prefix: str, count: int) -> None:
    """Until each of the `count` workers named `prefix-…` has logged that its OCR engine is
    loaded (the warm-up runs before RQ registers the worker, so this is a check, not a wait)."""

    def warm() -> bool:
        logs = list(workdir.glob(f"worker-{prefix}-*.log"))
        return len(logs) == count and all(WARM_LINE in p.read_text(errors="replace") for p in logs)

    wait_until(warm, 120, f"{count} workers logging '{WARM_LINE}'")


def _follow(connection: redis.Redis, task_id: str, timeout: float) -> dict[str, Any]:
    """Poll the task and its page ranges until it ends: when the plan appeared, when each
    reader (RQ job id) was first and last seen holding which range, when each range was saved
    (time.time())."""
    task_key, ranges_key = keys.task(task_id), keys.page_ranges(task_id)
    readers_key = keys.page_range_readers(task_id)
    plan: list[list[int]] | None = None
    plan_at: float | None = None
    held: dict[tuple[str, int], list[float]] = {}  # (reader, range) → [first, last] seen
    saved: dict[int, float] = {}
    deadline = time.monotonic() + timeout
    while True:
        pipe = connection.pipeline(transaction=False)
        pipe.hget(task_key, "status")
        pipe.hgetall(readers_key)
        if plan is None:
            pipe.hget(ranges_key, "plan")
        else:
            for i in range(len(plan)):
                pipe.hstrlen(ranges_key, f"text:{i}")
        status, readers, *rest = pipe.execute()
        now = time.time()
        if plan is None and rest[0]:
            plan, plan_at = json.loads(rest[0]), now
        elif plan is not None:
            for i, length in enumerate(rest):
                if length and i not in saved:
                    saved[i] = now
        for reader, index in readers.items():
            seen = held.setdefault((reader.decode(), int(index)), [now, now])
            seen[1] = now
        if status in (b"succeeded", b"failed", b"canceled"):
            return {
                "status": status.decode(),
                "plan": plan,
                "plan_at": plan_at,
                "held": held,
                "saved": saved,
            }
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the {PAGES}-page scan was not done after {timeout:g} s (status {status!r})"
            )
        time.sleep(POLL_SECONDS)


def _range_jobs(connection: redis.Redis, queue_name: str, task_id: str) -> list[Job]:
    ids = FinishedJobRegistry(queue_name, connection=connection).get_job_ids()
    jobs = [j for j in Job.fetch_many(ids, connection=connection) if j is not None]
    return [j for j in jobs if j.func_name == READ_FUNCTION and j.args and j.args[0] == task_id]


def _timeline(
    connection: redis.Redis, task_id: str, started: float, ended: float, followed: dict[str, Any]
) -> dict[str, Any]:
    """What the poll and RQ's records say of one reading (see the module's docstring)."""
    task_job = Job.fetch(task_id, connection=connection)
    range_jobs = _range_jobs(connection, task_job.origin, task_id)
    worker_of = {task_id: task_job.worker_name}
    worker_of.update({j.id: j.worker_name for j in range_jobs})
    plan = followed["plan"] or []
    steps = json.loads(connection.hget(keys.task(task_id), "steps") or "[]")
    parsed = (
        next((_epoch(s.get("ended_at")) for s in steps if s.get("name") == "parsing"), None)
        or ended
    )
    # A range saved less than a poll before the task ended is never seen saved (its ranges
    # are deleted with the task's end): it was saved before the parsing step ended. So the
    # ranges' times are to the poll's 0.1 s, their end at most the parsing step's.
    saved = {i: min(t, parsed) for i, t in followed["saved"].items()}  # seen ≤ 0.1 s late
    for _, index in followed["held"]:
        saved.setdefault(index, parsed)
    ranges = []
    for (reader, index), (first, _) in followed["held"].items():
        if index in saved and saved[index] >= first:
            ranges.append(
                {
                    "range": index,
                    "reader": "task" if reader == task_id else "range",
                    "worker": worker_of.get(reader, "?"),
                    "claimed": first - started,
                    "saved": saved[index] - started,
                    "seconds": saved[index] - first,
                }
            )
    ranges.sort(key=lambda r: r["claimed"])
    gaps: dict[str, list[float]] = {}
    for worker in sorted({r["worker"] for r in ranges}):
        mine = [r for r in ranges if r["worker"] == worker]
        gaps[worker] = [b["claimed"] - a["saved"] for a, b in zip(mine, mine[1:])]
    last_saved = max(saved.values()) - started if saved else None
    last_by_worker = [max(r["saved"] for r in ranges if r["worker"] == w) for w in gaps]
    task_saves = [r["saved"] for r in ranges if r["reader"] == "task"]
    outcomes = [j.return_value() or {} for j in range_jobs]
    waits = [
        (j.started_at - j.enqueued_at).total_seconds()
        for j in range_jobs
        if j.started_at and j.enqueued_at
    ]
    return {
        "plan_s": followed["plan_at"] - started if followed["plan_at"] else None,
        "reading_s": (
            last_saved - (followed["plan_at"] - started)
            if last_saved is not None and followed["plan_at"]
            else None
        ),
        "together_s": parsed - started - last_saved if last_saved is not None else None,
        "after_s": ended - parsed,
        "ranges_planned": len(plan),
        "ranges_seen": len({r["range"] for r in ranges}),
        "by_task": [r["seconds"] for r in ranges if r["reader"] == "task"],
        "by_range_jobs": [r["seconds"] for r in ranges if r["reader"] == "range"],
        "task_waited_s": (last_saved - max(task_saves)) if task_saves and last_saved else 0.0,
        # The first worker out of ranges, idle until the last range was saved.
        "end_idle_s": max(last_by_worker) - min(last_by_worker) if len(gaps) > 1 else 0.0,
        "range_jobs": len(range_jobs),
        "range_jobs_read": sum("read" in o for o in outcomes),
        "range_jobs_idle": sum("nothing_to_read" in o for o in outcomes),
        "queue_wait_s": waits,
        "gaps_s": gaps,
        "ranges": ranges,
    }


def read_scan(
    svc: Services,
    connection: redis.Redis,
    data: bytes,
    count: int,
    label: str,
    log: Log,
    keep_logs: Path | None = None,
) -> dict[str, Any]:
    """One measurement: `count` fresh, warm workers read the scan; its figures."""
    connection.flushdb()
    prefix = f"scan-{label}"
    with workers(svc.redis_url, count, svc.workdir, prefix=prefix):
        _wait_warm(svc.workdir, prefix, count)
        if Worker.count(connection=connection) != count:
            raise RuntimeError(
                f"{Worker.count(connection=connection)} workers registered, expected {count}"
            )
        log(f"scan split: the {PAGES}-page scan, {count} worker(s) ({label})")
        s = measure.session()
        prepared = s.prepare_request(
            requests.Request(
                "POST",
                f"{svc.base}/api/documents",
                files=[("files", (f"scan-{PAGES}-{label}.pdf", data, "application/pdf"))],
            )
        )
        cpu_before = _cpu_ticks()
        started = time.time()
        _, response = measure.send(s, prepared, 202)
        task_id = response.json()["tasks"][0]["id"]
        followed = _follow(connection, task_id, TIMEOUT)
        cpu_after = _cpu_ticks()
        task = s.get(f"{svc.base}/api/tasks/{task_id}", timeout=30).json()
        s.close()
        result = task.get("result") or {}
        if (
            task.get("status") != "succeeded"
            or result.get("pages") != PAGES
            or result.get("ocr_pages") != PAGES
        ):
            raise RuntimeError(
                f"the {PAGES}-page scan with {count} worker(s) ended "
                f"{task.get('status')!r}, result {result}, error "
                f"{task.get('error')}"
            )
        ended = _epoch(connection.hget(keys.task(task_id), "ended_at"))
        if ended is None:
            raise RuntimeError("the scan's task has no ended_at")
        timeline = _timeline(connection, task_id, started, ended, followed)
        if keep_logs is not None:
            keep_logs.mkdir(parents=True, exist_ok=True)
            for path in svc.workdir.glob(f"worker-{prefix}-*.log"):
                shutil.copy(path, keep_logs / path.name)
    elapsed = cpu_after[2] - cpu_before[2]
    return {
        "workers": count,
        "label": label,
        "seconds": ended - started,
        "characters": result.get("characters"),
        "busy_cores": (cpu_after[0] - cpu_before[0]) / elapsed,
        "steal_cores": (cpu_after[1] - cpu_before[1]) / elapsed,
        **timeline,
    }


def run(log: Log, keep_logs: Path | None = None) -> dict[str, Any]:
    data = scan_pdf(PAGES)
    log(
        f"scan split: a {PAGES}-page scan ({len(data) / 2**20:.1f} MiB), read by "
        + ", then ".join(f"{n} worker{'s' if n > 1 else ''}" for n in ORDER)
        + " (redis-server, gunicorn and workers of its own)"
    )
    runs = []
    with services() as svc:
        connection = redis.Redis.from_url(svc.redis_url)
        for index, count in enumerate(ORDER):
            runs.append(
                read_scan(svc, connection, data, count, f"{index + 1}w{count}", log, keep_logs)
            )
            log(f"scan split: {runs[-1]['seconds']:.1f} s with {count} worker(s)")
        connection.close()
    t1 = [r["seconds"] for r in runs if r["workers"] == 1]
    t2 = [r["seconds"] for r in runs if r["workers"] == 2]
    return {
        "speedup": statistics.mean(t1) / statistics.mean(t2),
        "t1": t1,
        "t2": t2,
        "scan_bytes": len(data),
        "runs": runs,
    }


def figures(found: dict[str, Any]) -> dict[str, float]:
    return {"scan_split_speedup": round(found["speedup"], 3)}


def _secs(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} s" if values else "-"


def describe(found: dict[str, Any]) -> list[str]:
    """The context lines of the bench's table: the figure, then one line a measurement."""
    t1 = " and ".join(f"{t:.1f}" for t in found["t1"])
    t2 = " and ".join(f"{t:.1f}" for t in found["t2"])
    lines = [
        f"scan split: a {PAGES}-page scan (200 dpi, {OCR_LINES} English + 2 Chinese lines "
        f"a page, {found['scan_bytes'] / 2**20:.1f} MiB) from upload to succeeded: "
        f"T1 {t1} s with 1 worker, T2 {t2} s with 2 (order "
        f"{', '.join(map(str, ORDER))} workers); speedup T1 / mean T2 = "
        f"{found['speedup']:.2f} (ideal 2)"
    ]
    for r in found["runs"]:
        gaps = [g for worker in r["gaps_s"].values() for g in worker]
        lines.append(
            f"scan split, {r['workers']} worker(s) ({r['label']}): {r['seconds']:.1f} s = "
            f"{r['plan_s'] or 0:.1f} s to the plan of {r['ranges_planned']} ranges of "
            f"{RANGE_PAGES} pages + {r['reading_s'] or 0:.1f} s reading them + "
            f"{r['together_s'] or 0:.1f} s put together + {r['after_s']:.1f} s chunked, embedded, "
            f"indexed; ranges read by "
            f"the task's job {len(r['by_task'])} (median {_secs(r['by_task'])}), by range jobs "
            f"{len(r['by_range_jobs'])} (median {_secs(r['by_range_jobs'])}); range jobs "
            f"{r['range_jobs']} ({r['range_jobs_idle']} found nothing to read; queued "
            f"{_secs(r['queue_wait_s'])} median, {max(r['queue_wait_s'], default=0):.1f} s at "
            f"most); the first worker out of ranges sat idle {r['end_idle_s']:.1f} s before the "
            f"last was saved (the task's job waited {r['task_waited_s']:.1f} s of it); "
            f"a worker's gaps between two ranges {sum(gaps):.1f} s in all "
            f"({max(gaps, default=0):.1f} s at most); machine {r['busy_cores']:.2f} cores busy, "
            f"{r['steal_cores']:.2f} stolen"
        )
    return lines


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.scan_split")
    parser.add_argument("--keep-logs", type=Path, help="copy the workers' logs to this folder")
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="print each range: reader, worker, claimed and saved (s)",
    )
    args = parser.parse_args()
    result = run(
        lambda message: print(f"[bench] {message}", file=sys.stderr, flush=True), args.keep_logs
    )
    print("\n".join(describe(result)))
    if args.timeline:
        for r in result["runs"]:
            print(f"-- {r['label']}: {r['workers']} worker(s), {r['seconds']:.1f} s")
            for x in r["ranges"]:
                print(
                    f"   range {x['range']:2d} {x['reader']:5s} {x['worker']:>20s} "
                    f"claimed {x['claimed']:6.1f} saved {x['saved']:6.1f} "
                    f"({x['seconds']:.1f} s)"
                )
    print(json.dumps(figures(result)), flush=True)
