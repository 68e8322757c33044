"""One Config over the environment (docs/architecture.md §19), with a mapping to override it in
tests.

The pipeline's settings are parsed by jobs.core.settings so that web and workers agree; this module
adds what only the web needs: the secret key, request limits in Flask's terms, operator access,
and whether session cookies are always Secure (they are over HTTPS in any case: webapp.sessions).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from typing import Any

from jobs import MIB, Settings, redis_dashboard_url

# FORWARDED_ALLOW_IPS: the proxies gunicorn believes, whose X-Forwarded-For names the client
# whose failed keys are counted (webapp.limits).
ENV_NAMES = (
    "SECRET_KEY",
    "INTAKE_API_KEYS",
    "INTAKE_ADMIN_PASSWORD",
    "REDIS_URL",
    "REDIS_SENTINELS",
    "REDIS_SENTINEL_MASTER",
    "FORWARDED_ALLOW_IPS",
)


def load_config(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Flask config from the environment, then `overrides`; the settings object under INTAKE."""
    source: dict[str, Any] = {
        k: v for k, v in os.environ.items() if k in ENV_NAMES or k.startswith("INTAKE_")
    }
    source.update(overrides or {})
    settings = Settings.from_mapping(source)
    config: dict[str, Any] = dict(source)
    config.update(
        INTAKE=settings,
        # Only the dev runner's own mapping may open operator pages to loopback clients; an
        # environment variable never can (behind a proxy every request looks local).
        INTAKE_LOCAL_MODE=(overrides or {}).get("INTAKE_LOCAL_MODE") is True,
        SECRET_KEY_EPHEMERAL=not source.get("SECRET_KEY"),
        SECRET_KEY=source.get("SECRET_KEY") or secrets.token_hex(32),
        # Werkzeug answers 413 past this; the upload handler turns it into the JSON error.
        MAX_CONTENT_LENGTH=settings.max_request_bytes + MIB,
        # Every file and every document_id is a form part: raise the limit to match the files.
        MAX_FORM_PARTS=2 * settings.max_files_per_request + 16,
        RQ_DASHBOARD_REDIS_URL=redis_dashboard_url(settings.redis_url),
        WTF_CSRF_TIME_LIMIT=None,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=_flag(source, "INTAKE_SECURE_COOKIES"),
        SESSION_COOKIE_HTTPONLY=True,
        JSON_SORT_KEYS=False,
        # A terminal's command on a dev runner's Redis says so (webapp.cli.app).
        REDIS_URL_FROM_DEV_RUNNER=(overrides or {}).get("REDIS_URL_FROM_DEV_RUNNER") is True,
    )
    return config


def _flag(source: Mapping[str, Any], name: str) -> bool:
    """1/true/yes/on or 0/false/no/off (unset is off); anything else is a configuration error."""
    raw = str(source.get(name) or "").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("", "0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={source.get(name)!r} must be 1 or 0")
