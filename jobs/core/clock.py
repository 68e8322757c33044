"""Times as Intake's records keep them: ISO 8601 in UTC, to the millisecond, with a `Z`.

One format everywhere (task records, steps, the API, logs), written and read here only.
"""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    return iso(datetime.now(UTC))


def iso_in(seconds: float) -> str:
    """The time `seconds` from now."""
    return iso(datetime.fromtimestamp(datetime.now(UTC).timestamp() + seconds, UTC))


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: str | None) -> datetime | None:
    """A time as written by `iso` (or any ISO 8601; naive means UTC), or None if it is not one."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def timestamp(value: str | None) -> float:
    """Seconds since the epoch of an ISO time, 0 for none."""
    moment = parse_iso(value)
    return moment.timestamp() if moment else 0.0
