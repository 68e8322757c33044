"""Where the web applies the limits of jobs.core.throttle (docs/architecture.md §18), and which
address a client has.

Expensive reads (INTAKE_TENANT_EXPENSIVE_READS a minute per tenant): what reads far more of Redis
than a page's ordinary poll. GET /api/batches/<id> of a batch of more than LARGE_BATCH_TASKS
tasks (~9 µs of Redis per task: 4.5 ms for 500), an event stream opened on such a batch (it
reads the whole batch), and the library filtered by name or status (it reads the whole
library). A 304 counts too: its ETag is computed from the very same reads; only the bytes sent
are saved. A smaller batch's poll or stream is not counted, so the pages' own polling of
ordinary batches, and a thousand streams opened together, pay nothing extra.

Failed sign-ins and API keys (INTAKE_CLIENT_AUTH_FAILURES a minute per client address): a
client past them is refused (429) before its key is even compared, a right one too.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from functools import lru_cache

from flask import current_app, request

from webapp.extensions import intake

#: Batches up to this size are read without counting (≤ ~2 ms of Redis each).
LARGE_BATCH_TASKS = 250
#: Whom gunicorn believes X-Forwarded-* from (its `--forwarded-allow-ips`) by default.
DEFAULT_TRUSTED = "127.0.0.1,::1"


def charge(tenant: str, what: str) -> None:
    """Count one expensive read of `tenant`; Throttled (429) past its limit."""
    intake().expensive_reads.charge(tenant, what)


def batch_meter(tenant: str, what: str = "batch reads") -> Callable[[int], None]:
    """Called with a batch's size before its tasks are read: only a large one is counted."""

    def meter(size: int) -> None:
        if size > LARGE_BATCH_TASKS:
            charge(tenant, f"{what} of batches of more than {LARGE_BATCH_TASKS} documents")

    return meter


def check_client() -> str:
    """The client's address, once it is known not to be past its failed attempts (else
    Throttled: 429)."""
    client = client_address()
    intake().auth_failures.check(client)
    return client


def failed(client: str) -> None:
    intake().auth_failures.failed(client)


def client_address() -> str:
    """The address a request came from: the peer's, or, when the peer is a proxy this site
    trusts, the nearest address in X-Forwarded-For that is not one of its proxies.

    Trusted proxies are FORWARDED_ALLOW_IPS, the variable gunicorn reads to believe a proxy's
    X-Forwarded-Proto (docs/deploying.md): one setting says which proxies tell the truth.
    Behind an untrusted peer the header is ignored, so a client cannot pick its own address."""
    trusted = _trusted(str(current_app.config.get("FORWARDED_ALLOW_IPS") or DEFAULT_TRUSTED))
    peer = request.remote_addr or ""
    if not _is_trusted(peer, trusted):
        return peer
    hops = [hop.strip() for hop in request.headers.get("X-Forwarded-For", "").split(",")]
    hops = [hop[:64] for hop in hops if hop]
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer  # every hop a trusted proxy: the first is the client


@lru_cache(maxsize=8)
def _trusted(raw: str) -> tuple[str | ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """`*`, addresses or networks (CIDR), separated by commas, as gunicorn reads them."""
    parsed: list[str | ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        try:
            parsed.append("*" if item == "*" else ipaddress.ip_network(item, strict=False))
        except ValueError:
            parsed.append(item)  # a name gunicorn would compare as text
    return tuple(parsed)


def _is_trusted(
    address: str, trusted: tuple[str | ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address in trusted
    return any(
        item == "*" or (not isinstance(item, str) and ip.version == item.version and ip in item)
        for item in trusted
    )
