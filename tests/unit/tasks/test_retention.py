"""Retention (docs/architecture.md §19): every record Intake writes for a task expires; lists are
trimmed."""

from __future__ import annotations

import time

from jobs.core import keys
from jobs.worker.housekeeping import run as housekeeping
from tests.samples import make_pdf_no_text
from tests.unit.conftest import upload

KEPT_FOR_GOOD = (
    "intake:kb:",
    "intake:metrics",
    "intake:blob-bytes",
    "intake:tenant:default:blob-bytes",
    "intake:tenant:default:blob-sizes",
    "intake:tenant:default:documents",  # a document stays until deleted
    "intake:tenant:default:stored-",
)  # and so do its originals
LISTS = (
    "intake:active",
    "intake:failed",
    "intake:tenant:default:batches",
    "intake:tenant:default:failed",
    "intake:tenant:default:active",
    "intake:canceling",
)


def test_every_task_record_expires_within_the_retention(make_app, redis, run_jobs, monkeypatch):
    monkeypatch.setenv("INTAKE_RETENTION_DAYS", "2")  # web and worker both read it
    client = make_app().test_client()
    upload(client, ("a.txt", b"Kept a while."), ("scan.pdf", make_pdf_no_text()))
    run_jobs()
    for key in (k.decode() for k in redis.scan_iter(match="intake:*")):
        if key.startswith(KEPT_FOR_GOOD) or key in LISTS:
            continue
        assert 0 < redis.ttl(key) <= 2 * 86400, key


def test_housekeeping_trims_lists_older_than_the_retention(client, redis):
    old = time.time() - 3 * 86400
    redis.zadd(keys.tenant_batches("default"), {"old-batch": old, "new-batch": time.time()})
    redis.zadd(keys.tenant_failed("default"), {"old-task": old})
    redis.zadd(keys.failed_all(), {"old-task": old})
    housekeeping(redis, 2 * 86400)
    assert redis.zrange(keys.tenant_batches("default"), 0, -1) == [b"new-batch"]
    assert redis.zcard(keys.tenant_failed("default")) == 0 and redis.zcard(keys.failed_all()) == 0
