"""The task hash's one owner: the names of its fields, and what each state change writes there.

Why one module: a field written under two spellings, or a change that clears a field in one
place and not in another, leaves a task the API shows wrongly. So every writer of a task's state
(the submit, a person's cancel and Retry, an attempt's start, progress and end, the reconciler)
takes its field/value pairs from the functions below (`as_argv` hands them to a script), and
the names of the fields a Lua script reads or compares are rendered into its source once, at
load (`SCRIPT_NAMES`, jobs.core.scripts: `{{STATUS}}`): no script spells a field of the task
hash (tests/unit/tasks/test_record.py holds that).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

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

# The words a status shows before a worker says more.
WAITING_WORDS, STARTING_WORDS, CANCELED_WORDS = "Waiting for a worker", "Starting", "Canceled"
FIRST_STEP = "parsing"

Fields = dict[str, str | int]


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
    """A new task, `pending`; `common` holds what every task of its batch shares (TENANT,
    BATCH_ID, CREATED_AT, QUEUE, PIPELINE_VERSION, TRACE_ID). What the task JSON defaults is
    left out."""
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


def steps_so_far(record: Mapping[str, str]) -> list[dict[str, Any]]:
    """The steps a record holds so far (an earlier attempt's), which a new attempt extends."""
    return json.loads(record.get(STEPS) or "[]")


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
