"""An upload confirmed by a replica before it is accepted (DESIGN §15): WAIT, when one is attached.

WAIT waits for the replication offset of the connection it is sent on (that of that connection's
last write). So it is queued at the end of the pipeline that sends an upload's LAST writes: the
replication stream is one ordered log, so a replica that has that offset has every earlier write
of the upload too, whichever pooled connection sent them (the claim script's, the webhook
event's). A pipeline runs on one connection, so WAIT there cannot land on another.

Whether replicas are attached is learned by ROLE, sent right behind the claim script on its
connection and read with it: no extra round trip, and a primary without replicas (or a single
Redis) never waits — WAIT with none attached would block for its whole timeout. A server that
refuses ROLE (fakeredis; an ACL without @admin) is taken as one without replicas, with a warning
once per process: uploads still work, unconfirmed, as before this check existed.
"""
from __future__ import annotations

import logging
from typing import Any

from redis.client import Pipeline

from jobs.exceptions import NotReplicated
from jobs.settings import Settings

log = logging.getLogger(__name__)
_warned = [False]


def attached(role: Any) -> int:
    """How many replicas a ROLE reply lists as online (0 unless the server is a primary).

    `role` is the raw reply (`[b"master", offset, [[ip, port, offset], …]]`), or an exception
    the server answered instead (ROLE refused): then 0, warned once.
    """
    if isinstance(role, Exception):
        if not _warned[0]:
            _warned[0] = True
            log.warning("ROLE refused (%s): uploads are not confirmed by a replica (WAIT)", role)
        return 0
    if not role or role[0] not in (b"master", "master"):
        return 0
    return len(role[2])


def queue_wait(pipe: Pipeline, settings: Settings) -> None:
    """Queue `WAIT 1 <replica_wait_ms>` as the pipeline's last command: its reply, the pipeline's
    last, is how many replicas confirmed everything written before it (see `confirm`)."""
    pipe.execute_command("WAIT", 1, settings.replica_wait_ms)


def confirm(acknowledged: int, settings: Settings) -> None:
    """Raise NotReplicated when no replica confirmed within the timeout (WAIT answered 0)."""
    if int(acknowledged) < 1:
        raise NotReplicated(settings.replica_wait_ms)
