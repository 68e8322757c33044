"""Auth at the edge through the Procfile's gunicorn on a real redis-server (docs/architecture.md
§10): a non-ASCII operator password, operator basic auth beside tenant keys, malformed ids, sign-in
redirects that stay on this site, Secure cookies behind an HTTPS proxy, and sign-out revoking a
copied cookie.

A web of its own (API keys and a password set), on a logical database of its own, no workers:
nothing here needs a job to run. The fast versions are in tests/unit/web/test_auth_hardening.py.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import pytest
import redis
import requests

from tests.integration.fixtures import SECRET_KEY, _group
from tests.integration.helpers import ApiClient
from tests.integration.processes import base_env
from tests.integration.servers import WebServer

PASSWORD = "Zauberwörter-☃-op"  # non-ASCII on purpose: it crosses the environment into gunicorn
OPERATOR = (b"admin", PASSWORD.encode("utf-8"))  # as curl -u sends it from a UTF-8 terminal
KEY = "acme-key-123-0123456789ab"
BEARER = {"Authorization": f"Bearer {KEY}"}
DATABASE = 3  # the fault stack has 1; nothing else uses this one


@pytest.fixture(scope="module")
def secured(redis_server, tmp_path_factory) -> Iterator[tuple[WebServer, redis.Redis]]:
    redis_url = f"{redis_server.url.rsplit('/', 1)[0]}/{DATABASE}"
    store = redis.Redis.from_url(redis_url, socket_timeout=5)
    store.flushdb()  # our own database on the test's own redis-server: start from empty
    env = base_env(
        {
            "REDIS_URL": redis_url,
            "SECRET_KEY": SECRET_KEY,
            "INTAKE_API_KEYS": f"acme:{KEY},globex:globex-key-456-0123456789ab",
            "INTAKE_ADMIN_PASSWORD": PASSWORD,
        }
    )
    web = WebServer(_group(tmp_path_factory, "secure-web"), env)
    try:
        web.start()
        yield web, store
    finally:
        web.stop()


@pytest.fixture
def client(secured) -> Iterator[ApiClient]:
    with ApiClient(secured[0].url) as session:
        yield session


def _token(response: requests.Response) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', response.text).group(1)


def _set_cookie(response: requests.Response) -> str:
    header = response.headers.get("Set-Cookie", "")
    assert header.startswith("session="), response.headers
    return header


def sign_in(client: ApiClient, query: str = "") -> requests.Response:
    token = _token(client.get("/signin"))
    return client.post(
        f"/signin{query}", data={"key": KEY, "csrf_token": token}, allow_redirects=False
    )


def test_a_non_ascii_operator_password_works_and_a_wrong_one_is_401(client):
    assert client.get("/rq/", auth=OPERATOR).status_code == 200
    for wrong in ("Zauberwörter-☂-op", "wrong"):
        answer = client.get("/rq/", auth=(b"admin", wrong.encode("utf-8")))
        assert answer.status_code == 401


def test_operators_read_every_tenants_dead_letters_beside_tenant_keys(client):
    answer = client.get("/api/failed?all=1", auth=OPERATOR)  # curl -u admin:… '…?all=1'
    assert answer.status_code == 200 and "tasks" in answer.json()
    tenant = client.get("/api/failed?all=1", headers=BEARER)
    assert tenant.status_code == 403 and tenant.json()["error"]["code"] == "operator_only"
    assert client.get("/api/batches", auth=OPERATOR).status_code == 401
    assert client.get("/api/failed", auth=OPERATOR).status_code == 401


def test_malformed_ids_are_404_not_wrongtype(client):
    files = {"files": ("a.txt", io.BytesIO(b"Words for a batch that no worker runs."))}
    batch = client.post("/api/documents", headers=BEARER, files=files).json()
    bad = f"{batch['batch_id']}:tasks"
    for method, path in (
        ("GET", f"/api/batches/{bad}"),
        ("GET", f"/api/batches/{bad}/events"),
        ("POST", f"/api/batches/{bad}/cancel"),
        ("GET", f"/api/tasks/{batch['tasks'][0]['id']}:x"),
    ):
        answer = client.request(method, path, headers=BEARER)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    sign_in(client)
    page = client.get(f"/batches/{bad}")
    assert page.status_code == 404 and page.headers["Content-Type"].startswith("text/html")


def test_signing_in_never_redirects_to_another_host_through_gunicorn(client):
    """gunicorn decodes the query; Werkzeug drops a tab from the Location: the target is
    judged as the browser will read it (webapp.redirects)."""
    for hostile in ("/%09/evil.com", "/%5C/evil.com", "%09//evil.com", "/%0d%0a/evil.com"):
        answer = sign_in(client, f"?next={hostile}")
        assert answer.status_code == 303 and answer.headers["Location"] == "/", hostile
    kept = sign_in(client, "?next=/search%3Fq%3Da%2520b")
    assert kept.status_code == 303 and kept.headers["Location"] == "/search?q=a%20b"


def test_answers_for_a_tenant_are_never_stored_and_static_files_still_cache(client):
    files = {"files": ("c.txt", io.BytesIO(b"Words a shared browser must not keep."))}
    batch = client.post("/api/documents", headers=BEARER, files=files).json()
    assert (
        client.get("/api/batches", headers=BEARER).headers["Cache-Control"] == "private, no-store"
    )
    first = client.get(batch["url"], headers=BEARER)
    assert first.headers["Cache-Control"] == "private, no-cache"
    again = client.get(batch["url"], headers={**BEARER, "If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304 and again.headers["Cache-Control"] == "private, no-cache"
    sign_in(client)
    assert client.get("/").headers["Cache-Control"] == "private, no-store"
    static = client.get("/static/app.css")
    assert static.status_code == 200 and "no-store" not in static.headers.get("Cache-Control", "")


def test_open_health_and_metrics_name_no_tenant_but_operators_see_each(client):
    files = {"files": ("d.txt", io.BytesIO(b"Words waiting in acme's queue, no worker here."))}
    assert client.post("/api/documents", headers=BEARER, files=files).status_code == 202
    for path in ("/api/health", "/metrics"):
        anonymous = requests.get(f"{client.base_url.rstrip('/')}{path}", timeout=10)
        assert anonymous.status_code == 200 and "acme" not in anonymous.text, anonymous.text
    assert client.get("/api/health").json()["queues"]["intake-high"] >= 1
    detail = client.get("/api/health", auth=OPERATOR)
    assert detail.status_code == 200 and detail.json()["queues"]["intake-high.acme"] >= 1
    assert 'queue="intake-high.acme"' in client.get("/metrics", auth=OPERATOR).text


def test_the_session_cookie_is_secure_behind_an_https_proxy_only(client, secured):
    plain = sign_in(client)
    assert plain.status_code == 303 and "; Secure" not in _set_cookie(plain)

    proxied = {"X-Forwarded-Proto": "https"}  # from loopback: gunicorn's trusted proxy
    form = requests.get(f"{secured[0].url}/signin", headers=proxied, timeout=10)
    cookie = _set_cookie(form)
    assert "; Secure" in cookie
    signed = requests.post(
        f"{secured[0].url}/signin",
        timeout=10,
        allow_redirects=False,
        data={"key": KEY, "csrf_token": _token(form)},
        headers={
            **proxied,
            "Cookie": cookie.split(";", 1)[0],
            "Referer": f"https://127.0.0.1:{secured[0].port}/signin",
        },
    )
    assert signed.status_code == 303, signed.text
    assert "; Secure" in _set_cookie(signed)


def test_signing_out_refuses_a_copy_of_the_cookie_taken_before(client, secured):
    web, store = secured
    before = set(store.keys("intake:session:*"))
    assert sign_in(client).status_code == 303
    (record,) = set(store.keys("intake:session:*")) - before
    assert 0 < store.ttl(record) <= 31 * 24 * 3600, "expires with the cookie's signature"
    copied = client.cookies["session"]
    with ApiClient(web.url) as other:
        other.cookies.set("session", copied)
        assert other.get("/", allow_redirects=False).status_code == 200
        assert other.get("/api/batches").status_code == 200

        client.post("/signout", data={"csrf_token": _token(client.get("/"))})
        assert not store.exists(record)
        page = other.get("/", allow_redirects=False)
        assert page.status_code == 303 and page.headers["Location"].startswith("/signin")
        other.cookies.set("session", copied)  # the refusal cleared it: send the copy again
        answer = other.get("/api/batches")
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"
    assert client.get("/", allow_redirects=False).status_code == 303
