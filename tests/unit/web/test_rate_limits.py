"""Limits per tenant and per client on fakeredis (docs/architecture.md §18): searches at once,
a search a replica did not finish, expensive reads, failed keys and sign-ins, key length.

The search slots shared by every web process are proven again against gunicorn and a real
Redis in tests/integration/web/test_search_limits.py, the replica's timeout on a real stalled
replica in tests/integration/kb/test_kb_apart.py.
"""

from __future__ import annotations

import re

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from jobs.core import keys
from jobs.kb.retrieval import Found
from tests.unit.conftest import upload

KEY = "acme-key-0123456789abcdef"
OTHER_KEY = "globex-key-0123456789abcdef"
KEYS = f"acme:{KEY},globex:{OTHER_KEY}"
ACME = {"Authorization": f"Bearer {KEY}"}
WRONG = {"Authorization": "Bearer not-a-key-of-anyone-at-all"}


def _service(app):
    return app.extensions["intake"]


# 1. At most INTAKE_TENANT_SEARCHES searches of one tenant at once, all web processes together.


def test_a_search_past_the_tenants_running_searches_is_429_and_a_freed_slot_lets_one_through(
    make_app, redis
):
    app = make_app(INTAKE_TENANT_SEARCHES=2)
    client = app.test_client()
    slots = _service(app).search_slots
    held = [slots.take("default") for _ in range(2)]  # two searches running elsewhere

    refused = client.get("/api/search?q=anything")
    assert refused.status_code == 429, refused.get_data(as_text=True)
    assert refused.get_json()["error"]["code"] == "too_many_searches"
    assert "2 searches running" in refused.get_json()["error"]["message"]
    assert int(refused.headers["Retry-After"]) >= 1
    page = client.get("/search?q=anything")
    assert page.status_code == 429 and page.headers["Retry-After"]
    text = page.get_data(as_text=True)
    assert "2 searches running" in text and 'role="alert"' in text
    assert 'name="q"' in text, "the form is still there to search again"

    slots.give_back("default", held.pop())
    answer = client.get("/api/search?q=anything")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert redis.zcard(keys.search_slots("default")) == 1, "the search gave its slot back"


def test_searches_one_after_another_never_run_out_of_slots(make_app):
    client = make_app(INTAKE_TENANT_SEARCHES=1).test_client()
    for _ in range(5):
        assert client.get("/api/search?q=words").status_code == 200
        assert client.get("/search?q=words").status_code == 200


def test_the_slot_of_a_killed_web_process_frees_itself_when_its_lease_ends(make_app, redis):
    client = make_app(INTAKE_TENANT_SEARCHES=1).test_client()
    redis.zadd(keys.search_slots("default"), {"killed-mid-search": 1})  # a lease long past
    assert client.get("/api/search?q=words").status_code == 200


def test_each_tenant_has_its_own_search_slots(make_app):
    app = make_app(INTAKE_API_KEYS=KEYS, INTAKE_TENANT_SEARCHES=1)
    client = app.test_client()
    _service(app).search_slots.take("globex")
    assert client.get("/api/search?q=words", headers=ACME).status_code == 200
    refused = client.get("/api/search?q=words", headers={"Authorization": f"Bearer {OTHER_KEY}"})
    assert refused.status_code == 429


# 2. A search a read replica did not finish in time is not run again on the primary.


class Reader:
    """A stand-in Retriever: counts its searches, or fails them as told."""

    def __init__(self, fails: BaseException | None = None) -> None:
        self.fails, self.searches = fails, 0

    def lexical(self, tenant, row, k):
        self.searches += 1
        if self.fails is not None:
            raise self.fails
        return Found([])


