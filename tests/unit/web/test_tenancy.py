"""Tenants on fakeredis: keys, sessions and isolation on every endpoint (docs/architecture.md
§10)."""

from __future__ import annotations

import io
import re

import pytest

from tests.samples import make_pdf_no_text

KEYS = "acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"
A = {"Authorization": "Bearer acme-key-123-0123456789ab"}
B = {"Authorization": "Bearer globex-key-456-0123456789ab"}


@pytest.fixture
def client(make_app):
    return make_app(INTAKE_API_KEYS=KEYS).test_client()


def _upload(client, headers, name="a.txt", data=b"Zebrafoxes are a tenant secret."):
    response = client.post(
        "/api/documents",
        headers=headers,
        content_type="multipart/form-data",
        data={"files": [(io.BytesIO(data), name)]},
    )
    assert response.status_code == 202, response.get_json()
    return response.get_json()


def test_api_needs_a_valid_key(client):
    for headers in ({}, {"Authorization": "Bearer nope-nope-nope"}, {"Authorization": "Basic x"}):
        response = client.get("/api/batches", headers=headers)
        assert response.status_code == 401
        assert response.get_json()["error"]["code"] == "unauthorized"
    assert client.get("/api/batches", headers=A).status_code == 200
    assert client.get("/api/health").status_code == 200, "monitoring needs no tenant key"


def test_another_tenants_ids_do_not_exist(client, run_jobs):
    body = _upload(client, A)
    task_id, batch_id = body["tasks"][0]["id"], body["batch_id"]
    run_jobs()
    for path in (
        f"/api/tasks/{task_id}",
        f"/api/batches/{batch_id}",
        f"/api/tasks/{task_id}/chunks",
    ):
        assert client.get(path, headers=A).status_code == 200
        assert client.get(path, headers=B).status_code == 404
    for path in (
        f"/api/tasks/{task_id}/retry",
        f"/api/tasks/{task_id}/cancel",
        f"/api/batches/{batch_id}/retry-failed",
        f"/api/batches/{batch_id}/cancel",
    ):
        assert client.post(path, headers=B).status_code == 404
    assert client.get("/api/batches", headers=B).get_json()["batches"] == []
    assert client.get("/api/search?q=zebrafoxes", headers=B).get_json()["results"] == []
    assert client.get("/api/search?q=zebrafoxes", headers=A).get_json()["results"]


def test_dead_letters_are_per_tenant(client, run_jobs):
    task_id = _upload(client, A, "scan.pdf", make_pdf_no_text())["tasks"][0]["id"]
    run_jobs()
    assert [t["id"] for t in client.get("/api/failed", headers=A).get_json()["tasks"]] == [task_id]
    assert client.get("/api/failed", headers=B).get_json()["tasks"] == []


def test_the_same_file_in_two_tenants_is_two_tasks(client):
    first = _upload(client, A)["tasks"][0]
    second = _upload(client, B)["tasks"][0]
    assert first["id"] != second["id"] and second["duplicate"] is False


def test_pages_sign_in_with_a_key_and_out_again(client):
    response = client.get("/")
    assert response.status_code == 303 and response.headers["Location"].startswith("/signin")
    form = client.get("/signin").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
    refused = client.post(
        "/signin", data={"key": "wrong-key-000-0123456789ab", "csrf_token": token}
    )
    assert refused.status_code == 401
    signed = client.post(
        "/signin", data={"key": "acme-key-123-0123456789ab", "csrf_token": token, "next": "/failed"}
    )
    assert signed.status_code == 303 and signed.headers["Location"] == "/failed"
    page = client.get("/").get_data(as_text=True)
    assert "Signed in as acme" in page and 'action="/signout"' in page
    assert client.get("/api/batches").status_code == 200, "the page's session works for its API"
    token = re.search(
        r'name="csrf_token" value="([^"]+)"', client.get("/").get_data(as_text=True)
    ).group(1)
    client.post("/signout", data={"csrf_token": token})
    assert client.get("/").status_code == 303


def test_removing_a_key_signs_its_sessions_out(make_app):
    app = make_app(INTAKE_API_KEYS=KEYS)
    client = app.test_client()
    with client.session_transaction() as session:
        session["tenant"], session["key"] = "acme", "0" * 32
    assert client.get("/").status_code == 303


def test_malformed_keys_are_refused_at_start(make_app):
    with pytest.raises(ValueError):
        make_app(INTAKE_API_KEYS="acme")
