"""What a request to the domain can come to, other than success: named exceptions, raised by
jobs (as rq raises NoSuchJobError) and mapped to HTTP once, in webapp/errors.py.

Each carries a `message` written for a person; the pages show the same words the API sends.
Pipeline failures (what a task fails of) are jobs.core.failures, not these.
"""

from __future__ import annotations


class IntakeRefusal(Exception):
    """Base: `code` names the outcome in the API's error object."""

    code = "refused"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(IntakeRefusal):
    """No such task, batch or document for this tenant (another tenant's ids do not exist)."""

    code = "not_found"


class NoSuchTask(NotFound):
    def __init__(self) -> None:
        super().__init__("No such task.")


class NoSuchBatch(NotFound):
    def __init__(self) -> None:
        super().__init__("No such batch.")


class NoSuchDocument(NotFound):
    def __init__(self) -> None:
        super().__init__("No such document.")


class NotNow(IntakeRefusal):
    """The task's status does not allow this action (docs/architecture.md §3): a conflict."""

    code = "conflict"

    def __init__(self, status: str, action: str) -> None:
        verb = {"retry": "retried", "cancel": "canceled"}.get(action, action)
        super().__init__(f"A {status} task cannot be {verb}.")
        self.status, self.action = status, action


class NotRetryable(NotNow):
    """A failed task whose error says no Retry can help: the file itself must change."""

    code = "not_retryable"

    def __init__(self, status: str = "failed") -> None:
        IntakeRefusal.__init__(
            self,
            "This task failed because of its file: retrying cannot "
            "help. Fix the file and upload it again.",
        )
        self.status, self.action = status, "retry"


class UploadExpired(NotNow):
    """The original a Retry needs is no longer stored (jobs.tasks.originals)."""

    code = "upload_expired"

    def __init__(self, status: str) -> None:
        IntakeRefusal.__init__(
            self,
            "The uploaded file of this task is no longer stored "
            "(its document was deleted, or the store lost it); upload "
            "the file again.",
        )
        self.status, self.action = status, "retry"


class NoChunks(NotNow):
    """Only a succeeded task whose chunks are still the indexed version has chunks to show."""

    code = "no_chunks"

    def __init__(self, status: str) -> None:
        message = (
            f"A {status} task has no chunks in the knowledge base; they are shown once "
            "it has succeeded."
            if status != "succeeded"
            else "The chunks of this task are no longer in the knowledge base: its document "
            "was deleted or a newer version replaced them."
        )
        IntakeRefusal.__init__(self, message)
        self.status, self.action = status, "chunks"


class LimitReached(IntakeRefusal):
    """A submit refused whole because a limit would be passed: nothing was registered.

    `limit` names it; `busy` says whether the service is only busy for a moment (waiting work
    of all tenants: 503) rather than refusing what this tenant or the knowledge base would hold
    (429: a tenant's own queue or share, or a full knowledge base, its own or everyone's, which
    only deleting documents empties); `retry_after` is a hint in seconds.
    """

    _LIMITS: dict[str, tuple[str, bool, int, str]] = {
        "queue_full": (
            "queue_full",
            True,
            30,
            "Too many documents are waiting to be processed; try again shortly.",
        ),
        "tenant_full": (
            "tenant_queue_full",
            False,
            30,
            "You have too many documents waiting; try again when some have finished.",
        ),
        "reindex_too_large": (
            "tenant_queue_full",
            False,
            30,
            "Your library has more documents "
            "than may wait at once; re-index it in slices, naming the "
            "documents (document_ids, or the command with ids).",
        ),
        "blob_budget": (
            "storage_full",
            True,
            30,
            "Too many uploaded bytes are waiting to be processed; try again shortly.",
        ),
        "tenant_blob_budget": (
            "tenant_storage_full",
            False,
            30,
            "Your uploads waiting to be "
            "processed, or kept for a Retry, fill your share of the upload "
            "storage; try again when some have finished, or delete failed "
            "documents.",
        ),
        "storage_quota": (
            "storage_quota",
            False,
            3600,
            "Your stored files would pass your "
            "storage quota; delete documents you no longer need first.",
        ),
        "knowledge_base_full": (
            "knowledge_base_full",
            False,
            3600,
            "Your knowledge base is "
            "full (its chunk limit is reached); delete documents you no "
            "longer need first.",
        ),
        "kb_total_full": (
            "knowledge_base_full",
            False,
            3600,
            "The service's knowledge base is "
            "full (all its users together reached its chunk limit): no new "
            "documents are accepted until documents are deleted. Try again "
            "later; deleting documents you no longer need makes room too.",
        ),
    }

    def __init__(self, limit: str) -> None:
        code, busy, retry_after, message = self._LIMITS.get(limit, self._LIMITS["queue_full"])
        super().__init__(message)
        self.limit, self.code = limit, code
        self.busy, self.retry_after = busy, retry_after


class StorageUnavailable(IntakeRefusal):
    """The object store of originals did not answer while an upload was stored (503): the
    claims of the files not stored were taken back (jobs.tasks.unclaim), so sending them again
    once the store answers makes new tasks of them; those stored before stay accepted and a
    resend answers them as duplicates."""

    code = "storage_unavailable"
    retry_after = 10

    def __init__(self) -> None:
        super().__init__(
            "The file store did not answer while your upload was stored; try again shortly."
        )


class NotReplicated(IntakeRefusal):
    """An upload stored on the primary that no replica confirmed in time (docs/architecture.md §17,
    `WAIT`): the service answers 503, and the client sends it again.

    Nothing is lost or doubled by that resend: the upload's tasks, bytes and jobs are all
    written (the primary works on them), so the same files again claim the same idempotency
    keys (docs/architecture.md §9) and answer the same tasks with `duplicate: true`; the resend's
    own WAIT then confirms them. Only the refused request's batch is left over, listing those tasks
    too.
    """

    code = "not_replicated"
    retry_after = 1

    def __init__(self, wait_ms: int) -> None:
        super().__init__(
            f"The upload was stored but no replica confirmed it within {wait_ms} "
            "ms; send it again (it will be recognised as a duplicate)."
        )
        self.wait_ms = wait_ms


class Throttled(IntakeRefusal):
    """A tenant or a client asked for more than its share for now (jobs.core.throttle): 429,
    with `retry_after` in whole seconds. Nothing was done for the refused request."""

    def __init__(self, code: str, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.code, self.retry_after = code, max(1, int(retry_after))


class SearchTimedOut(IntakeRefusal):
    """A search that a read replica did not answer in time (docs/architecture.md §18): 503.

    Why not run it again on the primary: the replica may still be running it, and a search
    slow enough to stall a replica would stall the primary, which every upload and every task
    needs, the same way. The replica is left alone for a while (jobs.kb.read_replicas), so the
    search sent again goes elsewhere."""

    code = "search_timeout"
    retry_after = 5

    def __init__(self) -> None:
        super().__init__(
            "The search did not finish in time on the knowledge base's replica; "
            "try again in a few seconds."
        )
