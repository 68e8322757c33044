"""Signing pages in and out with an API key (docs/architecture.md §10): the key is checked once,
then a signed session cookie carries the tenant and the id of a session record in Redis
(webapp.sessions), so signing out ends the session for every copy of the cookie. Forms carry CSRF
tokens like every other form. Wrong keys count against the client's address, as wrong API keys
do (webapp.limits): past INTAKE_CLIENT_AUTH_FAILURES a minute the page answers 429 and says so,
whatever key is sent."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, redirect, render_template, request
from werkzeug.wrappers import Response

from jobs import Throttled
from webapp import limits, sessions
from webapp.redirects import local_path
from webapp.tenancy import key_digest, tenant_for_key

bp = Blueprint("auth", __name__)


@bp.route("/signin", methods=["GET", "POST"])
def signin() -> Response | str | tuple[str, int] | tuple[str, int, dict[str, str]]:
    keys = current_app.config["INTAKE_KEYS"]
    if not keys:
        return redirect("/", 303)
    if request.method == "GET":
        return render_template("signin.html", next=_next())
    try:
        client = limits.check_client()  # past its failed attempts: refused, a right key too
    except Throttled as exc:
        flash(exc.message, "error")
        return (
            render_template("signin.html", next=_next()),
            429,
            {"Retry-After": str(exc.retry_after)},
        )
    key = (request.form.get("key") or "").strip()
    tenant = tenant_for_key(key, keys) if key else None
    if tenant is None:
        limits.failed(client)
        flash("That key is not valid.", "error")
        return render_template("signin.html", next=_next()), 401
    sessions.sign_in(tenant, key_digest(key))
    return redirect(_next(), 303)


@bp.post("/signout")
def signout() -> Response:
    sessions.sign_out()
    return redirect("/signin" if current_app.config["INTAKE_KEYS"] else "/", 303)


def _next() -> str:
    return local_path(request.values.get("next"), "/")