def test_a_search_that_timed_out_on_a_replica_answers_503_and_never_reaches_the_primary(app):
    readers = _service(app).searcher.readers
    primary, replica = Reader(), Reader(RedisTimeoutError("Timeout reading from replica"))
    readers.primary, readers.replicas, readers.down_until = primary, [replica], [0.0]
    client = app.test_client()

    answer = client.get("/api/search?q=anything")
    assert answer.status_code == 503, answer.get_data(as_text=True)
    assert answer.get_json()["error"]["code"] == "search_timeout"
    assert int(answer.headers["Retry-After"]) >= 1
    assert (replica.searches, primary.searches) == (1, 0), "not replayed on the primary"

    readers.down_until = [0.0]
    page = client.get("/search?q=anything")
    assert page.status_code == 503 and page.headers["Retry-After"]
    assert "did not finish in time" in page.get_data(as_text=True)
    assert primary.searches == 0

    assert client.get("/api/search?q=anything").status_code == 200, (
        "the next search: the replica left alone, the primary answers"
    )
    assert primary.searches == 1


def test_a_replica_that_refuses_the_connection_still_falls_back_to_the_primary(app):
    readers = _service(app).searcher.readers
    primary, replica = Reader(), Reader(RedisConnectionError("Connection refused"))
    readers.primary, readers.replicas, readers.down_until = primary, [replica], [0.0]
    answer = app.test_client().get("/api/search?q=anything")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert primary.searches == 1


# 3. Expensive reads per tenant: a large batch read or its stream opened, a filtered library.


