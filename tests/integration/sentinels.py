"""A Redis primary, its replica and three Sentinels as real processes on loopback ports.

What production runs for failover (docs/deploying.md), small: a quorum of 2 of 3 Sentinels,
one replica, AOF on both servers. `down-after-milliseconds` is 1 s (production: 5–30 s) so that
a test sees a whole failover in a few seconds; everything else is Redis's own behaviour.
"""

from __future__ import annotations

import signal
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from jobs.core.addresses import sentinel_url
from runner.redis_service import server_argv
from tests.integration.helpers import free_port, poll
from tests.integration.processes import ManagedProcess, ProcessGroup, base_env
from tests.integration.servers import REDIS_SERVER

MASTER = "mymaster"
DOWN_AFTER_MS = 1000


def _probe(port: int) -> redis.Redis:
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        socket_timeout=1,
        socket_connect_timeout=1,
        retry=Retry(NoBackoff(), 0),
    )


class SentinelCluster:
    """`primary_port` and `replica_port` are where the servers started; after a failover
    `master_port()` (what the Sentinels say) is the replica's."""

    def __init__(self, group: ProcessGroup, data_dir: Path) -> None:
        executable = REDIS_SERVER or "redis-server"
        self.group = group
        self.primary_port, self.replica_port = free_port(), free_port()
        self.servers: dict[int, ManagedProcess] = {}
        for port, extra in (
            (self.primary_port, []),
            (self.replica_port, ["--replicaof", "127.0.0.1", str(self.primary_port)]),
        ):
            directory = data_dir / f"redis-{port}"
            directory.mkdir(parents=True, exist_ok=True)
            argv = server_argv(port, directory, durable=True, executable=executable) + extra
            self.servers[port] = group.spawn(f"redis-{port}", argv, base_env(), start=False)
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinels: list[ManagedProcess] = []
        for port in self.sentinel_ports:
            directory = data_dir / f"sentinel-{port}"
            directory.mkdir(parents=True, exist_ok=True)
            config = directory / "sentinel.conf"  # Sentinel rewrites its own config file
            config.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.primary_port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER} 10000\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
            )
            self.sentinels.append(
                group.spawn(
                    f"sentinel-{port}",
                    [executable, str(config), "--sentinel"],
                    base_env(),
                    start=False,
                )
            )

    @property
    def sentinels_setting(self) -> str:
        """REDIS_SENTINELS of the processes under test."""
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    @property
    def url(self) -> str:
        return sentinel_url(self.sentinels_setting, MASTER)

    def env(self) -> dict[str, str]:
        return {"REDIS_SENTINELS": self.sentinels_setting, "REDIS_SENTINEL_MASTER": MASTER}

    def start(self, timeout: float = 30.0) -> SentinelCluster:
        for process in self.servers.values():
            process.start()
        for port in self.servers:
            poll(
                lambda: _probe(port).ping(),  # noqa: B023  (polled in this iteration)
                timeout=timeout,
                message=f"redis-server {port} answering",
                ignore=(redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError),
            )
        poll(
            lambda: _probe(self.replica_port).info("replication"),
            lambda info: info.get("master_link_status") == "up",
            timeout=timeout,
            message="the replica in sync with the primary",
            ignore=(redis.RedisError,),
        )
        for process in self.sentinels:
            process.start()
        # Every Sentinel knows the primary, its replica and the other two (a quorum can act).
        for port in self.sentinel_ports:
            poll(
                lambda: _probe(port).sentinel_master(MASTER),  # noqa: B023  (polled here)
                lambda m: (
                    int(m.get("num-other-sentinels", 0)) == 2 and int(m.get("num-slaves", 0)) == 1
                ),
                timeout=timeout,
                message=f"sentinel {port} sees the replica and the other sentinels",
                ignore=(redis.RedisError,),
            )
        return self

    def master_port(self) -> int | None:
        """The primary's port by a majority of the Sentinels that answer."""
        seen: dict[int, int] = {}
        for port in self.sentinel_ports:
            try:
                address = _probe(port).sentinel_get_master_addr_by_name(MASTER)
            except redis.RedisError:
                continue
            if address:
                seen[int(address[1])] = seen.get(int(address[1]), 0) + 1
        best = max(seen.items(), key=lambda item: item[1], default=None)
        return best[0] if best and best[1] >= 2 else None

    def client(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)

    def kill(self, port: int) -> None:
        """SIGKILL a server: a lost machine, no shutdown, no last fsync."""
        self.servers[port].stop(10, sig=signal.SIGKILL)

    def wait_promoted(self, port: int, timeout: float = 60.0) -> int:
        """Wait until the Sentinels name `port` the primary and it answers as one."""
        poll(
            self.master_port,
            lambda p: p == port,
            timeout=timeout,
            message=f"the Sentinels promoted {port}",
        )
        poll(
            lambda: _probe(port).info("replication")["role"],
            lambda role: role == "master",
            timeout=timeout,
            message=f"redis {port} answering as the primary",
            ignore=(redis.RedisError,),
        )
        return port

    def close(self) -> None:
        for process in [*self.sentinels, *self.servers.values()]:
            process.stop(10)
