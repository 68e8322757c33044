"""A work-horse is a fork of a worker whose maintenance thread runs beside its main loop. A fork
taken while that thread is half way through an import inherits the module's import lock held
by a thread that does not exist in the child: the horse's own import of that module then waits
forever (seen: a task stuck `running` opening the vector store, whose module, jobs.kb.vectors, is
imported on first use: now KnowledgeBase.open_vectors). So whatever the thread
imports lazily must already be imported once the worker is built."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.integration.processes import REPO_ROOT

_SCRIPT = """
import sys
import fakeredis
from jobs.worker.workers import IntakeWorker
IntakeWorker(["intake"], connection=fakeredis.FakeRedis())
from jobs.worker import maintenance  # what work() imports before it starts the thread
from jobs.core.redis_client import WORKER
from jobs.core.settings import Settings
from jobs.kb.knowledge_base import KnowledgeBase
from jobs.tasks import originals
before = set(sys.modules)
kb = KnowledgeBase.of(Settings(embedding_url="http://127.0.0.1:9/v1",
                               vector_database_url="postgresql://127.0.0.1:9/none"),
                      fakeredis.FakeRedis(), WORKER)
store = kb.open_vectors()
try:  # the hourly sweep of the originals, here in an S3 bucket that does not answer
    originals.sweep(fakeredis.FakeRedis(), Settings.from_env())
except Exception as exc:
    print("sweep:", type(exc).__name__)
print(sorted(set(sys.modules) - before))
"""
#: Originals in a bucket: the sweep builds boto3's client (seen: a task stuck `running` on
#: S3 when a horse forked while the thread imported boto3).
_S3 = {
    "INTAKE_STORAGE_URL": "s3://intake-nowhere/originals",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "AWS_ACCESS_KEY_ID": "nobody",
    "AWS_SECRET_ACCESS_KEY": "nothing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_MAX_ATTEMPTS": "1",
}


def test_what_the_maintenance_thread_opens_is_imported_before_any_fork():
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **_S3},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
