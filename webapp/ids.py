"""Task and batch ids in URLs: the shape jobs makes them in (jobs.ID_PATTERN, jobs.is_id).

Why check the shape at the edge: an id is spliced into Redis key names, so `<id>:tasks` would
name another record (a list, not a hash) and the read would fail with WRONGTYPE. A route that
takes `<hexid:...>` never sees anything else; a malformed id is a plain 404 before any read.
"""

from __future__ import annotations

from flask import Flask
from werkzeug.routing import BaseConverter

from jobs import ID_PATTERN, is_id


class HexIdConverter(BaseConverter):
    """`<hexid:task_id>`: matches an id and nothing else, so other paths fall through to 404."""

    regex = ID_PATTERN


__all__ = ["HexIdConverter", "init_app", "is_id"]


def init_app(app: Flask) -> None:
    """Before any blueprint: a rule looks up its converters when it is added."""
    app.url_map.converters["hexid"] = HexIdConverter
