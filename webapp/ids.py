"""The shape of task and batch ids in URLs: 32 lowercase hex characters (jobs.tasks.new_id).

Why check the shape at the edge: an id is spliced into Redis key names, so `<id>:tasks` would
name another record (a list, not a hash) and the read would fail with WRONGTYPE. A route that
takes `<hexid:...>` never sees anything else; a malformed id is a plain 404 before any read.
"""
from __future__ import annotations

import re

from flask import Flask
from werkzeug.routing import BaseConverter

PATTERN = "[0-9a-f]{32}"
_ID = re.compile(PATTERN)


class HexIdConverter(BaseConverter):
    """`<hexid:task_id>`: matches an id and nothing else, so other paths fall through to 404."""

    regex = PATTERN


def is_id(value: str | None) -> bool:
    """For ids that arrive outside the path (a query parameter)."""
    return value is not None and _ID.fullmatch(value) is not None


def init_app(app: Flask) -> None:
    """Before any blueprint: a rule looks up its converters when it is added."""
    app.url_map.converters["hexid"] = HexIdConverter
