"""Health's probes keep their bound where the web runs them: in a process gevent patched (the
Procfile's gunicorn workers), a probe whose system call hangs (a stat on a dead NFS mount) must
not hold the other greenlets, the poll's own wait for its deadline among them."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.integration.processes import REPO_ROOT

UNDER_GEVENT = """
from gevent import monkey
monkey.patch_all()
import json, time
from pathlib import Path
from gevent.monkey import get_original
from jobs.core.dependencies import ProbeFailed, Probes, blocking
from jobs.core.object_store import FileStore

stuck = get_original("time", "sleep")  # blocks the OS thread, as a hung stat(2) does
probes = Probes({"hung": lambda: blocking(lambda: stuck(4)), "fine": lambda: None},
                timeout=0.5)
started = time.monotonic()
found = probes.check()
took = time.monotonic() - started
try:
    FileStore(Path("/nonexistent-intake-originals")).probe()
    missing = None
except ProbeFailed as exc:
    missing = exc.reason
print(json.dumps({"took": took, "hung": found["hung"].error, "fine": found["fine"].up,
                  "missing": missing}))
"""


def test_a_probe_that_blocks_its_thread_under_gevent_is_down_at_the_deadline():
    done = subprocess.run(
        [sys.executable, "-c", UNDER_GEVENT],
        cwd=REPO_ROOT,
        timeout=30,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["hung"] == "timeout" and found["fine"] is True, found
    assert found["took"] < 1.5, f"{found['took']:.2f} s: the hung probe held the process"
    assert found["missing"] == "missing", "a directory store's probe fails by name off the loop"
