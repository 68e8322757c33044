"""Fast fixtures: one in-process fakeredis per test, an app bound to it, and a burst worker.

fakeredis is for speed only; every behaviour here that crosses a process is proven again in
tests/integration against a real redis-server and real `rq worker` processes.
"""

from __future__ import annotations

import io

import fakeredis
import pytest
from rq import Queue, SimpleWorker

from jobs import Settings
from jobs.core.queues import all_names as all_queue_names
from jobs.embedding.embedders import make_embedder
from jobs.worker import parts
from jobs.worker.parts import Parts
from webapp import create_app


@pytest.fixture
def redis():
    return fakeredis.FakeRedis()


@pytest.fixture
def make_app(redis, monkeypatch):
    for name in ("REDIS_URL", "SECRET_KEY", "INTAKE_API_KEYS", "INTAKE_ADMIN_PASSWORD"):
        monkeypatch.delenv(name, raising=False)

    def build(**config):
        base = {"TESTING": True, "SECRET_KEY": "test", "REDIS_CONNECTION": redis}
        return create_app({**base, **config})

    return build


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def run_jobs(redis):
    """Drain every queue (every tenant's: jobs.core.queues) in-process, with the settings the test
    put in the environment and, if given, an embedder of the test's own (handed to the jobs as
    jobs.worker.parts)."""

    def run(embedder=None):
        settings = Settings.from_env()
        queues = [Queue(name, connection=redis) for name in all_queue_names(redis)]
        with parts.using(Parts(settings, embedder or make_embedder(settings))):
            SimpleWorker(queues, connection=redis).work(burst=True)

    return run


def upload(client, *files, **form):
    """POST /api/documents with (name, bytes) pairs; returns the response."""
    data = {"files": [(io.BytesIO(content), name) for name, content in files], **form}
    return client.post("/api/documents", data=data, content_type="multipart/form-data")
