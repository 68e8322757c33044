"""The JSON text Intake answers with: compact, ASCII-only. One writer, so that texts joined
from pieces (jobs.tasks.batches) are byte for byte what serialising the whole would give, and an
ETag of the text changes exactly when the state does."""

from __future__ import annotations

import json
from typing import Any


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
