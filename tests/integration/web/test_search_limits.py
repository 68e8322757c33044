"""At most INTAKE_TENANT_SEARCHES (4) searches of one tenant at once, all web processes together
(docs/architecture.md §18), on the Procfile's web (gunicorn, two processes) and a real Redis.

Deterministic, without slow searches: the test holds slots through the very mechanism the web
uses (jobs.core.throttle.SearchSlots, on the same Redis), as searches running in other web
processes would; the web's own searches must then be refused by every process, and a slot
given back must let exactly one more through.
"""

from __future__ import annotations

import pytest

from jobs.core import keys
from jobs.core.throttle import SearchSlots
from tests.integration.helpers import ApiClient

pytestmark = pytest.mark.integration

TENANT = "default"  # the session's web runs without INTAKE_API_KEYS
LIMIT = 4  # INTAKE_TENANT_SEARCHES' default


def test_a_fifth_search_is_refused_by_every_web_process_until_a_slot_is_given_back(
    web, redis_server
):
    connection = redis_server.client()
    slots = SearchSlots(connection, LIMIT)
    held = [slots.take(TENANT) for _ in range(LIMIT)]
    try:
        with ApiClient(web.url) as client:
            # Several requests, so both of the Procfile's processes answer some.
            for _ in range(8):
                refused = client.get("/api/search", params={"q": "anything"})
                assert refused.status_code == 429, refused.text
                assert refused.json()["error"]["code"] == "too_many_searches", refused.text
                assert int(refused.headers["Retry-After"]) >= 1
            page = client.get("/search", params={"q": "anything"})
            assert page.status_code == 429 and page.headers["Retry-After"]
            assert "4 searches running" in page.text and 'name="q"' in page.text

            slots.give_back(TENANT, held.pop())
            for _ in range(3):  # one slot free: each search takes it and gives it back
                answer = client.get("/api/search", params={"q": "anything"})
                assert answer.status_code == 200, answer.text
            assert connection.zcard(keys.search_slots(TENANT)) == LIMIT - 1, (
                "the web's searches gave their slots back"
            )
    finally:
        for token in held:
            slots.give_back(TENANT, token)


def test_searches_one_after_another_leave_no_slot_behind(web, redis_server):
    connection = redis_server.client()
    with ApiClient(web.url) as client:
        for _ in range(2 * LIMIT + 1):
            assert client.get("/api/search", params={"q": "anything"}).status_code == 200
    assert connection.zcard(keys.search_slots(TENANT)) == 0
