"""What `ingest --sync` remembers between runs: the documents one folder brought into a tenant.

Why a record of its own: a document id is a path relative to the folder, and a tenant's
knowledge base also holds documents from the API, the pages and other folders. A sync removes
only what an earlier sync of the same source submitted and whose file is now gone, so it never
deletes a document it did not bring. New and changed files need no record: submitting them is
enough, since the idempotency key (tenant, document id, content, pipeline version) answers an
unchanged file with its existing task instead of a new one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from redis import Redis

from jobs import keys


@dataclass(frozen=True)
class FolderRecord:
    """The document ids a source (a folder's absolute path, or a name the user gives) synced."""

    connection: Redis
    tenant: str
    source: str

    @property
    def key(self) -> str:
        return keys.folder_sync(self.tenant, self.source)

    def documents(self) -> set[str]:
        return {member.decode() for member in self.connection.smembers(self.key)}

    def add(self, document_ids: Iterable[str]) -> None:
        ids = list(document_ids)
        for start in range(0, len(ids), 1000):
            self.connection.sadd(self.key, *ids[start:start + 1000])

    def forget(self, document_id: str) -> None:
        self.connection.srem(self.key, document_id)


def removed(previous: Iterable[str], present: Iterable[str]) -> list[str]:
    """The documents of an earlier sync whose file is no longer in the folder, in order."""
    return sorted(set(previous) - set(present))
