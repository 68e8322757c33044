"""The ids Intake makes (tasks, batches, events): 128 random bits, hex.

Why a module of its own: every layer makes ids, from the state machine's webhook events to the
submit, and none of them should import another's records to do it.
"""

from __future__ import annotations

import secrets


def new_id() -> str:
    """Unguessable, so an id alone reveals nothing of other tasks."""
    return secrets.token_hex(16)
