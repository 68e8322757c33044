"""One JSON line per event, in web and workers alike, so logs can be searched by task.

Every line carries the task's ids (task_id, batch_id, tenant, and the trace_id the upload
request started with), the step and the attempt where they apply: `grep <task_id>` follows a
document from its upload to its index across processes and hosts.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

LOGGER = "intake"
_CONTEXT_FIELDS = ("task_id", "batch_id", "tenant", "trace_id")
HeldEvent = tuple[str, dict[str, Any], float]  # name, fields, when (time.time())
_held: ContextVar[list[HeldEvent] | None] = ContextVar("intake_held_logs", default=None)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            **getattr(record, "intake", {}),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(stream: Any = None) -> None:
    """Send Intake's events to `stream` (stderr) as JSON lines; idempotent."""
    logger = logging.getLogger(LOGGER)
    if any(isinstance(h.formatter, JsonFormatter) for h in logger.handlers):
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def event(name: str, record: Mapping[str, str] | None = None, **fields: Any) -> None:
    """Log `name` with the task context taken from a task record, plus `fields`."""
    logger = logging.getLogger(LOGGER)
    if not logger.isEnabledFor(logging.INFO):
        return
    context = {k: record[k] for k in _CONTEXT_FIELDS if record and record.get(k)}
    if record and "id" in record:
        context["task_id"] = record["id"]
    held = _held.get()
    if held is None:
        _handle(logger, name, {**context, **fields}, None)
    else:
        held.append((name, {**context, **fields}, time.time()))


@contextmanager
def held() -> Iterator[list[HeldEvent]]:
    """Keep the events logged inside the block, stamped when they happen, for `write`: an
    upload writes its lines (one per document) after its answer is sent, not before it."""
    lines: list[HeldEvent] = []
    token = _held.set(lines)
    try:
        yield lines
    finally:
        _held.reset(token)


def write(lines: list[HeldEvent]) -> None:
    """Write the events `held` kept, in order, with the time each happened."""
    logger = logging.getLogger(LOGGER)
    for name, fields, created in lines:
        _handle(logger, name, fields, created)


def _handle(
    logger: logging.Logger, name: str, fields: dict[str, Any], created: float | None
) -> None:
    # makeRecord + handle is what Logger.info does, less the stack walk for a source line
    # that these lines never show.
    line = logger.makeRecord(
        LOGGER, logging.INFO, __file__, 0, name, (), None, extra={"intake": fields}
    )
    if created is not None:
        line.created, line.msecs = created, (created - int(created)) * 1000
    logger.handle(line)
