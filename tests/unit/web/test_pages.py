"""Pages and operator access on fakeredis: CSRF, no inline code, /rq guarded (docs/architecture.md
§6, §10)."""

from __future__ import annotations

import base64
import io
import re

from tests.unit.conftest import upload

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)
INLINE_STYLE = re.compile(r"<style\b|\sstyle=|\son[a-z]+=", re.I)


def _csrf(client) -> str:
    page = client.get("/").get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def test_pages_have_no_inline_code_and_send_a_strict_policy(client):
    batch = upload(client, ("a.txt", b"Some words.")).get_json()
    for url in ("/", batch["page_url"], batch["tasks"][0]["page_url"]):
        response = client.get(url)
        html = response.get_data(as_text=True)
        assert response.status_code == 200
        assert not INLINE_SCRIPT.search(html) and not INLINE_STYLE.search(html), url
        policy = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_a_live_page_refreshes_itself_without_javascript(client):
    batch = upload(client, ("a.txt", b"Some words.")).get_json()
    html = client.get(batch["page_url"]).get_data(as_text=True)
    assert '<noscript><meta http-equiv="refresh"' in html
    assert 'data-poll-url="/api/batches/' in html


def test_upload_form_needs_its_csrf_token(make_app):
    client = make_app(WTF_CSRF_ENABLED=True).test_client()
    files = {"files": (io.BytesIO(b"hello there"), "a.txt")}
    refused = client.post("/upload", data=files, content_type="multipart/form-data")
    assert refused.status_code == 400
    files = {"files": (io.BytesIO(b"hello there"), "a.txt"), "csrf_token": _csrf(client)}
    accepted = client.post("/upload", data=files, content_type="multipart/form-data")
    assert accepted.status_code == 303 and "/batches/" in accepted.headers["Location"]


def test_user_supplied_names_are_escaped(client):
    name = "<img src=x onerror=alert(1)>.txt"
    batch = upload(client, (name, b"Some words.")).get_json()
    html = client.get(batch["page_url"]).get_data(as_text=True)
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;.txt" in html


def test_unknown_batch_page_is_a_404_page(client):
    response = client.get("/batches/nope")
    assert response.status_code == 404 and response.mimetype == "text/html"


def test_dashboard_is_for_operators_only(make_app):
    assert make_app().test_client().get("/rq/").status_code == 403
    local = make_app(INTAKE_LOCAL_MODE=True).test_client()
    assert local.get("/rq/").status_code == 200
    remote = local.get("/rq/", environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert remote.status_code == 403
    guarded = make_app(INTAKE_ADMIN_PASSWORD="s3cret").test_client()
    assert guarded.get("/rq/").status_code == 401
    token = base64.b64encode(b"admin:s3cret").decode()
    assert guarded.get("/rq/", headers={"Authorization": f"Basic {token}"}).status_code == 200


def test_local_mode_never_comes_from_the_environment(make_app, monkeypatch):
    monkeypatch.setenv("INTAKE_LOCAL_MODE", "1")
    assert make_app().test_client().get("/rq/").status_code == 403


def test_dashboard_is_read_only(make_app):
    client = make_app(INTAKE_LOCAL_MODE=True).test_client()
    for path in ("/rq/job/abc/delete", "/rq/queue/intake/failed/empty", "/rq/job/abc/requeue"):
        assert client.post(path).status_code == 403
    assert client.get("/rq/requeue/intake").status_code == 403
