"""Submit with one replica attached (issue 16): what waiting for its confirmation (WAIT) costs.

`attached(svc)` starts a redis-server replica of the bench's Redis (`--replicaof`, loopback, no
persistence), waits until it confirms a write (WAIT answers 1), and stops it at the end, waiting
until the primary lists none (so later phases measure a plain Redis again). While it runs,
bench.__main__ measures submit exactly as for `submit_ratio`: Intake's upload (ROLE read with the
claim lists a replica, so the upload's last pipeline ends with `WAIT 1 500`) against the same bare
RQ enqueue, interleaved, on the same server. `waits()` counts the WAITs the primary ran (INFO
commandstats), to show the measured path really waited.

`python -m bench.replica_alone [--rounds N]` runs just the two submit measurements (plain, then with
the replica), at the bench's scale unless told fewer rounds.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from bench.servers import Services, _stop, wait_until
from runner.processes import free_port
from runner.redis_service import server_argv


def waits(redis_url: str) -> int:
    """How many WAIT commands the server at `redis_url` has run since it started."""
    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))
    finally:
        client.close()


def confirms(primary: redis.Redis) -> bool:
    """Whether a replica confirms a write of this client's within 200 ms (WAIT on the
    pipeline's connection). Listed online is not enough: just after its first sync a replica
    gets the primary's stream only once it has acknowledged once (up to a second later)."""
    pipe = primary.pipeline(transaction=False)
    pipe.set("bench:replica-probe", "1")
    pipe.execute_command("WAIT", 1, 200)
    confirmed = pipe.execute()[-1] >= 1
    primary.delete("bench:replica-probe")
    return confirmed


@contextmanager
def attached(svc: Services) -> Iterator[int]:
    """A replica of the bench's Redis for the block; yields its pid."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
    primary = redis.Redis.from_url(svc.redis_url, socket_timeout=2)
    host, port = primary.connection_pool.connection_kwargs["host"], free_port()
    workdir = svc.workdir / "replica"
    workdir.mkdir(exist_ok=True)
    log = workdir / "redis.log"
    argv = [
        *server_argv(port, workdir, durable=False, executable=binary),
        "--replicaof",
        host,
        str(primary.connection_pool.connection_kwargs["port"]),
    ]
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    replica = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)

    try:
        wait_until(lambda: confirms(primary), 30, "the replica confirming writes", process, log)
        yield process.pid
    finally:
        _stop(process)
        wait_until(
            lambda: primary.info("replication")["connected_slaves"] == 0,
            15,
            "the primary listing no replica",
        )
        replica.close()
        primary.close()
