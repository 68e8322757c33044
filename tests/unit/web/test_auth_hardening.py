"""Hardened edges of auth on fakeredis (docs/architecture.md §5, §10): non-ASCII passwords, the
shape of ids in URLs, operator basic auth beside tenant keys, Secure cookies and revocable sessions.

The cookie and session behaviour behind gunicorn and a real Redis is proven again in
tests/integration/web/test_web_security.py.
"""

from __future__ import annotations

import base64
import re

import pytest

from jobs.core import keys
from tests.unit.conftest import upload

KEYS = "acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"
ACME = {"Authorization": "Bearer acme-key-123-0123456789ab"}
ID = "0123456789abcdef0123456789abcdef"
BAD_IDS = (f"{ID}:tasks", ID.upper(), ID[:31], ID + "0", "x" * 32, "..", "%2e%2e")


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def csrf_token(client, path: str = "/signin") -> str:
    page = client.get(path).get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def sign_in(client, key: str = "acme-key-123-0123456789ab"):
    return client.post("/signin", data={"key": key, "csrf_token": csrf_token(client)})


# 1. Non-ASCII passwords are compared as UTF-8 bytes: right is 200, wrong is 401, never 500.


@pytest.mark.parametrize("configured", ["pässwörd-☃", "ascii-secret"])
def test_operator_passwords_compare_as_utf8_bytes(make_app, configured):
    client = make_app(INTAKE_ADMIN_PASSWORD=configured).test_client()
    assert client.get("/rq/", headers=basic("admin", configured)).status_code == 200
    for wrong in ("pässwörd-☂", "wrong", "ü"):
        assert client.get("/rq/", headers=basic("admin", wrong)).status_code == 401
        answer = client.get("/api/failed?all=1", headers=basic("admin", wrong))
        assert answer.status_code == 401, answer.get_data(as_text=True)


def test_non_ascii_bearer_keys_are_refused_cleanly(make_app):
    client = make_app(INTAKE_API_KEYS=KEYS).test_client()
    raw = "Bearer clé-ünïcode".encode().decode("latin-1")  # as WSGI hands it over
    assert client.get("/api/batches", headers={"Authorization": raw}).status_code == 401


# 2. Ids in URLs are 32 lowercase hex characters; anything else is a 404 before Redis is read.


def test_malformed_ids_are_404_on_every_api_route(client):
    batch = upload(client, ("a.txt", b"Some words here.")).get_json()
    real_batch, real_task = batch["batch_id"], batch["tasks"][0]["id"]
    for bad in (f"{real_batch}:tasks", f"{real_task}:x", *BAD_IDS):
        for method, path in (
            ("GET", f"/api/batches/{bad}"),
            ("GET", f"/api/batches/{bad}/events"),
            ("POST", f"/api/batches/{bad}/cancel"),
            ("POST", f"/api/batches/{bad}/retry-failed"),
            ("GET", f"/api/tasks/{bad}"),
            ("POST", f"/api/tasks/{bad}/retry"),
            ("POST", f"/api/tasks/{bad}/cancel"),
        ):
            answer = client.open(path, method=method)
            assert answer.status_code == 404, (method, path, answer.status_code)
            assert answer.get_json()["error"]["code"] == "not_found", (method, path)
    assert client.get(f"/api/batches/{real_batch}").status_code == 200


def test_the_events_task_parameter_must_be_an_id(client):
    batch = upload(client, ("a.txt", b"Some words here.")).get_json()
    for bad in (f"{batch['tasks'][0]['id']}:x", "nope", ID):
        answer = client.get(f"/api/batches/{batch['batch_id']}/events?task={bad}")
        assert answer.status_code == 404 and answer.get_json()["error"]["code"] == "not_found"


def test_malformed_ids_are_html_404_on_every_page(client):
    batch = upload(client, ("a.txt", b"Some words here.")).get_json()
    real_batch, real_task = batch["batch_id"], batch["tasks"][0]["id"]
    for bad in (f"{real_batch}:tasks", f"{real_task}:x", *BAD_IDS):
        for method, path in (
            ("GET", f"/batches/{bad}"),
            ("POST", f"/batches/{bad}/cancel"),
            ("POST", f"/batches/{bad}/retry-failed"),
            ("GET", f"/tasks/{bad}"),
            ("POST", f"/tasks/{bad}/retry"),
            ("POST", f"/tasks/{bad}/cancel"),
        ):
            answer = client.open(path, method=method)
            assert answer.status_code == 404, (method, path, answer.status_code)
            assert answer.mimetype == "text/html", (method, path)
    assert client.get(f"/batches/{real_batch}").status_code == 200


# 3. Operators reach every tenant's dead letters with basic auth beside tenant keys.


@pytest.fixture
def keyed(make_app):
    return make_app(INTAKE_API_KEYS=KEYS, INTAKE_ADMIN_PASSWORD="op-secret").test_client()