def test_filtered_library_reads_past_the_tenants_rate_are_429(make_app):
    client = make_app(INTAKE_TENANT_EXPENSIVE_READS=12).test_client()  # 2 per 10 s window
    for _ in range(2):
        assert client.get("/api/documents?q=report").status_code == 200
    refused = client.get("/api/documents?status=failed")
    assert refused.status_code == 429, refused.get_data(as_text=True)
    error = refused.get_json()["error"]
    assert error["code"] == "too_many_reads" and "12 a minute" in error["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 10
    assert client.get("/api/documents").status_code == 200, "an unfiltered page is not counted"


def test_large_batch_reads_and_their_streams_are_counted_small_ones_are_not(make_app, monkeypatch):
    monkeypatch.setattr("webapp.limits.LARGE_BATCH_TASKS", 2)
    client = make_app(INTAKE_TENANT_EXPENSIVE_READS=12).test_client()
    small = upload(client, ("a.txt", b"one"), ("b.txt", b"two")).get_json()["batch_id"]
    large = upload(client, *((f"{n}.txt", f"doc {n}".encode()) for n in range(3)))
    large_id = large.get_json()["batch_id"]

    for _ in range(5):  # a page polling an ordinary batch pays nothing
        assert client.get(f"/api/batches/{small}").status_code == 200
    first = client.get(f"/api/batches/{large_id}")
    assert first.status_code == 200
    again = client.get(f"/api/batches/{large_id}", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304, "a 304 is counted: its ETag took the same reads"
    refused = client.get(f"/api/batches/{large_id}")
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    assert refused.get_json()["error"]["code"] == "too_many_reads"
    stream = client.get(f"/api/batches/{large_id}/events")
    assert stream.status_code == 429 and stream.get_json()["error"]["code"] == "too_many_reads"
    assert client.get(f"/api/batches/{small}").status_code == 200


def test_the_default_read_rate_lets_twenty_pages_poll_a_large_batch_every_second(
    make_app, monkeypatch
):
    monkeypatch.setattr("webapp.limits.LARGE_BATCH_TASKS", 0)
    client = make_app().test_client()
    batch = upload(client, ("a.txt", b"one")).get_json()["batch_id"]
    for _ in range(20 * 10):  # 20 pages, one poll a second, over the 10 s window
        assert client.get(f"/api/batches/{batch}").status_code == 200


def test_expensive_reads_are_counted_per_tenant(make_app):
    client = make_app(INTAKE_API_KEYS=KEYS, INTAKE_TENANT_EXPENSIVE_READS=6).test_client()
    assert client.get("/api/documents?q=x", headers=ACME).status_code == 200
    assert client.get("/api/documents?q=x", headers=ACME).status_code == 429
    other = {"Authorization": f"Bearer {OTHER_KEY}"}
    assert client.get("/api/documents?q=x", headers=other).status_code == 200


# 4. Failed API keys and sign-ins per client address.


def test_a_client_past_its_failed_keys_is_refused_even_with_a_right_key(make_app):
    client = make_app(INTAKE_API_KEYS=KEYS, INTAKE_CLIENT_AUTH_FAILURES=3).test_client()
    for _ in range(3):
        assert client.get("/api/batches", headers=WRONG).status_code == 401
    refused = client.get("/api/batches", headers=WRONG)
    assert refused.status_code == 429, refused.get_data(as_text=True)
    assert refused.get_json()["error"]["code"] == "too_many_failures"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert client.get("/api/batches", headers=ACME).status_code == 429, (
        "no guessing goes on behind the refusals"
    )
    elsewhere = client.get(
        "/api/batches", headers=ACME, environ_base={"REMOTE_ADDR": "198.51.100.7"}
    )
    assert elsewhere.status_code == 200, "another client is not refused"


def test_right_keys_never_count_as_failures(make_app):
    client = make_app(INTAKE_API_KEYS=KEYS, INTAKE_CLIENT_AUTH_FAILURES=2).test_client()
    for _ in range(10):
        assert client.get("/api/batches", headers=ACME).status_code == 200


def test_behind_a_trusted_proxy_each_forwarded_client_is_counted_apart(make_app):
    client = make_app(INTAKE_API_KEYS=KEYS, INTAKE_CLIENT_AUTH_FAILURES=2).test_client()
    guesser = {**WRONG, "X-Forwarded-For": "203.0.113.5"}
    for _ in range(2):
        assert client.get("/api/batches", headers=guesser).status_code == 401
    assert client.get("/api/batches", headers=guesser).status_code == 429
    honest = {**ACME, "X-Forwarded-For": "203.0.113.6"}  # the same proxy (loopback: trusted)
    assert client.get("/api/batches", headers=honest).status_code == 200


def test_an_untrusted_peer_cannot_choose_its_address_with_x_forwarded_for(make_app):
    client = make_app(INTAKE_API_KEYS=KEYS, INTAKE_CLIENT_AUTH_FAILURES=2).test_client()
    peer = {"REMOTE_ADDR": "198.51.100.9"}
    for n in range(2):
        headers = {**WRONG, "X-Forwarded-For": f"203.0.113.{n}"}
        assert client.get("/api/batches", headers=headers, environ_base=peer).status_code == 401
    headers = {**ACME, "X-Forwarded-For": "203.0.113.99"}
    assert client.get("/api/batches", headers=headers, environ_base=peer).status_code == 429


def _csrf(client) -> str:
    page = client.get("/signin").get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def test_failed_sign_ins_past_the_limit_show_a_readable_429(make_app):
    client = make_app(INTAKE_API_KEYS=KEYS, INTAKE_CLIENT_AUTH_FAILURES=2).test_client()
    token = _csrf(client)
    for _ in range(2):
        assert client.post("/signin", data={"key": "wrong", "csrf_token": token}).status_code == 401
    refused = client.post("/signin", data={"key": KEY, "csrf_token": token})
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    text = refused.get_data(as_text=True)
    assert "Too many failed sign-ins" in text and 'name="key"' in text
    assert client.get("/api/batches", headers=ACME).status_code == 429, (
        "sign-ins and API keys share the client's count"
    )


# 5. API keys of fewer than 24 characters stop the start, naming the tenant, not the key.


def test_a_short_api_key_stops_the_start_naming_its_tenant_not_the_key(make_app):
    with pytest.raises(ValueError) as refused:
        make_app(INTAKE_API_KEYS=f"acme:{KEY},globex:short-key-12345")
    message = str(refused.value)
    assert "globex" in message and "24" in message
    assert "short-key-12345" not in message
    make_app(INTAKE_API_KEYS="acme:" + "k" * 24)  # 24 is enough
