"""The page session: Flask's signed cookie, carrying the id of a record kept in Redis.

Why a record: a signed cookie alone cannot be revoked, so a copy taken before sign-out would
still work. The cookie carries a random session id (jobs.core.sessions), every request signed in by
a session reads its record once, and signing out deletes it: every copy is refused afterwards.
The record lives as long as Flask accepts the cookie's signature (PERMANENT_SESSION_LIFETIME).

Why an interface of our own: the cookie must be Secure whenever the request came over HTTPS
(behind a trusted proxy gunicorn sets the scheme from X-Forwarded-Proto), or always with
INTAKE_SECURE_COOKIES=1, yet stay usable over plain HTTP on a developer's machine.
"""

from __future__ import annotations

from flask import Flask, current_app, has_request_context, request, session
from flask.sessions import SecureCookieSessionInterface

from jobs import end_session, session_tenant, start_session
from webapp.extensions import intake


class IntakeSessionInterface(SecureCookieSessionInterface):
    """Flask's signed cookie, Secure per request rather than per deployment."""

    def get_cookie_secure(self, app: Flask) -> bool:
        if app.config.get("SESSION_COOKIE_SECURE"):
            return True
        return has_request_context() and request.is_secure


def sign_in(tenant: str, key_digest: str) -> None:
    """A fresh session: the previous one (if any) ends, so an old id cannot be kept alive."""
    sign_out()
    lifetime = int(current_app.permanent_session_lifetime.total_seconds())
    session_id = start_session(intake().connection, tenant, lifetime)
    session["tenant"], session["key"], session["sid"] = tenant, key_digest, session_id


def sign_out() -> None:
    """End the record, wherever the cookie was copied, then forget the cookie's contents."""
    session_id = session.get("sid")
    if isinstance(session_id, str):
        end_session(intake().connection, session_id)
    session.clear()


def live(tenant: str) -> bool:
    """Whether this request's session record still exists and names `tenant` (one Redis read)."""
    session_id = session.get("sid")
    if not isinstance(session_id, str) or not session_id:
        return False
    return session_tenant(intake().connection, session_id) == tenant