def test_operator_basic_auth_reads_every_tenants_dead_letters(keyed):
    answer = keyed.get("/api/failed?all=1", headers=basic("admin", "op-secret"))
    assert answer.status_code == 200 and answer.get_json()["tasks"] == []


def test_basic_auth_is_not_a_tenant(keyed):
    operator = basic("admin", "op-secret")
    for path in ("/api/failed", "/api/batches", f"/api/tasks/{ID}", "/api/search?q=x"):
        answer = keyed.get(path, headers=operator)
        assert answer.status_code == 401, path
        assert answer.get_json()["error"]["code"] == "unauthorized", path
    assert keyed.get("/api/failed?all=1", headers=basic("root", "op-secret")).status_code == 401
    assert keyed.get("/api/failed?all=1").status_code == 401


def test_a_tenant_key_is_not_an_operator(keyed):
    answer = keyed.get("/api/failed?all=1", headers=ACME)
    assert answer.status_code == 403
    assert answer.get_json()["error"]["code"] == "operator_only"
    assert keyed.get("/api/failed", headers=ACME).status_code == 200


# 4. The session cookie is Secure over HTTPS, or everywhere with INTAKE_SECURE_COOKIES=1.


def _session_cookie(response) -> str:
    found = [c for c in response.headers.getlist("Set-Cookie") if c.startswith("session=")]
    assert found, response.headers
    return found[-1]


def test_session_cookie_is_secure_over_https_only(make_app):
    app = make_app(INTAKE_API_KEYS=KEYS)
    plain = app.test_client()
    assert "; Secure" not in _session_cookie(sign_in(plain))
    secure, https = app.test_client(), "https://localhost"
    page = secure.get("/signin", base_url=https).get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    answer = secure.post(
        "/signin",
        base_url=https,
        headers={"Referer": f"{https}/signin"},
        data={"key": "acme-key-123-0123456789ab", "csrf_token": token},
    )
    assert answer.status_code == 303
    assert "; Secure" in _session_cookie(answer)


@pytest.mark.parametrize("value, secure", [("1", True), ("0", False), ("", False)])
def test_secure_cookies_setting(make_app, value, secure):
    client = make_app(INTAKE_API_KEYS=KEYS, INTAKE_SECURE_COOKIES=value).test_client()
    assert ("; Secure" in _session_cookie(client.get("/signin"))) is secure


# 5. Sessions live in Redis too: signing out revokes every copy of the cookie.


def test_signing_in_stores_a_session_record_with_the_cookie_lifetime(make_app, redis):
    app = make_app(INTAKE_API_KEYS=KEYS)
    client = app.test_client()
    assert sign_in(client).status_code == 303
    with client.session_transaction() as session:
        session_id = session["sid"]
        assert session["tenant"] == "acme" and session["key"]
    ttl = redis.ttl(keys.web_session(session_id))
    lifetime = app.permanent_session_lifetime.total_seconds()
    assert lifetime - 5 <= ttl <= lifetime


def test_signing_out_revokes_a_copied_cookie(make_app, redis):
    app = make_app(INTAKE_API_KEYS=KEYS)
    original, thief = app.test_client(), app.test_client()
    sign_in(original)
    cookie = original.get_cookie("session")
    thief.set_cookie("session", cookie.value)
    assert thief.get("/").status_code == 200 and thief.get("/api/batches").status_code == 200
    with original.session_transaction() as session:
        session_id = session["sid"]
    original.post("/signout", data={"csrf_token": csrf_token(original, "/")})
    assert redis.exists(keys.web_session(session_id)) == 0
    page = thief.get("/")
    assert page.status_code == 303 and page.headers["Location"].startswith("/signin")
    thief.set_cookie("session", cookie.value)
    assert thief.get("/api/batches").status_code == 401


def test_a_session_without_its_record_is_refused(make_app):
    client = make_app(INTAKE_API_KEYS=KEYS).test_client()
    sign_in(client)
    with client.session_transaction() as session:
        session["sid"] = "f" * 64  # a forged or expired id: no record in Redis
    assert client.get("/").status_code == 303


def test_a_session_costs_one_read_and_bearer_keys_and_static_files_none(
    make_app, redis, monkeypatch
):
    client = make_app(INTAKE_API_KEYS=KEYS).test_client()
    sign_in(client)
    reads: list[str] = []
    real_get = redis.get
    monkeypatch.setattr(redis, "get", lambda name: reads.append(name) or real_get(name))

    def session_reads() -> list[str]:
        return [name for name in reads if "session" in str(name)]

    assert client.get("/api/failed", headers=ACME).status_code == 200
    assert client.get("/static/app.css").status_code == 200
    assert session_reads() == []
    assert client.get("/api/failed").status_code == 200
    assert len(session_reads()) == 1
