"""rq-dashboard mounted at /rq for operators.

With INTAKE_ADMIN_PASSWORD it asks for basic auth (user `admin`); without one it answers only
to loopback clients of the dev runner's local mode, and 403 otherwise (behind a proxy every
request looks local, so production never trusts the address alone).
"""
from __future__ import annotations

import hmac

import rq_dashboard
from flask import Flask, Response, current_app, request

URL_PREFIX = "/rq"
LOOPBACK = frozenset({"127.0.0.1", "::1"})


def mount(app: Flask) -> None:
    rq_dashboard.web.setup_rq_connection(app)
    app.register_blueprint(rq_dashboard.blueprint, url_prefix=URL_PREFIX)
    app.before_request(_guard)


def _guard() -> Response | None:
    if request.blueprint != "rq_dashboard":
        return None
    return operator_denial()


def operator_denial() -> Response | None:
    """None when the request may see operator pages, else the 401/403 answer."""
    password = current_app.config.get("INTAKE_ADMIN_PASSWORD")
    if password:
        auth = request.authorization
        if (auth and auth.type == "basic" and auth.username == "admin"
                and hmac.compare_digest(str(auth.password or ""), str(password))):
            return None
        return Response("Operator credentials required.", 401,
                        {"WWW-Authenticate": 'Basic realm="Intake operators"'})
    if current_app.config.get("INTAKE_LOCAL_MODE") and request.remote_addr in LOOPBACK:
        return None
    return Response("Operator pages are disabled: set INTAKE_ADMIN_PASSWORD.", 403)
