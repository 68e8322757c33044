"""Which tenant a request acts for.

Without INTAKE_API_KEYS there is one tenant, `default` (DESIGN §10); keys and sign-in build on
this single point.
"""
from __future__ import annotations

DEFAULT_TENANT = "default"


def current_tenant() -> str:
    return DEFAULT_TENANT
