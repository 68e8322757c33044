"""`python -m bench.profiling [PATH…] [-n N]`: where a request's time goes, in-process.

The same app gunicorn serves in the benchmark (bench.app: Intake plus the bare baselines) runs
against a real local redis-server; requests are built beforehand and handed straight to the WSGI
callable, as gunicorn does, so neither HTTP parsing nor a test client is in the numbers. First
the median wall time per request of each path without the profiler (interleaved rounds), then
for each path cProfile's top functions (cProfile inflates code that makes many small calls:
compare paths and shares, not absolute ms).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

from werkzeug.datastructures import MultiDict
from werkzeug.test import EnvironBuilder

from bench.measure import text_file
from bench.servers import redis_server
from jobs.core import keys

PATHS = ("submit", "bare-enqueue", "poll", "bare-hgetall", "poll-done", "batch", "search")
BATCH_FILES = 200


def environ_factory(path: str, ids: dict[str, str]) -> Callable[[int], dict]:
    """A function n -> a fresh WSGI environ for request n of `path` (files differ per n)."""

    def build(n: int) -> dict:
        if path in ("submit", "bare-enqueue"):
            name, data, ctype = text_file(n, f"profile-{path}")
            url = "/api/documents" if path == "submit" else "/bare/enqueue"
            builder = EnvironBuilder(
                path=url, method="POST", data={"files": (io.BytesIO(data), name, ctype)}
            )
        else:
            url = {
                "poll": f"/api/tasks/{ids['task']}",
                "bare-hgetall": f"/bare/hgetall/{keys.task(ids['task'])}",
                "poll-done": f"/api/tasks/{ids.get('done_task')}",
                "batch": f"/api/batches/{ids.get('batch')}",
                "search": f"/api/search?{urlencode({'q': ids.get('query', '')})}",
            }[path]
            builder = EnvironBuilder(path=url, method="GET")
        return builder.get_environ()

    return build


def succeeded_batch(app, url: str) -> tuple[str, str]:
    """A batch of BATCH_FILES ~2 KB documents, run through the pipeline by an in-process RQ
    SimpleWorker (local embedder), so every task is succeeded with its steps and result; its
    id and its first task's id."""
    from redis import Redis
    from rq import Queue, SimpleWorker

    from jobs.core.settings import QUEUE_NAMES

    files = MultiDict(
        [
            ("files", (io.BytesIO(data), name, ctype))
            for name, data, ctype in (text_file(n, "profile-batch") for n in range(BATCH_FILES))
        ]
    )
    environ = EnvironBuilder(path="/api/documents", method="POST", data=files).get_environ()
    answer = json.loads(b"".join(app(environ, lambda s, h, exc_info=None: None)))
    connection = Redis.from_url(url)
    SimpleWorker(
        [Queue(name, connection=connection) for name in QUEUE_NAMES], connection=connection
    ).work(burst=True, logging_level="WARNING")
    return answer["batch_id"], answer["tasks"][0]["id"]


def call(app, environ: dict) -> str:
    status = []
    body = app(environ, lambda s, h, exc_info=None: status.append(s))
    for _ in body:
        pass
    getattr(body, "close", lambda: None)()
    return status[0]


def warm_up(app, path: str, ids: dict[str, str]) -> None:
    build = environ_factory(path, ids)
    expect = "202" if path in ("submit", "bare-enqueue") else "200"
    for n in range(50):
        status = call(app, build(n))
        if not status.startswith(expect):
            raise RuntimeError(f"{path} answered {status}, expected {expect}")


def time_paths(
    app,
    paths: list[str],
    ids: dict[str, str],
    count: int,
    rounds: int = 10,
) -> dict[str, float]:
    """Median over `rounds` interleaved rounds of the mean ms per request of each path."""
    per_round = max(1, count // rounds)
    samples: dict[str, list[float]] = {p: [] for p in paths}
    for r in range(rounds):
        order = paths if r % 2 == 0 else paths[::-1]
        for path in order:
            build = environ_factory(path, ids)
            environs = [build(10**4 * (r + 1) + n) for n in range(per_round)]
            start = time.perf_counter()
            for environ in environs:
                call(app, environ)
            samples[path].append(1000 * (time.perf_counter() - start) / per_round)
    return {p: statistics.median(v) for p, v in samples.items()}


def profile(
    app, path: str, ids: dict[str, str], count: int, top: int, callees: list[str], sort: str
) -> str:
    build = environ_factory(path, ids)
    environs = [build(10**7 + n) for n in range(count)]
    profiler = cProfile.Profile()
    profiler.enable()
    for environ in environs:
        call(app, environ)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats(sort).print_stats(top)
    for pattern in callees:
        stats.print_callees(pattern)
    return out.getvalue().split("\n", 4)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", metavar="PATH", help=f"any of {', '.join(PATHS)}")
    parser.add_argument("-n", "--count", type=int, default=500)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", default="cumulative", choices=("cumulative", "tottime"))
    parser.add_argument(
        "--callees",
        action="append",
        default=[],
        metavar="REGEX",
        help="also list what functions matching REGEX call (repeatable)",
    )
    args = parser.parse_args()
    unknown = set(args.paths) - set(PATHS)
    if unknown:
        parser.error(f"unknown path(s) {sorted(unknown)}; choose from {', '.join(PATHS)}")
    with tempfile.TemporaryDirectory(prefix="intake-profile-") as tmp:
        with redis_server(Path(tmp)) as (url, _pid):
            os.environ.update(REDIS_URL=url, SECRET_KEY="profile-" + os.urandom(8).hex())
            from bench.app import app

            environ = environ_factory("submit", "")(0)
            body = b"".join(app(environ, lambda s, h, exc_info=None: None))
            ids = {"task": json.loads(body)["tasks"][0]["id"]}
            paths = args.paths or list(PATHS)
            if {"batch", "poll-done"} & set(paths):
                ids["batch"], ids["done_task"] = succeeded_batch(app, url)
            if "search" in paths:
                from redis import Redis

                from bench.search import build_index

                ids["query"] = build_index(Redis.from_url(url), "profile")["query"]
            for path in paths:
                warm_up(app, path, ids)
            timings = time_paths(app, paths, ids, args.count)
            print(
                f"Median ms per request without profiler ({args.count} requests each, "
                "10 interleaved rounds):"
            )
            for path, ms in timings.items():
                print(f"  {path:<13} {ms:7.3f} ms")
            for path in paths:
                print(
                    f"\n=== cProfile of {path} ({args.count} requests), sorted by {args.sort} ==="
                )
                print(profile(app, path, ids, args.count, args.top, args.callees, args.sort))


if __name__ == "__main__":
    main()
