"""A script re-sent by the Redis client changes nothing twice (issue 11 item 6).

redis-py sends a command again when its connection breaks before the reply arrives (the web's
client retries twice). Here the Procfile's web talks to the real redis-server through a proxy
(tests/integration/redis_proxy.py) that lets Redis run one chosen command, then cuts the
connection before the reply: the web's client sends it again on a new connection. The submit,
cancel and retry scripts must answer the second time what they did the first time.

Its own stack (database 5): the web behind the proxy, one worker straight on Redis.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobs.tasks import lifecycle, submit
from tests.integration.fixtures import Stack, running_stack
from tests.integration.helpers import ApiClient, poll
from tests.integration.intake_api import get_json, txt, unique_word, upload, wait_terminal
from tests.integration.redis_proxy import ResettingProxy

pytestmark = pytest.mark.integration

DATABASE = 5
# The cancel's and the retry's EVALSHA (jobs.core.scripts: no script's text is sent per call).
CANCEL_SCRIPT = lifecycle._CANCEL.sha.encode()
RETRY_SCRIPT = lifecycle._RETRY.sha.encode()


@pytest.fixture(scope="module")
def proxied(
    redis_server, _embedding_server, tmp_path_factory
) -> Iterator[tuple[Stack, ResettingProxy]]:
    proxy = ResettingProxy(redis_server.port)
    try:
        with running_stack(
            redis_server,
            tmp_path_factory,
            "resend",
            DATABASE,
            {},
            embedding=_embedding_server,
            workers=1,
            web_redis_url=proxy.url(DATABASE),
        ) as stack:
            with ApiClient(
                stack.url
            ) as client:  # the submit script is loaded: later ones are EVALSHA
                response, _ = upload(client, [txt(f"warm-{unique_word()}.txt", "Warm words.")])
                assert response.status_code == 202, response.text
            for script in (lifecycle._CANCEL, lifecycle._RETRY):  # a lost reply is then the run's
                stack.redis().script_load(script.source)
            yield stack, proxy
    finally:
        proxy.close()


def lose_the_reply(proxy: ResettingProxy, marker: bytes) -> None:
    assert marker in (
        submit._SUBMIT.sha.encode() + lifecycle._CANCEL.sha.encode() + lifecycle._RETRY.sha.encode()
    ), "the marker names no script"
    assert not proxy.armed()
    proxy.drop_reply_once(marker)


def assert_reply_was_lost(proxy: ResettingProxy, dropped_before: int) -> None:
    assert not proxy.armed(), "the marked command was never sent"
    assert proxy.dropped == dropped_before + 1, "no reply was lost: the test proved nothing"


# One file: the claim travels with the job's enqueue; a batch: the claim alone, then the jobs.
@pytest.mark.parametrize("files", [1, 2], ids=["one-file", "batch"])
def test_a_resent_submit_registers_the_batch_once(proxied, files):
    stack, proxy = proxied
    word = unique_word()
    with ApiClient(stack.url) as client:
        dropped = proxy.dropped
        lose_the_reply(proxy, submit._SUBMIT.sha.encode())
        response, _ = upload(
            client, [txt(f"resent-{word}-{n}.txt", f"The {word} memo {n}.") for n in range(files)]
        )
        assert_reply_was_lost(proxy, dropped)
        assert response.status_code == 202, response.text
        body = response.json()
        assert [t["duplicate"] for t in body["tasks"]] == [False] * files, body
        ids = [t["id"] for t in body["tasks"]]
        batch = get_json(client, body["url"])
        assert [t["id"] for t in batch["tasks"]] == ids, batch
        assert batch["size"] == files and sum(batch["counts"].values()) == files, batch
        final = wait_terminal(client, ids)[0]
        assert [t["status"] for t in final.values()] == ["succeeded"] * files, final
        assert [final[i]["attempts"] for i in ids] == [1] * files, final


def test_a_resent_cancel_and_a_resent_retry_each_happen_once(proxied):
    stack, proxy = proxied
    word = unique_word()
    stack.workers.stop_all()  # the task waits: it is canceled while pending
    try:
        with ApiClient(stack.url) as client:
            response, _ = upload(client, [txt(f"again-{word}.txt", f"The {word} plan.")])
            task_id = response.json()["tasks"][0]["id"]

            dropped = proxy.dropped
            lose_the_reply(proxy, CANCEL_SCRIPT)
            canceled = client.post(f"/api/tasks/{task_id}/cancel")
            assert_reply_was_lost(proxy, dropped)
            assert canceled.status_code == 202, canceled.text
            assert canceled.json()["status"] == "canceled"

            lose_the_reply(proxy, RETRY_SCRIPT)
            retried = client.post(f"/api/tasks/{task_id}/retry")
            assert_reply_was_lost(proxy, dropped + 1)
            assert retried.status_code == 202, retried.text
            assert retried.json()["status"] == "pending", retried.json()
        stack.workers.ensure(1)
        with ApiClient(stack.url) as client:
            final = wait_terminal(client, [task_id])[0][task_id]
            assert final["status"] == "succeeded" and final["attempts"] == 1, final
            poll(
                lambda: get_json(client, "/api/failed")["tasks"],
                lambda t: t == [],
                timeout=5,
                message="no dead letter",
            )
    finally:
        stack.workers.ensure(1)
