"""Which tenant a request acts for, decided once per request before any view runs.

Without INTAKE_API_KEYS there is one tenant, `default`. With keys (`tenant:key,tenant:key`), an
API call carries `Authorization: Bearer <key>` (or the session of a signed-in page), and a page
needs a session signed in with a key. The session keeps a digest of the key it was signed in
with, so removing a key from the configuration signs its sessions out, and the id of its record
in Redis (webapp.sessions), so signing out refuses every copy of the cookie. Operator endpoints
also let basic auth through (Bearer and Basic share one header): the view checks the operator.
Views then scope every read and write by `current_tenant()`; another tenant's ids simply do not
exist for them.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from urllib.parse import quote

from flask import Flask, current_app, g, redirect, request, session
from werkzeug.wrappers import Response

from webapp import limits, sessions
from webapp.errors import ApiError

DEFAULT_TENANT = "default"
TENANT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MIN_KEY_LENGTH = 24
# Reachable without a tenant: sign-in itself, static files, operator pages (their own auth) and
# what monitoring polls.
OPEN_ENDPOINTS = frozenset(
    {"auth.signin", "auth.signout", "static", "api.health", "openapi.openapi", "metrics.scrape"}
)
# Views that answer operators (webapp.dashboard.operator_denial) as well as tenants.
OPERATOR_ENDPOINTS = frozenset({"api.list_failed"})


def parse_api_keys(raw: str | None) -> dict[str, str]:
    """`tenant:key,tenant:key` → {key: tenant}; a malformed entry is a configuration error.

    Keys are at least MIN_KEY_LENGTH characters (docs/architecture.md §10): with the attempt
    limit per client (webapp.limits) no online guessing gets near a key that long. The error
    names the tenant whose key is short, never the key: the message ends up in logs."""
    keys: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in (raw or "").split(","))):
        tenant, sep, key = entry.partition(":")
        if not sep or not TENANT_NAME.match(tenant) or not key:
            raise ValueError(
                "INTAKE_API_KEYS must be `tenant:key,…` with tenant names of "
                f"letters, digits, - or _ and keys of {MIN_KEY_LENGTH} characters "
                "or more"
            )
        if len(key) < MIN_KEY_LENGTH:
            raise ValueError(
                f"INTAKE_API_KEYS: the key of tenant {tenant!r} has {len(key)} "
                f"characters; keys must have at least {MIN_KEY_LENGTH} (make one "
                "with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
            )
        keys[key] = tenant
    return keys


def tenant_for_key(key: str, keys: Mapping[str, str]) -> str | None:
    """Constant-time over every configured key, so timing tells nothing about near misses."""
    found = None
    for candidate, tenant in keys.items():
        if hmac.compare_digest(candidate.encode(), key.encode()):
            found = tenant
    return found


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def init_app(app: Flask) -> None:
    app.config["INTAKE_KEYS"] = parse_api_keys(app.config.get("INTAKE_API_KEYS"))
    app.before_request(_identify)
    app.context_processor(lambda: {"signed_in_tenant": _signed_in()})


def _signed_in() -> str | None:
    """The tenant a page's session is signed in as (None without keys: nothing to sign out of)."""
    return session.get("tenant") if current_app.config["INTAKE_KEYS"] else None


def current_tenant() -> str:
    """The request's tenant; a request let through as an operator has none: 401."""
    if g.tenant is None:
        raise ApiError(401, "unauthorized", "Send `Authorization: Bearer <your API key>`.")
    return g.tenant


def identified() -> bool:
    """Whether a key or a signed-in session named this request's tenant (so a refusal of
    operator access is 403, not a request for credentials)."""
    return bool(current_app.config["INTAKE_KEYS"]) and g.get("tenant") is not None


def _identify() -> Response | None:
    keys: dict[str, str] = current_app.config["INTAKE_KEYS"]
    if not keys:
        g.tenant = DEFAULT_TENANT
        return None
    if request.endpoint == "static":  # for everyone: no session read, even while Redis is down
        g.tenant = None
        return None
    g.tenant = _from_bearer(keys) or _from_session(keys)
    if g.tenant or request.endpoint in OPEN_ENDPOINTS or request.blueprint == "rq_dashboard":
        return None
    if request.endpoint in OPERATOR_ENDPOINTS and _basic_auth():
        return None
    if request.path.startswith("/api/"):
        raise ApiError(401, "unauthorized", "Send `Authorization: Bearer <your API key>`.")
    return redirect(f"/signin?next={quote(request.full_path.rstrip('?'))}", 303)


def _from_bearer(keys: Mapping[str, str]) -> str | None:
    """The tenant of the request's Bearer key. A client past its failed attempts is refused
    (429) before the key is compared, and each wrong key counts (webapp.limits)."""
    auth = request.headers.get("Authorization", "")
    scheme, _, key = auth.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        if auth and request.path.startswith("/api/") and scheme.lower() == "bearer":
            raise ApiError(401, "unauthorized", "That API key is not valid.")
        return None
    client = limits.check_client()
    tenant = tenant_for_key(key.strip(), keys)
    if tenant is None:
        limits.failed(client)
        if request.path.startswith("/api/"):
            raise ApiError(401, "unauthorized", "That API key is not valid.")
    return tenant


def _from_session(keys: Mapping[str, str]) -> str | None:
    tenant, digest = session.get("tenant"), session.get("key")
    if not tenant or not digest:
        return None
    known = any(
        t == tenant and hmac.compare_digest(key_digest(k).encode(), str(digest).encode())
        for k, t in keys.items()
    )
    if not known or not sessions.live(tenant):
        session.clear()
        return None
    return tenant


def _basic_auth() -> bool:
    auth = request.authorization
    return auth is not None and auth.type == "basic"
