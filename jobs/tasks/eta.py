"""How long a batch has left (docs/architecture.md §16 "ETA"), from the batch's own finished
documents.

Why from its own documents: a batch's files are usually alike (one folder, one kind), so the
median time its finished documents took is the best guess for the rest, and it adapts to the
embedder and the machine without any configuration. What is left is counted in documents, a
running one by its progress; the workers at work divide it. Until one document has finished
(or while no worker is listening) there is no estimate: `eta_seconds` is null, never a guess.
It reads nothing from Redis: it works on the task rows it is handed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobs.tasks import states

#: Finished documents whose times count (a document that only failed fast counts too).
_FINISHED = (states.SUCCEEDED, states.FAILED)


def seconds_taken(view: dict[str, Any]) -> float | None:
    """How long a finished task took, first start to end (None if not finished or unknown)."""
    if (
        view.get("status") not in _FINISHED
        or not view.get("started_at")
        or not view.get("ended_at")
    ):
        return None
    try:
        started = datetime.fromisoformat(view["started_at"].replace("Z", "+00:00"))
        ended = datetime.fromisoformat(view["ended_at"].replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return max(0.0, (ended - started).total_seconds())


def estimate(rows: Sequence[dict[str, Any]], workers: int) -> int | None:
    """Seconds until no task of the batch is live; 0 once none is; None when unknown.

    `rows`: each task's ``status``, ``progress`` and ``seconds`` (`seconds_taken`)."""
    live = [row for row in rows if row["status"] in states.LIVE]
    if not live:
        return 0 if rows else None
    taken = [row["seconds"] for row in rows if row.get("seconds") is not None]
    if not taken or workers <= 0:
        return None
    left = sum(1 - min(100, max(0, int(row["progress"]))) / 100 for row in live)
    return math.ceil(left * statistics.median(taken) / min(workers, len(live)))
