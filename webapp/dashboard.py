"""rq-dashboard mounted at /rq for operators, read-only (no delete, empty or requeue).

With INTAKE_ADMIN_PASSWORD it asks for basic auth (user `admin`); without one it answers only
to loopback clients of the dev runner's local mode, and 403 otherwise (behind a proxy every
request looks local, so production never trusts the address alone).
"""

from __future__ import annotations

import hmac

import rq_dashboard
from flask import Flask, Response, current_app, request

URL_PREFIX = "/rq"
CHANGING_ENDPOINTS = frozenset({"rq_dashboard.requeue_all"})  # a GET that requeues
LOOPBACK = frozenset({"127.0.0.1", "::1"})


def mount(app: Flask) -> None:
    from webapp import csrf  # the dashboard's own forms carry no token; it is read-only anyway

    app.config["RQ_DASHBOARD_DISABLE_DELETE"] = True
    rq_dashboard.web.setup_rq_connection(app)
    csrf.exempt(rq_dashboard.blueprint)
    app.register_blueprint(rq_dashboard.blueprint, url_prefix=URL_PREFIX)
    # Its pages link the app's /static/favicon.ico, which Intake lacks (a 404 on every page).
    app.add_url_rule("/static/favicon.ico", "dashboard_favicon", rq_dashboard.web.favicon)
    app.before_request(_guard)


def _guard() -> Response | None:
    """Operators only, and read-only: Intake's records, not the dashboard, change tasks."""
    if request.blueprint != "rq_dashboard":
        return None
    denial = operator_denial()
    changes = request.method not in ("GET", "HEAD") or request.endpoint in CHANGING_ENDPOINTS
    if denial is None and changes:
        return Response("The dashboard is read-only here: retry or cancel tasks in Intake.", 403)
    return denial


def is_operator() -> bool:
    """Whether this request is an operator's (per-tenant detail of health and metrics)."""
    return operator_denial() is None


def operator_denial() -> Response | None:
    """None when the request may see operator pages, else the 401/403 answer."""
    password = current_app.config.get("INTAKE_ADMIN_PASSWORD")
    if password:
        auth = request.authorization
        if (
            auth
            and auth.type == "basic"
            and auth.username == "admin"
            and _same_secret(auth.password or "", str(password))
        ):
            return None
        return Response(
            "Operator credentials required.",
            401,
            {"WWW-Authenticate": 'Basic realm="Intake operators"'},
        )
    if current_app.config.get("INTAKE_LOCAL_MODE") and request.remote_addr in LOOPBACK:
        return None
    return Response("Operator pages are disabled: set INTAKE_ADMIN_PASSWORD.", 403)


def _same_secret(given: str, expected: str) -> bool:
    """Constant-time, on UTF-8 bytes: compare_digest refuses non-ASCII str (a TypeError, a 500).
    The configured side may hold surrogate escapes of an environment that was not UTF-8."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8", "surrogateescape"))
