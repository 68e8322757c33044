"""The ids Intake makes (tasks, batches, events): 128 random bits, hex, and their one shape.

Why a module of its own: every layer makes ids, from the state machine's webhook events to the
submit, and none of them should import another's records to do it; and every edge that takes
one (the API's routes, its OpenAPI, the facade) checks the same shape, spelled here only.
"""

from __future__ import annotations

import re
import secrets

#: The bytes of randomness in an id: 32 lowercase hex characters.
ID_BYTES = 16
#: The shape of every id `new_id` makes (a regular expression, for routes and OpenAPI too).
ID_PATTERN = f"[0-9a-f]{{{2 * ID_BYTES}}}"
_ID = re.compile(ID_PATTERN)


def new_id() -> str:
    """Unguessable, so an id alone reveals nothing of other tasks."""
    return secrets.token_hex(ID_BYTES)


def is_id(value: str | None) -> bool:
    """The shape of every task and batch id: anything else names no task (nor another key,
    since an id is spliced into Redis key names)."""
    return value is not None and _ID.fullmatch(value) is not None
