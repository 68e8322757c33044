"""The web layer of Intake: HTTP only. Parsing, chunking, embedding and indexing live in jobs/."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask
from flask_wtf.csrf import CSRFProtect
from redis import Redis

from jobs import Intake, configure_logging

csrf = CSRFProtect()


#: Redis connections one web process holds at most. Under gevent a thousand requests may
#: want one at the same moment (pages opening their streams together): they wait their turn
#: (`POOL_WAIT_SECONDS`: each holds one for about a millisecond) instead of failing as "Too
#: many connections". The wait and the web's read timeout (2 s, jobs.core.redis_client.WEB) sum to
#: the 3 s within which any request answers, a 503 if Redis is stalled.
POOL_CONNECTIONS = 64
POOL_WAIT_SECONDS = 1


def connect(url: str) -> Redis:
    """A client that gives up quickly: while Redis is down or stalled the API answers 503
    within 3 s; with a Sentinel address it follows a failover (jobs.core.redis_client)."""
    from jobs import WEB_REDIS_PROFILE, connect_redis

    return connect_redis(
        url,
        WEB_REDIS_PROFILE,
        max_connections=POOL_CONNECTIONS,
        pool_timeout=POOL_WAIT_SECONDS,
        health_check_interval=30,
    )


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """Build an app; nothing is built at import time. `config` overrides the environment.

    Tests may pass a ready client as REDIS_CONNECTION (a fakeredis instance, say).
    """
    from webapp import (
        api,
        auth,
        dashboard,
        documents_pages,
        errors,
        events,
        ids,
        metrics,
        openapi,
        pages,
        security,
        tenancy,
    )
    from webapp.cli import register_cli
    from webapp.config import load_config
    from webapp.sessions import IntakeSessionInterface
    from webapp.uploads import UploadRequest

    app = Flask(__name__, template_folder="../templates", static_folder="../static")
    app.request_class = UploadRequest
    app.config.from_mapping(load_config(config))
    app.session_interface = IntakeSessionInterface()
    if not app.config.get("TESTING"):
        configure_logging()
    settings = app.config["INTAKE"]
    connection = app.config.get("REDIS_CONNECTION") or connect(settings.redis_url)
    service = app.extensions["intake"] = Intake(connection, settings)
    app.extensions["watchers"] = events.broadcaster(service, app.config)

    csrf.init_app(app)
    csrf.exempt(api.bp)
    security.init_app(app)
    tenancy.init_app(app)
    ids.init_app(app)
    app.register_blueprint(api.bp)
    app.register_blueprint(events.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(documents_pages.bp)
    app.register_blueprint(auth.bp)
    app.register_blueprint(metrics.bp)
    app.register_blueprint(openapi.bp)
    dashboard.mount(app)
    errors.init_app(app)
    register_cli(app)
    return app
