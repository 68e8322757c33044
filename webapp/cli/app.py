"""The app a document command runs on: the one `flask --app webapp` built, unless it names no
Redis and a dev runner is running in this checkout, whose Redis is then where the work goes.

Why here and not in webapp.config: only a terminal's command may look for a dev runner (`make
run` in another terminal, no REDIS_URL set); a web process reads its configuration from the
environment alone, never from a file a runner left. The runner says where its Redis is in
instance/dev-runner.json while it runs (runner.record); this module reads it and builds the app
for it (`REDIS_URL`, and `REDIS_URL_FROM_DEV_RUNNER` so that the command says so).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import update_wrapper
from typing import Any, TypeVar

import click
from flask import Flask, current_app
from flask.cli import ScriptInfo

F = TypeVar("F", bound=Callable[..., Any])
#: What names a Redis in the app's configuration; with none, the dev runner's is looked for.
REDIS_NAMES = ("REDIS_URL", "REDIS_SENTINELS", "REDIS_CONNECTION")


def with_app(command: F) -> F:
    """flask.cli.with_appcontext, on `on_dev_runner`'s app."""

    @click.pass_context
    def run(ctx: click.Context, /, *args: Any, **kwargs: Any) -> Any:
        if not current_app:
            app = on_dev_runner(ctx.ensure_object(ScriptInfo).load_app())
            ctx.with_resource(app.app_context())
        return ctx.invoke(command, *args, **kwargs)

    return update_wrapper(run, command)  # type: ignore[return-value]


def on_dev_runner(app: Flask) -> Flask:
    """`app`, or with no Redis named in its configuration and a dev runner running, an app
    built for the runner's Redis."""
    if any(app.config.get(name) for name in REDIS_NAMES):
        return app
    from runner import record

    found = record.running_redis_url(record.INSTANCE_DIR)
    if found is None:
        return app
    from webapp import create_app

    kb_url = record.running_kb_url(record.INSTANCE_DIR)
    config = {"REDIS_URL": found, "REDIS_URL_FROM_DEV_RUNNER": True}
    return create_app({**config, "INTAKE_KB_URL": kb_url} if kb_url else config)
