"""Security headers on every answer, and refusal of state-changing cross-site requests.

The Content-Security-Policy forbids inline script and style everywhere except the mounted
rq-dashboard, which ships its own inline code and is read-only and operator-only.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask, Response, request

from webapp.errors import ApiError

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
       "frame-ancestors 'none'")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def init_app(app: Flask) -> None:
    app.before_request(refuse_foreign_origin)
    app.after_request(add_headers)


def refuse_foreign_origin() -> None:
    """A browser names the page's site in Origin; another site may not change anything here."""
    origin = request.headers.get("Origin")
    if request.method in SAFE_METHODS or not origin:
        return
    if origin == "null" or urlsplit(origin).netloc != request.host:
        raise ApiError(403, "foreign_origin", "Requests from another site are not allowed.")


def add_headers(response: Response) -> Response:
    headers = response.headers
    if request.blueprint != "rq_dashboard":
        headers.setdefault("Content-Security-Policy", CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Referrer-Policy", "same-origin")
    return response
