"""The Procfile runs what the code says (docs/architecture.md §2): its worker line is the one
command of jobs.worker.workers (flags and queue order included) and its web line a gevent gunicorn
on $PORT."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from jobs.core.settings import QUEUE_NAMES
from jobs.worker.workers import WORKER_FLAGS, webhook_worker_command, worker_command

PROCFILE = Path(__file__).resolve().parents[3] / "Procfile"


def read_procfile(path: Path = PROCFILE) -> dict[str, list[str]]:
    """`{process type: argv}`, split as a shell would (the $VARS stay unexpanded)."""
    processes: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, command = line.partition(":")
        assert sep, f"not a Procfile line: {line!r}"
        processes[name.strip()] = shlex.split(command)
    return processes


def option(argv: list[str], flag: str) -> str:
    assert flag in argv, f"{flag} missing from {argv}"
    return argv[argv.index(flag) + 1]


def test_procfile_has_web_worker_and_webhooks() -> None:
    assert set(read_procfile()) == {"web", "worker", "webhooks"}


def test_worker_line_has_the_worker_flags_then_the_queues_in_priority_order() -> None:
    argv = read_procfile()["worker"]
    assert argv[:2] == ["rq", "worker"]
    config_at = argv.index("-c")
    assert tuple(argv[2:config_at]) == WORKER_FLAGS
    # The Redis address from the environment: REDIS_URL, or the Sentinels (docs/architecture.md
    # §17).
    assert argv[config_at + 1] == "jobs.rq_settings"
    assert tuple(argv[config_at + 2 :]) == QUEUE_NAMES


def test_worker_line_is_the_command_the_dev_runner_and_tests_start() -> None:
    command = worker_command(None)
    assert command[:3] == [sys.executable, "-m", "rq.cli"]
    assert read_procfile()["worker"][1:] == command[3:]


def test_webhooks_line_is_the_webhook_worker_command_on_its_queue_alone() -> None:
    command = webhook_worker_command(None)
    assert read_procfile()["webhooks"][1:] == command[3:]
    assert command[-1] == "intake-webhooks" and "--with-scheduler" in command
    assert option(command, "--worker-class") == "jobs.workers.WebhookWorker"


def test_web_line_is_a_gevent_gunicorn_on_all_interfaces_and_port() -> None:
    argv = read_procfile()["web"]
    assert argv[0] == "gunicorn"
    assert option(argv, "--bind") == "0.0.0.0:$PORT"
    # An open event stream or a slow client must hold a greenlet, never one of a few threads.
    assert option(argv, "--worker-class") == "gevent"
    assert int(option(argv, "--worker-connections")) >= 1000
    assert argv[-1] == "webapp.wsgi:app"
