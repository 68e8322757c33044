"""Where sign-in and the task forms send a person back to (webapp.redirects): a path of this
site, judged as a browser would read the Location, so no spelling of another host gets out."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from tests.unit.conftest import upload

KEYS = "acme:acme-key-123-0123456789ab"
# Each is taken as another host (or a scheme) by a browser once it strips tabs and newlines,
# trims controls and spaces and reads a backslash as a slash; sent as the raw query value.
HOSTILE = (
    "/%09/evil.com",
    "/\t/evil.com",
    "/\\evil.com",
    "\\/evil.com",
    "//evil.com",
    "/%0a/evil.com",
    " //evil.com",
    "https://evil.com",
    "/\r\n/evil.com",
    "%2F%2Fevil.com",
    "/%0d/evil.com",
    "\x00//evil.com",
    "/%5C/evil.com",
    "%252F%252Fevil.com",
    "/%2509/evil.com",
    "javascript:alert(1)",
    "/\x0b/evil.com",
    "\\\\evil.com",
    "///evil.com",
    "http:evil.com",
    "%09//evil.com",
)
GOOD = ("/batches/abc?x=1", "/search?q=a%20b", "/", "/tasks/0123?next=/x")


def _csrf(client, path: str) -> str:
    page = client.get(path).get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def _sign_in(client, target: str):
    token = _csrf(client, "/signin")
    return client.post(
        f"/signin?next={_raw(target)}",
        data={"key": "acme-key-123-0123456789ab", "csrf_token": token},
    )


def _raw(target: str) -> str:
    """The query value exactly as typed into a link: percent-escapes kept, the characters a URL
    cannot carry raw escaped once (the server decodes them back)."""
    return quote(target, safe="%/?=:\\")


@pytest.fixture
def keyed(make_app):
    return make_app(INTAKE_API_KEYS=KEYS).test_client()


@pytest.mark.parametrize("target", HOSTILE)
def test_sign_in_never_redirects_off_site(keyed, target):
    answer = _sign_in(keyed, target)
    assert answer.status_code == 303 and answer.headers["Location"] == "/", answer.headers


@pytest.mark.parametrize("target", GOOD)
def test_sign_in_goes_back_to_a_path_of_this_site(keyed, target):
    answer = _sign_in(keyed, target)
    assert answer.status_code == 303 and answer.headers["Location"] == target


@pytest.mark.parametrize("target", HOSTILE)
def test_the_sign_in_form_carries_no_foreign_target(keyed, target):
    page = keyed.get(f"/signin?next={_raw(target)}").get_data(as_text=True)
    assert re.search(r'name="next" value="/"', page), page


def test_a_task_form_falls_back_to_the_task_for_a_foreign_target(client, run_jobs):
    task_id = upload(client, ("a.txt", b"words " * 20)).get_json()["tasks"][0]["id"]
    run_jobs()
    token = _csrf(client, f"/tasks/{task_id}")
    for target, expected in [
        ("/%09/evil.com", f"/tasks/{task_id}"),
        ("/\\evil.com", f"/tasks/{task_id}"),
        ("/failed", "/failed"),
    ]:
        answer = client.post(f"/tasks/{task_id}/retry", data={"csrf_token": token, "next": target})
        assert answer.status_code == 303 and answer.headers["Location"] == expected, target
