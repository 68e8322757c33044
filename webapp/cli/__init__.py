"""Flask CLI commands of Intake: `flask --app webapp dev` runs everything on one machine;
`ingest`, `reindex`, `failed` and `retry` (webapp.cli.documents) work with documents from a
terminal, on the dev runner's Redis when none is named (webapp.cli.app).

create_app() calls register_cli(app), so this module must not import create_app at its top: the
commands import what they run (the app factory, the dev runner) only when they run.
"""

from __future__ import annotations

from pathlib import Path

import click
from flask import Flask


@click.command("dev")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface the web app binds.")
@click.option(
    "--port", default=5000, show_default=True, type=click.IntRange(1, 65535), help="Web port."
)
@click.option(
    "--workers",
    default=2,
    show_default=True,
    type=click.IntRange(min=0),
    help="Number of `rq worker` processes (each runs the scheduler).",
)
@click.option(
    "--instance-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the local redis-server keeps its data  [instance/]",
)
def dev_command(host: str, port: int, workers: int, instance_dir: Path | None) -> None:
    """Run Redis, the workers and the web app together, for development.

    Redis: REDIS_URL if set; else a local redis-server (data under instance/redis/, AOF on);
    else an embedded fakeredis that is NOT durable. SECRET_KEY: from the environment, else one
    made for this run and shared with the workers. Ctrl-C stops everything it started.
    """
    from runner.dev import run
    from runner.record import INSTANCE_DIR
    from webapp import create_app

    run(create_app, host, port, workers, instance_dir or INSTANCE_DIR)


def register_cli(app: Flask) -> None:
    """Add Intake's commands to `flask --app webapp …`."""
    from webapp.cli.documents import failed_command, ingest_command, reindex_command, retry_command

    for command in (dev_command, ingest_command, reindex_command, failed_command, retry_command):
        app.cli.add_command(command)
