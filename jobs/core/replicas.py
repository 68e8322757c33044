"""An upload confirmed by a replica before it is accepted (docs/architecture.md §17): WAIT, when one
is attached.

WAIT waits for the replication offset of the connection it is sent on (that of that connection's
last write). So it is sent at the end of a pipeline that holds one of the upload's LAST writes:
the replication stream is one ordered log, so a replica that has that offset has every earlier
write of the upload too, whichever pooled connection sent them (the claim's, the webhook
event's). A pipeline runs on one connection, so WAIT there cannot land on another.

Whether replicas are attached is read by the claim script itself (INFO replication, the replicas
it lists `online`), which returns the count with its answer: no extra round trip, and a primary
without replicas (or a single Redis) never waits — WAIT with none attached would block for its
whole timeout. A server that refuses INFO (fakeredis; an ACL without @dangerous) is taken as one
without replicas, with a warning once per process: uploads still work, unconfirmed. Health's
`replication` asks ROLE.

An operator sees uploads going unconfirmed: the claim counts each one accepted without a
replica to confirm it (`intake_uploads_unconfirmed_total{reason}`): `role_refused` (the server
would not say which replicas it has: grant INFO and ROLE to know) or `no_replica` (a primary
with none online). A single Redis without replicas is a normal deployment and counts every
upload as `no_replica`: the counter states a fact, and only the operator knows whether replicas
are meant to run, so alert on it (or on health's `replication.replicas_online` being 0) only
where they are.
"""

from __future__ import annotations

import logging
from typing import Any

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import ResponseError

from jobs.core.exceptions import NotReplicated
from jobs.core.settings import Settings

log = logging.getLogger(__name__)
_warned = [False]
UNCONFIRMED = "uploads_unconfirmed_total"


def attached(role: Any) -> int:
    """How many replicas a ROLE reply lists as online (0 unless the server is a primary).

    `role` is the raw reply (`[b"master", offset, [[ip, port, offset], …]]`), or an exception
    the server answered instead (ROLE refused): then 0, warned once.
    """
    if isinstance(role, Exception):
        _refused(role)
        return 0
    if _name(role) != "master":
        return 0
    return len(role[2])


def _refused(reason: Any) -> None:
    if not _warned[0]:
        _warned[0] = True
        log.warning(
            "The server does not say which replicas it has (%s): uploads are not "
            "confirmed by a replica (WAIT)",
            reason,
        )


def reported(online: int) -> int:
    """How many replicas can confirm an upload, from the count its claim returned (-1: the
    server refused INFO, warned once)."""
    if online < 0:
        _refused("INFO replication refused")
        return 0
    return online


def _name(role: Any) -> str:
    """`master`, `slave` or `sentinel` from a ROLE reply (bytes or str, as decoded or not)."""
    if not role:
        return "unknown"
    first = role[0]
    return first.decode() if isinstance(first, bytes) else str(first)


def describe(role: Any) -> dict[str, Any]:
    """Health's `replication`: the server's role, the replicas online, and whether an upload
    now would be confirmed by one."""
    refused = isinstance(role, Exception)
    online = 0 if refused else attached(role)
    return {
        "role": "unknown" if refused else _name(role),
        "replicas_online": online,
        "uploads_confirmed": online > 0,
        "role_refused": refused,
    }


def status(connection: Redis) -> dict[str, Any]:
    """`describe` of the server `connection` talks to now (ROLE, one round trip)."""
    try:
        role: Any = connection.execute_command("ROLE")
    except ResponseError as refused:
        role = refused
    return describe(role)


def queue_wait(pipe: Pipeline, settings: Settings) -> None:
    """Queue `WAIT 1 <replica_wait_ms>` as the pipeline's last command: its reply, the pipeline's
    last, is how many replicas confirmed everything written before it (see `confirm`)."""
    pipe.execute_command("WAIT", 1, settings.replica_wait_ms)


def confirm(acknowledged: int, settings: Settings) -> None:
    """Raise NotReplicated when no replica confirmed within the timeout (WAIT answered 0)."""
    if int(acknowledged) < 1:
        raise NotReplicated(settings.replica_wait_ms)
