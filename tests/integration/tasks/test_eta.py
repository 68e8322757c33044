"""A batch's `eta_seconds` (docs/architecture.md §16) on the fault stack: real workers, a real
embedding server answering in 1.5 s, so each document takes at least that long and the estimate can
be watched while the batch is live."""

from __future__ import annotations

import time

import pytest

from tests.integration.helpers import ApiClient
from tests.integration.intake_api import get_json, txt, unique_word, upload

pytestmark = pytest.mark.integration

DOCUMENTS = 6
EMBED_SECONDS = 1.5


def test_eta_is_null_until_a_document_finished_then_counts_down_to_zero(fault):
    fault.embedding.mode = f"slow:{EMBED_SECONDS}"
    word = unique_word()
    with ApiClient(fault.url) as client:
        response, _ = upload(
            client,
            [txt(f"eta-{word}-{n}.txt", f"Document {n} of {word}.") for n in range(DOCUMENTS)],
        )
        batch_url = response.json()["url"]
        assert get_json(client, batch_url)["eta_seconds"] is None, "nothing finished yet"
        seen: list[tuple[int, int]] = []  # (documents finished, eta) while live
        deadline = time.monotonic() + 120
        while True:
            batch = get_json(client, batch_url)
            finished = batch["counts"]["succeeded"] + batch["counts"]["failed"]
            if batch["status"] not in ("pending", "running"):
                break
            if finished == 0:
                assert batch["eta_seconds"] is None
            else:
                seen.append((finished, batch["eta_seconds"]))
            assert time.monotonic() < deadline, "the batch did not finish in 2 minutes"
            time.sleep(0.2)
        assert batch["status"] == "succeeded" and batch["eta_seconds"] == 0
    assert seen, "the batch was never seen live with a finished document"
    for finished, eta in seen:
        left = DOCUMENTS - finished
        # Each document took ≥ 1.5 s; two workers share what is left (one running may be
        # nearly done): the estimate lies between a share of one and the whole rest.
        assert eta is not None and 0 < eta <= left * 30, (finished, eta, seen)
    assert seen[-1][1] <= seen[0][1], f"the estimate counts down: {seen}"
