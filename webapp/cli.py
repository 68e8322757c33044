"""Flask CLI commands of Intake: `flask --app webapp dev` runs everything on one machine;
`ingest`, `failed` and `retry` (webapp/ingest.py) work with documents from a terminal.

create_app() calls register_cli(app); the commands import the app factory only when they run,
so that importing this module never imports webapp/__init__ (which imports this module).
"""
from __future__ import annotations

import click
from flask import Flask


@click.command("dev")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface the web app binds.")
@click.option("--port", default=5000, show_default=True, type=click.IntRange(1, 65535), help="Web port.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(min=0),
              help="Number of `rq worker` processes (each runs the scheduler).")
def dev_command(host: str, port: int, workers: int) -> None:
    """Run Redis, the workers and the web app together, for development.

    Redis: REDIS_URL if set; else a local redis-server (data under instance/redis/, AOF on);
    else an embedded fakeredis that is NOT durable. SECRET_KEY: from the environment, else one
    made for this run and shared with the workers. Ctrl-C stops everything it started.
    """
    from webapp import create_app
    from webapp.devrunner import run

    run(create_app, host, port, workers)


def register_cli(app: Flask) -> None:
    """Add Intake's commands to `flask --app webapp …`."""
    from webapp.ingest import failed_command, ingest_command, retry_command

    for command in (dev_command, ingest_command, failed_command, retry_command):
        app.cli.add_command(command)
