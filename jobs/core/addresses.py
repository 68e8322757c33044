"""Addresses as strings: the one URL that names a Sentinel-managed primary, so a single value
passes through argv, environments and the dashboard; and any address as a message may show it,
without its password (`display_url`, the one every layer uses). Pure: it connects to nothing,
so settings can resolve REDIS_SENTINELS without importing a Redis client."""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

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


def display_url(url: str) -> str:
    """`url` without any password (or other parameter), fit for a message.

    A PostgreSQL address (a URL or a conninfo string, INTAKE_VECTOR_DATABASE_URL) keeps its
    user, and pgserver's Unix socket directory in ``?host=``: without it the URL says nothing
    about where the server is. Any other keeps its scheme, host, port and path.
    """
    if url.startswith(("postgres://", "postgresql://")) or ("=" in url and "://" not in url):
        return _display_postgres(url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", "")) if parts.scheme else url


def _display_postgres(url: str) -> str:
    """psycopg reads the address as libpq does (imported here only: the vector engine's)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        return "(an unparsable URL)"
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host") or "")
    port = f":{params['port']}" if params.get("port") else ""
    dbname = str(params.get("dbname") or "")
    if host.startswith("/"):
        return f"postgresql://{user}{port}/{dbname}?host={host}"
    return f"postgresql://{user}{host}{port}/{dbname}"
