"""Redis addresses as strings: the one URL that names a Sentinel-managed primary, so a single
value passes through argv, environments and the dashboard. Pure: it connects to nothing, so
settings can resolve REDIS_SENTINELS without importing a Redis client."""

from __future__ import annotations

from urllib.parse import quote

SENTINEL_SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379


def sentinel_url(sentinels: str, master: str, db: int = 0) -> str:
    """The address of a Sentinel-managed primary, from REDIS_SENTINELS (`host:port,…`)."""
    hosts = []
    for item in sentinels.split(","):
        item = item.strip()
        if not item:
            continue
        host, separator, port = item.rpartition(":")
        if not separator:
            host, port = item, str(DEFAULT_SENTINEL_PORT)
        if not host or not port.isdigit():
            raise ValueError(f"REDIS_SENTINELS={sentinels!r}: {item!r} is not host:port")
        hosts.append(f"{host}:{port}")
    if not hosts:
        raise ValueError(f"REDIS_SENTINELS={sentinels!r} names no Sentinel (host:port,…)")
    if not master or "/" in master:
        raise ValueError(f"REDIS_SENTINEL_MASTER={master!r} is not a master name")
    return f"{SENTINEL_SCHEME}://{','.join(hosts)}/{quote(master, safe='')}/{db}"
