"""Where `make run` keeps the knowledge base (runner.redis_service.start_kb_redis): on a Redis of
its own beside the queue's redis-server it started, unless told otherwise or unless the queue's
Redis already holds one. tests/integration/web/test_dev_runner.py runs the real thing."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import redis_service
from runner.redis_service import EmbeddedRedis, ExternalRedis, RedisProcess, start_kb_redis


class Started(RedisProcess):
    """A RedisProcess that pretends to have started (no redis-server needed here)."""

    def start(self, timeout: float = 30.0) -> RedisProcess:
        self.url = f"redis://127.0.0.1:1/{self.data_dir.name}"
        return self


@pytest.fixture
def queue(tmp_path: Path) -> RedisProcess:
    started = Started(tmp_path / "redis", "redis-server").start()
    return started


def test_a_runner_that_starts_the_queue_redis_starts_one_for_the_knowledge_base(
    queue, tmp_path, monkeypatch
):
    monkeypatch.setattr(redis_service, "RedisProcess", Started)
    monkeypatch.setattr(redis_service, "holds_knowledge_base", lambda url: False)
    kb = start_kb_redis(tmp_path / "redis-kb", queue, {})
    assert isinstance(kb, RedisProcess) and kb.url != queue.url
    assert kb.data_dir == (tmp_path / "redis-kb").resolve()


def test_a_queue_redis_that_already_holds_a_knowledge_base_keeps_it(queue, tmp_path, monkeypatch):
    monkeypatch.setattr(redis_service, "holds_knowledge_base", lambda url: url == queue.url)
    assert start_kb_redis(tmp_path / "redis-kb", queue, {}) is None


def test_intake_kb_url_is_used_as_it_is(queue, tmp_path):
    kb = start_kb_redis(tmp_path / "redis-kb", queue, {"INTAKE_KB_URL": "redis://kb:6379/0"})
    assert isinstance(kb, ExternalRedis) and kb.url == "redis://kb:6379/0"


def test_a_redis_someone_else_runs_or_the_embedded_one_keeps_it_together(tmp_path):
    external = ExternalRedis("redis://elsewhere:6379/0")
    assert start_kb_redis(tmp_path / "redis-kb", external, {}) is None
    assert start_kb_redis(tmp_path / "redis-kb", EmbeddedRedis(), {}) is None
