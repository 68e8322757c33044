"""The task hash's one owner: the names of its fields, what each state change writes there,
and the typed record every reader gets (`TaskRecord`).

Why one module: a field written under two spellings, or a change that clears a field in one
place and not in another, leaves a task the API shows wrongly. So every writer of a task's state
(the submit, a person's cancel and Retry, an attempt's start, progress and end, the reconciler)
takes its field/value pairs from the functions below (`as_argv` hands them to a script), and
the names of the fields a Lua script reads or compares are rendered into its source once, at
load (`SCRIPT_NAMES`, jobs.core.scripts: `{{STATUS}}`): no script spells a field of the task
hash (tests/unit/tasks/test_record.py holds that). A reader gets a `TaskRecord`, whose
attributes are the fields' names (the same test holds that too), so no reader spells a field
either: a typo is mypy's error, not a silent ''.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from jobs.tasks import states

# What the submit writes, read by the task JSON and the worker.
ID, TENANT, BATCH_ID, DOCUMENT_ID = "id", "tenant", "batch_id", "document_id"
FILENAME, KIND, SIZE, QUEUE = "filename", "kind", "size", "queue"
CREATED_AT, PIPELINE_VERSION, TRACE_ID = "created_at", "pipeline_version", "trace_id"
IDEMPOTENCY, VERSION = "idempotency", "version"
# The content's sha256, and (a re-index) the task whose stored original this one reads.
SHA256, ORIGINAL_OF = "sha256", "original_of"
# The state: what the task JSON shows of where the task is.
STATUS, CURRENT_STEP, STEP_DETAIL, PROGRESS, STEPS = (
    "status",
    "current_step",
    "step_detail",
    "progress",
    "steps",
)
ATTEMPTS, MAX_ATTEMPTS, NEXT_ATTEMPT_AT = "attempts", "max_attempts", "next_attempt_at"
STARTED_AT, ENDED_AT, UPDATED_AT, ERROR, RESULT = (
    "started_at",
    "ended_at",
    "updated_at",
    "error",
    "result",
)
# The fences: which attempt and which run own the task, and the requests already applied.
ATTEMPT_ID, RUN, JOB_ID, REPLACED_JOB = "attempt_id", "run", "job_id", "replaced_job"
CANCEL_REQUEST, CANCELED_FROM = "cancel_request", "canceled_from"
RETRY_REQUEST, RETRIED_FROM = "retry_request", "retried_from"

FIELDS: tuple[str, ...] = (
    ID,
    TENANT,
    BATCH_ID,
    DOCUMENT_ID,
    FILENAME,
    KIND,
    SIZE,
    QUEUE,
    CREATED_AT,
    PIPELINE_VERSION,
    TRACE_ID,
    IDEMPOTENCY,
    VERSION,
    SHA256,
    ORIGINAL_OF,
    STATUS,
    CURRENT_STEP,
    STEP_DETAIL,
    PROGRESS,
    STEPS,
    ATTEMPTS,
    MAX_ATTEMPTS,
    NEXT_ATTEMPT_AT,
    STARTED_AT,
    ENDED_AT,
    UPDATED_AT,
    ERROR,
    RESULT,
    ATTEMPT_ID,
    RUN,
    JOB_ID,
    REPLACED_JOB,
    CANCEL_REQUEST,
    CANCELED_FROM,
    RETRY_REQUEST,
    RETRIED_FROM,
)
#: What a script of the task hash may name (`{{STATUS}}` is rendered 'status'; jobs.core.scripts).
SCRIPT_NAMES: dict[str, str] = {name.upper(): name for name in FIELDS}
#: The fields that hold a number (a missing one reads 0).
INT_FIELDS: frozenset[str] = frozenset({SIZE, VERSION, PROGRESS, ATTEMPTS, MAX_ATTEMPTS, RUN})

# The words a status shows before a worker says more.
WAITING_WORDS, STARTING_WORDS, CANCELED_WORDS = "Waiting for a worker", "Starting", "Canceled"
FIRST_STEP = "parsing"

Fields = dict[str, str | int]


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """A task's hash as read, each field typed: '' (a number: 0) where the hash has none.

    Built from an HGETALL (`from_hash`) or an HMGET of some fields (`from_row`); the fields not
    read are '' or 0 too, so a reader of a partial record must have read what it uses.
    `steps`, `error` and `result` are the JSON text the hash keeps: a reader decodes what it
    shows. Frozen: a change is written through the functions below, never into a record.
    """

    id: str = ""
    tenant: str = ""
    batch_id: str = ""
    document_id: str = ""
    filename: str = ""
    kind: str = ""
    size: int = 0
    queue: str = ""
    created_at: str = ""
    pipeline_version: str = ""
    trace_id: str = ""
    idempotency: str = ""
    version: int = 0
    sha256: str = ""
    original_of: str = ""
    status: str = ""
    current_step: str = ""
    step_detail: str = ""
    progress: int = 0
    steps: str = ""
    attempts: int = 0
    max_attempts: int = 0
    next_attempt_at: str = ""
    started_at: str = ""
    ended_at: str = ""
    updated_at: str = ""
    error: str = ""
    result: str = ""
    attempt_id: str = ""
    run: int = 0
    job_id: str = ""
    replaced_job: str = ""
    cancel_request: str = ""
    canceled_from: str = ""
    retry_request: str = ""
    retried_from: str = ""

    _plans: ClassVar[dict[tuple[str, ...], _Plan]] = {}

    @classmethod
    def from_hash(cls, raw: Mapping[bytes, bytes] | Mapping[str, str]) -> TaskRecord:
        """The record of a hash as HGETALL returns it, or as text (a webhook event's copy of
        the task); names the task hash does not have are left out."""
        if raw and isinstance(next(iter(raw)), str):
            text = cast(Mapping[str, str], raw)
            return cls.from_row(FIELDS, [_encoded(text.get(name)) for name in FIELDS])
        read = cast(Mapping[bytes, bytes], raw)
        return cls.from_row(FIELDS, [read.get(name) for name in _ENCODED])

    @classmethod
    def from_row(
        cls, names: tuple[str, ...], row: Sequence[bytes | None], *, task_id: str | None = None
    ) -> TaskRecord:
        """The record of an HMGET of `names` (None: the hash has no such field); `task_id`
        when `names` has no ID.

        A batch poll builds 200 of these: each is made without the generated __init__ (a
        frozen dataclass sets each field by name, twice this cost), each slot set once by its
        own descriptor, from a plan made once per tuple of names.
        """
        plan = cls._plans.get(names) or _plan(names)
        record = object.__new__(cls)
        for setter, at in plan.texts:
            value = row[at]
            setter(record, value.decode() if value else "")
        for setter, at in plan.numbers:
            value = row[at]
            setter(record, int(value) if value else 0)
        for setter, default in plan.rest:
            setter(record, default)
        if task_id is not None:
            _SET_ID(record, task_id)
        return record

    def log_context(self) -> dict[str, str]:
        """What a log line of this task carries (jobs.core.logs.event reads these names)."""
        return {ID: self.id, BATCH_ID: self.batch_id, TENANT: self.tenant, TRACE_ID: self.trace_id}


@dataclass(frozen=True)
class _Plan:
    """How `TaskRecord.from_row` fills a record from a row: the slot setter and the row's
    position of each text field read, the same of each number, then every other slot's setter
    and default."""

    texts: tuple[tuple[Any, int], ...]
    numbers: tuple[tuple[Any, int], ...]
    rest: tuple[tuple[Any, str | int], ...]


def _setter(name: str) -> Any:
    return vars(TaskRecord)[name].__set__  # the slot's member descriptor


def _encoded(value: str | None) -> bytes | None:
    return None if value is None else str(value).encode()


def _default(name: str) -> str | int:
    return 0 if name in INT_FIELDS else ""


def _plan(names: tuple[str, ...]) -> _Plan:
    unknown = [name for name in names if name not in FIELDS]
    if unknown:
        raise KeyError(f"not fields of the task hash: {unknown}")
    read = [(_setter(name), at, name in INT_FIELDS) for at, name in enumerate(names)]
    plan = _Plan(
        tuple((setter, at) for setter, at, number in read if not number),
        tuple((setter, at) for setter, at, number in read if number),
        tuple((_setter(name), _default(name)) for name in FIELDS if name not in names),
    )
    TaskRecord._plans[names] = plan
    return plan


_ENCODED = tuple(name.encode() for name in FIELDS)
_SET_ID = _setter(ID)


def value(raw: Any) -> str | int:
    """A Python value as the hash keeps it: '' for none, JSON for a dict or a list."""
    if raw is None:
        return ""
    if isinstance(raw, (dict, list)):
        return json.dumps(raw)
    return raw


def as_argv(fields: Mapping[str, Any]) -> list[str | int]:
    """Field/value pairs, flat, as a script's ARGV carries them (HSET's own order)."""
    return [item for name, raw in fields.items() for item in (name, value(raw))]


def shared(
    *, tenant: str, batch_id: str, created_at: str, queue: str, pipeline_version: str, trace_id: str
) -> Fields:
    """What every task of one submit's batch holds alike (`created`'s `common`)."""
    return {
        TENANT: tenant,
        BATCH_ID: batch_id,
        CREATED_AT: created_at,
        QUEUE: queue,
        PIPELINE_VERSION: pipeline_version,
        TRACE_ID: trace_id,
    }


def created(
    task_id: str,
    common: Mapping[str, Any],
    *,
    document_id: str,
    filename: str,
    kind: str,
    size: int,
    max_attempts: int,
    idempotency: str,
    version: int,
    sha256: str,
    original_of: str | None = None,
) -> Fields:
    """A new task, `pending`; `common` holds what every task of its batch shares (`shared`).
    What the task JSON defaults is left out."""
    return {
        ID: task_id,
        **common,
        DOCUMENT_ID: document_id,
        FILENAME: filename,
        KIND: kind,
        SIZE: size,
        STATUS: states.PENDING,
        MAX_ATTEMPTS: max_attempts,
        IDEMPOTENCY: idempotency,
        VERSION: version,
        SHA256: sha256,
        **({ORIGINAL_OF: original_of} if original_of else {}),
    }


def started(attempt_id: str, now: str) -> Fields:
    """An attempt takes its task (ATTEMPTS goes up by one beside these, in the same script)."""
    return {
        STATUS: states.START.target,
        ATTEMPT_ID: attempt_id,
        STARTED_AT: now,
        ENDED_AT: "",
        ERROR: "",
        NEXT_ATTEMPT_AT: "",
        CURRENT_STEP: FIRST_STEP,
        STEP_DETAIL: STARTING_WORDS,
        UPDATED_AT: now,
    }


def progressed(
    progress: int, current_step: str, step_detail: str, steps: list[dict[str, Any]], now: str
) -> Fields:
    """Where a running attempt is; every write of an attempt carries it."""
    return {
        PROGRESS: progress,
        CURRENT_STEP: current_step,
        STEP_DETAIL: step_detail,
        STEPS: json.dumps(steps),
        UPDATED_AT: now,
    }


def succeeded(result: Mapping[str, Any], pipeline_version: str, now: str) -> Fields:
    """The task is done: the attempt lets go of it in the same write."""
    return {
        STATUS: states.SUCCEED.target,
        ENDED_AT: now,
        RESULT: json.dumps(result),
        ERROR: "",
        NEXT_ATTEMPT_AT: "",
        PIPELINE_VERSION: pipeline_version,
        ATTEMPT_ID: "",
    }


def steps_so_far(record: TaskRecord) -> list[dict[str, Any]]:
    """The steps a record holds so far (an earlier attempt's), which a new attempt extends."""
    return json.loads(record.steps or "[]")


def retrying(error: Mapping[str, Any], next_attempt_at: str, step_detail: str, now: str) -> Fields:
    """An attempt failed (its own word, or the reconciler's after a lost worker) and RQ will
    start another at `next_attempt_at`."""
    target = states.WAIT_FOR_RETRY.target
    return {
        STATUS: target,
        CURRENT_STEP: states.STEP_OF[target],
        STEP_DETAIL: step_detail,
        ERROR: json.dumps(error),
        NEXT_ATTEMPT_AT: next_attempt_at,
        UPDATED_AT: now,
    }


def failed(error: Mapping[str, Any], now: str) -> Fields:
    """An attempt failed for good (a dead letter) and lets go of the task."""
    return {**_failed(error, now), ATTEMPT_ID: ""}


def lost(error: Mapping[str, Any], now: str) -> Fields:
    """The reconciler fails a task whose job failed or vanished behind Intake's back."""
    return _failed(error, now)


def _failed(error: Mapping[str, Any], now: str) -> Fields:
    target = states.FAIL.target
    return {
        STATUS: target,
        CURRENT_STEP: states.STEP_OF[target],
        STEP_DETAIL: error.get("message") or "",
        ERROR: json.dumps(error),
        NEXT_ATTEMPT_AT: "",
        ENDED_AT: now,
        UPDATED_AT: now,
    }


def canceled(request_id: str, now: str) -> Fields:
    """A person's cancel (the script adds CANCELED_FROM, the status it found)."""
    return {**_canceled(now), NEXT_ATTEMPT_AT: "", ERROR: "", CANCEL_REQUEST: request_id}


def canceled_elsewhere(now: str) -> Fields:
    """The reconciler's, for a job canceled outside Intake (rq-dashboard)."""
    return _canceled(now)


def _canceled(now: str) -> Fields:
    target = states.CANCEL.target
    return {
        STATUS: target,
        CURRENT_STEP: states.STEP_OF[target],
        STEP_DETAIL: CANCELED_WORDS,
        ENDED_AT: now,
        UPDATED_AT: now,
    }


def cancel_noted() -> Fields:
    """The last word of a canceled attempt, over its progress (the cancel set the status)."""
    return {
        CURRENT_STEP: states.STEP_OF[states.CANCEL.target],
        STEP_DETAIL: CANCELED_WORDS,
        ERROR: "",
        NEXT_ATTEMPT_AT: "",
    }


def retried(
    *,
    previous: str,
    run: int,
    job_id: str,
    replaced_job: str,
    max_attempts: int,
    request_id: str,
    now: str,
) -> Fields:
    """A person's Retry: a new run (`run`, its own RQ job) with a fresh attempt budget."""
    target = states.RETRY.target
    return {
        STATUS: target,
        CURRENT_STEP: states.STEP_OF[target],
        STEP_DETAIL: WAITING_WORDS,
        PROGRESS: 0,
        ATTEMPTS: 0,
        MAX_ATTEMPTS: max_attempts,
        ERROR: "",
        NEXT_ATTEMPT_AT: "",
        STARTED_AT: "",
        ENDED_AT: "",
        RESULT: "",
        UPDATED_AT: now,
        ATTEMPT_ID: "",
        RUN: run,
        JOB_ID: job_id,
        REPLACED_JOB: replaced_job,
        RETRY_REQUEST: request_id,
        RETRIED_FROM: previous,
    }


def upload_gone(error: Mapping[str, Any] | None) -> Fields:
    """A Retry found the original gone: a failed task's error then says to upload it again
    (and that a Retry cannot help); a canceled one keeps its record as it is."""
    if error is None:
        return {}
    message = f"{error.get('message', '')} Its upload is no longer stored: upload the file again."
    return {ERROR: json.dumps({**error, "retryable": False, "message": message})}
