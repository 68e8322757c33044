"""Searches taking turns on the knowledge base's read replicas (INTAKE_KB_REPLICA_URLS).

Why they can: the search scripts only read (jobs.kb.retrieval), and a replica runs a script
that only reads. With replicas, the rate of searches grows with their cores instead of being
bounded by the one core of the knowledge base's Redis (docs/deploying.md, "Where the knowledge
base lives, and why").

A replica that does not answer (down, still loading its copy, or stalled past the web's 2 s
read timeout) is left alone for DOWN_SECONDS while its turns go to the primary, so a lost
replica costs one slow search, not every one after it. A replica may lag its primary by a few
milliseconds: there a document is found a moment after its task succeeded.

A refused connection (the replica down or loading) ran nothing, so that search goes on on the
primary at once. A timeout is different (docs/architecture.md §18): the replica may still be
running the search, and whatever made it slow there (a stalled replica, or a search that costs
that much) would hold the primary, which every upload and task needs, the same way. So that
search is not run again: it answers SearchTimedOut (503 with Retry-After), and only the searches
after it take the primary's turn while the replica is left alone.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from jobs.core.exceptions import SearchTimedOut
from jobs.kb.retrieval import Retriever

T = TypeVar("T")
DOWN_SECONDS = 10.0


class ReadReplicas:
    def __init__(self, primary: Retriever, replicas: list[Retriever]) -> None:
        self.primary = primary
        self.replicas = replicas
        self.down_until = [0.0] * len(replicas)
        self.turn = itertools.count()

    def read(self, call: Callable[[Retriever], T]) -> T:
        """`call` on the next replica in turn unless it is left alone, else on the primary.
        Raises SearchTimedOut when the replica timed out (not run again on the primary)."""
        if self.replicas:
            number = next(self.turn) % len(self.replicas)
            if self.down_until[number] <= time.monotonic():
                try:
                    return call(self.replicas[number])
                except RedisTimeoutError:
                    self.down_until[number] = time.monotonic() + DOWN_SECONDS
                    raise SearchTimedOut() from None
                except RedisConnectionError:  # refused, reset, LOADING: nothing ran there
                    self.down_until[number] = time.monotonic() + DOWN_SECONDS
        return call(self.primary)
