"""Server-side records of signed-in page sessions, so that signing out revokes every copy.

A signed cookie alone cannot be taken back: a copy made before sign-out would stay valid until
it expires. So signing in stores a record under a random session id, the cookie carries the id,
and the web refuses a cookie whose record is gone. The record expires with the cookie (the web
passes the cookie's lifetime as `ttl_seconds`), so nothing needs cleaning up.
"""

from __future__ import annotations

import secrets

from redis import Redis

from jobs.core import keys


def start_session(connection: Redis, tenant: str, ttl_seconds: int) -> str:
    """Record a new session of `tenant`; returns its id (256 random bits, hex)."""
    session_id = secrets.token_hex(32)
    connection.set(keys.web_session(session_id), tenant, ex=max(1, int(ttl_seconds)))
    return session_id


def session_tenant(connection: Redis, session_id: str) -> str | None:
    """The tenant a live session is signed in as; None once it ended or expired (one read)."""
    value = connection.get(keys.web_session(session_id))
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def end_session(connection: Redis, session_id: str) -> None:
    """Sign a session out everywhere its cookie went; ending an ended session is harmless."""
    connection.delete(keys.web_session(session_id))
