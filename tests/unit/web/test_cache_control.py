"""What a shared browser may keep after sign-out (webapp.security): authenticated answers are
never stored; those validated by ETag are kept only to be revalidated; static files cache as
they always did."""

from __future__ import annotations

import re

import pytest

from tests.unit.conftest import upload

KEYS = "acme:acme-key-123-0123456789ab"
ACME = {"Authorization": "Bearer acme-key-123-0123456789ab"}
NO_STORE = "private, no-store"
REVALIDATE = "private, no-cache"


@pytest.fixture
def keyed(make_app):
    return make_app(INTAKE_API_KEYS=KEYS).test_client()


@pytest.fixture
def batch(keyed):
    return upload_as(keyed, ("a.txt", b"Some words to find later.")).get_json()


def upload_as(client, *files):
    import io

    data = {"files": [(io.BytesIO(content), name) for name, content in files]}
    return client.post(
        "/api/documents", data=data, headers=ACME, content_type="multipart/form-data"
    )


def sign_in(client) -> None:
    page = client.get("/signin").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    assert (
        client.post(
            "/signin", data={"key": "acme-key-123-0123456789ab", "csrf_token": token}
        ).status_code
        == 303
    )


@pytest.mark.parametrize(
    "path",
    [
        "/api/batches",
        "/api/search?q=words",
        "/api/documents",
        "/api/documents?q=a&status=pending",
        "/api/documents/a.txt",
    ],
)
def test_api_answers_are_never_stored(keyed, batch, path):
    answer = keyed.get(path, headers=ACME)
    assert answer.status_code == 200 and answer.headers["Cache-Control"] == NO_STORE


def test_an_upload_and_a_refusal_are_never_stored(keyed):
    assert upload_as(keyed, ("a.txt", b"words")).headers["Cache-Control"] == NO_STORE
    refused = keyed.get("/api/batches")
    assert refused.status_code == 401 and refused.headers["Cache-Control"] == NO_STORE


@pytest.mark.parametrize("path", ["/", "/search?q=words", "/failed"])
def test_pages_are_never_stored(keyed, batch, path):
    sign_in(keyed)
    answer = keyed.get(path)
    assert answer.status_code == 200 and answer.headers["Cache-Control"] == NO_STORE


def test_a_batch_page_is_never_stored(keyed, batch):
    sign_in(keyed)
    answer = keyed.get(batch["page_url"])
    assert answer.status_code == 200 and answer.headers["Cache-Control"] == NO_STORE


def test_etag_validated_answers_are_revalidated_not_stored(keyed, batch):
    task_url = batch["tasks"][0]["url"]
    for path in (batch["url"], task_url, "/api/failed", "/api/webhooks/deliveries"):
        first = keyed.get(path, headers=ACME)
        assert first.status_code == 200 and first.headers["ETag"], path
        assert first.headers["Cache-Control"] == REVALIDATE, path
        again = keyed.get(path, headers={**ACME, "If-None-Match": first.headers["ETag"]})
        assert again.status_code == 304 and again.headers["Cache-Control"] == REVALIDATE, path


def test_the_event_stream_is_never_stored(keyed, batch):
    answer = keyed.get(f"{batch['url']}/events", headers=ACME, buffered=False)
    assert answer.status_code == 200 and answer.headers["Cache-Control"] == NO_STORE
    answer.close()


def test_static_files_keep_their_own_caching(keyed):
    answer = keyed.get("/static/app.css")
    assert answer.status_code == 200
    assert "no-store" not in answer.headers.get("Cache-Control", "")
    assert answer.headers.get("ETag") or answer.headers.get("Last-Modified")


def test_without_keys_every_page_is_the_single_tenants_and_not_stored(client):
    batch = upload(client, ("a.txt", b"words")).get_json()
    assert client.get("/").headers["Cache-Control"] == NO_STORE
    assert client.get(batch["url"]).headers["Cache-Control"] == REVALIDATE
