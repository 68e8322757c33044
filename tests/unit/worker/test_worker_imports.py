"""A work-horse is a fork of a worker whose maintenance thread runs beside its main loop. A fork
taken while that thread is half way through an import inherits the module's import lock held
by a thread that does not exist in the child: the horse's own import of that module then waits
forever (seen: a task stuck `running` at jobs.worker.parts.vector_store). So whatever the thread
imports lazily must already be imported once the worker is built."""
from __future__ import annotations

import subprocess
import sys

from tests.integration.processes import REPO_ROOT

_SCRIPT = """
import sys
import fakeredis
from jobs.worker.workers import IntakeWorker
IntakeWorker(["intake"], connection=fakeredis.FakeRedis())
from jobs.worker import maintenance  # what work() imports before it starts the thread
from jobs.worker import parts
from jobs.core.settings import Settings
before = set(sys.modules)
store = parts.vector_store(Settings(embedding_url="http://127.0.0.1:9/v1",
                                    vector_database_url="postgresql://127.0.0.1:9/none"))
print(sorted(set(sys.modules) - before))
"""


def test_what_the_maintenance_thread_opens_is_imported_before_any_fork():
    done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
