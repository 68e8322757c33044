"""What `ingest --sync` remembers between runs: the documents one folder brought into a tenant,
and which version of each.

Why a record of its own: a document id is a path relative to the folder, and a tenant's
knowledge base also holds documents from the API, the pages and other folders, some under the
same ids. A sync removes only what an earlier sync of the same source submitted, whose file is
now gone, and whose current version is still the task that sync submitted: a document another
folder or an upload replaced since (even one still pending) is theirs, and stays. New and
changed files need no record to be submitted: the idempotency key (tenant, document id,
content, pipeline version) answers an unchanged file with its existing task instead of a new
one; the record keeps that task as the version this folder brought.

Records written by releases that kept only ids hold no version: such a document cannot be told
apart from one replaced since, so a sync leaves it in place (and says so) once its file is
gone; while its file is there, the next sync records the version it brings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from redis import Redis

from jobs.core import keys


@dataclass(frozen=True)
class FolderRecord:
    """The documents a source (a folder's absolute path, or a name the user gives) synced."""

    connection: Redis
    tenant: str
    source: str

    @property
    def key(self) -> str:
        return keys.folder_sync_versions(self.tenant, self.source)

    @property
    def legacy_key(self) -> str:
        return keys.folder_sync(self.tenant, self.source)

    def documents(self) -> dict[str, str | None]:
        """document id → the task id of the version this source brought (None: not known, an
        id recorded without its version)."""
        pipe = self.connection.pipeline(transaction=False)
        pipe.smembers(self.legacy_key)
        pipe.hgetall(self.key)
        legacy, versions = pipe.execute()
        found: dict[str, str | None] = {member.decode(): None for member in legacy}
        found.update((k.decode(), v.decode()) for k, v in versions.items())
        return found

    def add(self, brought: Mapping[str, str]) -> None:
        """Record document id → task id of what this sync submitted (or found unchanged)."""
        items = list(brought.items())
        for start in range(0, len(items), 1000):
            piece = dict(items[start : start + 1000])
            pipe = self.connection.pipeline()
            pipe.hset(self.key, mapping=piece)
            pipe.srem(self.legacy_key, *piece)
            pipe.execute()

    def forget(self, document_id: str) -> None:
        pipe = self.connection.pipeline()
        pipe.hdel(self.key, document_id)
        pipe.srem(self.legacy_key, document_id)
        pipe.execute()


def removed(previous: Iterable[str], present: Iterable[str]) -> list[str]:
    """The documents of an earlier sync whose file is no longer in the folder, in order."""
    return sorted(set(previous) - set(present))
