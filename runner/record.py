"""Where a running dev runner's Redis is, written under instance/ while it runs.

Why: `flask --app webapp ingest` in another terminal, with no REDIS_URL set, would otherwise
talk to the machine's Redis on 6379 (or none) while the runner's workers wait on their own
Redis on another port. The runner writes its Redis URL (and its knowledge base's) and pid
here; a terminal's document command reads it when no Redis is named and that pid is alive
(webapp.cli.app), and says so.
No web process reads it: their configuration is the environment's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

RECORD_NAME = "dev-runner.json"
#: Where `make run` keeps its state (runner.dev), beside the code.
INSTANCE_DIR = Path(__file__).resolve().parent.parent / "instance"


def write(instance_dir: Path, redis_url: str, kb_url: str = "") -> Path:
    path = instance_dir / RECORD_NAME
    instance_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"redis_url": redis_url, "kb_url": kb_url, "pid": os.getpid()}))
    return path


def remove(instance_dir: Path) -> None:
    path = instance_dir / RECORD_NAME
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def running_redis_url(instance_dir: Path) -> str | None:
    """The Redis URL of a dev runner that is running now, or None."""
    found = _running(instance_dir)
    return str(found["redis_url"]) if found else None


def running_kb_url(instance_dir: Path) -> str:
    """The knowledge base's Redis URL of a dev runner that is running now, or '' (none, or on
    the queue's Redis)."""
    found = _running(instance_dir)
    return str(found.get("kb_url") or "") if found else ""


def _running(instance_dir: Path) -> dict | None:
    """The record of a dev runner that is running now (its pid alive), or None."""
    try:
        found = json.loads((instance_dir / RECORD_NAME).read_text())
        if not isinstance(found, dict) or "redis_url" not in found:
            return None
        os.kill(int(found["pid"]), 0)
        return found
    except (OSError, ValueError, KeyError, TypeError):
        return None
