"""`python -m bench.replica_alone`: submit_ratio and submit_ratio_replica alone (bench.replica),
measured exactly as `make bench` measures them, in a minute instead of the whole bench's eight.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid

import redis

import bench.__main__ as full  # the submit measurement and its scale live there
from bench.replica import attached, waits
from bench.servers import services


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replica_alone")
    parser.add_argument(
        "--rounds",
        type=int,
        default=full.SUBMIT_ROUNDS,
        help=f"pairs of rounds per measurement (default {full.SUBMIT_ROUNDS})",
    )
    args = parser.parse_args(argv)
    full.SUBMIT_ROUNDS = args.rounds
    nonce = uuid.uuid4().hex[:8]
    with services() as svc:
        full.log(
            f"submit latency: {args.rounds} interleaved rounds x {full.SUBMIT_PER_ROUND} "
            "per side, no replica"
        )
        plain = full.bench_submit(svc, nonce)
        redis.Redis.from_url(svc.redis_url).flushdb()
        full.log("the same with one replica attached")
        with attached(svc):
            before = waits(svc.redis_url)  # after the probes of its attachment
            with_replica = full.bench_submit(svc, nonce + "-r")
            with_replica["waits"] = waits(svc.redis_url) - before
    figures = {
        "submit_ratio": round(plain["ratio"], 4),
        "submit_ratio_replica": round(with_replica["ratio"], 4),
    }
    for line in full.describe_submit(plain, with_replica):
        print(line)
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
