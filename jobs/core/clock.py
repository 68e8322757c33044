"""Times as Intake's records keep them: ISO 8601 in UTC, to the millisecond, with a `Z`.

One format everywhere (task records, steps, the API, logs), written and read here only.
"""

from __future__ import annotations

from datetime import datetime, timezone


def now_iso() -> str:
    return iso(datetime.now(timezone.utc))


def iso_in(seconds: float) -> str:
    """The time `seconds` from now."""
    return iso(
        datetime.fromtimestamp(datetime.now(timezone.utc).timestamp() + seconds, timezone.utc)
    )


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: str | None) -> datetime | None:
    """A time as written by `iso` (or any ISO 8601; naive means UTC), or None if it is not one."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def timestamp(value: str | None) -> float:
    """Seconds since the epoch of an ISO time, 0 for none."""
    moment = parse_iso(value)
    return moment.timestamp() if moment else 0.0
