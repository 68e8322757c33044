"""A server that lost its scripts (a restart, a failover, SCRIPT FLUSH) runs each job once
(docs/architecture.md §9: a job is queued only by the claim that created its task).

Each upload below goes to a server whose script cache was just emptied, with two workers of
the fault stack already listening: a job queued beside a refused claim would be taken at once
and run a second attempt beside the first. So a text counts one attempt, a corrupt PDF is not
tried twice, and a document whose embedding service is always down ends after exactly its cap.
"""

from __future__ import annotations

import pytest

from tests.integration.faults import TASK_TIMEOUT, document, submit_one
from tests.integration.fixtures import Stack
from tests.integration.helpers import ApiClient
from tests.integration.intake_api import unique_word, upload, wait_terminal
from tests.samples import make_pdf

pytestmark = pytest.mark.integration


def _without_scripts(stack: Stack) -> None:
    stack.redis().script_flush()


def test_jobs_sent_to_a_server_without_scripts_each_run_once(fault: Stack):
    word, down = unique_word(), unique_word()
    fault.embedding.fail_next(50, "status:503", match=down)
    with ApiClient(fault.url) as client:
        _without_scripts(fault)
        text = submit_one(client, f"plain-{word}.txt", document(word, paragraphs=1))
        _without_scripts(fault)
        response, _ = upload(
            client, [(f"cut-{word}.pdf", make_pdf("A cut-off file.")[:200], "application/pdf")]
        )
        assert response.status_code == 202, response.text
        [corrupt] = [t["id"] for t in response.json()["tasks"]]
        _without_scripts(fault)
        exhausted = submit_one(client, f"down-{down}.txt", document(down, paragraphs=1))
        final, _ = wait_terminal(client, [text, corrupt, exhausted], timeout=TASK_TIMEOUT)

    assert final[text]["status"] == "succeeded" and final[text]["attempts"] == 1, final[text]
    assert final[corrupt]["status"] == "failed", final[corrupt]
    assert final[corrupt]["attempts"] == 1, "a bad file is never tried twice"
    assert final[corrupt]["error"]["retryable"] is False, final[corrupt]
    assert final[exhausted]["status"] == "failed", final[exhausted]
    assert final[exhausted]["attempts"] == 3 == final[exhausted]["max_attempts"], final[exhausted]
    assert len(fault.embedding.received(down)) == 3, "one embedding request per attempt"
