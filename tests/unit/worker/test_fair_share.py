"""Fair share on fakeredis (docs/architecture.md §15): queue names per tenant, the registry workers
read, the order a worker takes queues in, and the scheduler of the queues a worker learned. The same
behaviour with real worker processes: tests/integration/worker/test_fair_share.py."""

from __future__ import annotations

import io
import time
from datetime import timedelta

import pytest
from rq import Queue
from rq.registry import ScheduledJobRegistry
from rq.scheduler import RQScheduler

from jobs.core import keys, queues
from jobs.core.settings import QUEUE_NAMES
from jobs.tasks.submit import choose_queue
from jobs.worker.fairshare import wanted_queues

KEYS = "acme:acme-key-123-0123456789ab,globex:globex-key-456-0123456789ab"
ACME = {"Authorization": "Bearer acme-key-123-0123456789ab"}
GLOBEX = {"Authorization": "Bearer globex-key-456-0123456789ab"}


def test_default_keeps_the_static_names_and_other_tenants_get_their_own():
    assert queues.tenant_queue_names("default") == list(QUEUE_NAMES)
    assert queues.tenant_queue_names("acme") == [
        "intake-high.acme",
        "intake.acme",
        "intake-bulk.acme",
    ]
    for tenant in ("default", "acme", "a-b_C9"):
        for priority in queues.PRIORITIES:
            assert queues.parse(queues.queue_name(tenant, priority)) == (tenant, priority)
    for other in ("csp-probe-1", "intake-low", "intake.", "intake.a.b", "bench-bare", "rq"):
        assert queues.parse(other) is None, other
    with pytest.raises(KeyError):
        queues.queue_name("acme", "urgent")


def test_choose_queue_keeps_its_rules_per_tenant():
    assert choose_queue(1, None) == "intake-high"
    assert choose_queue(10, None) == "intake"
    assert choose_queue(50, None) == "intake-bulk"
    assert choose_queue(1, None, "acme") == "intake-high.acme"
    assert choose_queue(10, None, "acme") == "intake.acme"
    assert choose_queue(500, None, "acme") == "intake-bulk.acme"
    assert choose_queue(500, "high", "acme") == "intake-high.acme"
    assert choose_queue(1, "bulk", "default") == "intake-bulk"
    assert choose_queue(1, "nonsense", "acme") == "intake-high.acme"


def test_fair_order_alternates_tenants_and_keeps_priorities_within_each():
    names = [*QUEUE_NAMES, *queues.tenant_queue_names("beta"), *queues.tenant_queue_names("acme")]
    assert queues.fair_order(names) == [
        "intake-high.acme",
        "intake.acme",
        "intake-bulk.acme",
        "intake-high.beta",
        "intake.beta",
        "intake-bulk.beta",
        "intake-high",
        "intake",
        "intake-bulk",
    ]
    assert queues.fair_order(names, after="acme")[:3] == queues.tenant_queue_names("beta")
    assert queues.fair_order(names, after="beta")[:3] == list(QUEUE_NAMES)
    assert queues.fair_order(names, after="default")[:3] == queues.tenant_queue_names("acme")
    assert queues.fair_order(names, after="gone")[0] == "intake-high.acme"
    assert queues.fair_order(["other", "intake-bulk", "intake-high"]) == [
        "intake-high",
        "intake-bulk",
        "other",
    ], "foreign queues keep their place, last"


def test_a_worker_serves_each_tenants_queues_of_the_priorities_it_was_given():
    assert wanted_queues(list(QUEUE_NAMES), ["acme"]) == [
        *QUEUE_NAMES,
        "intake-high.acme",
        "intake.acme",
        "intake-bulk.acme",
    ]
    assert wanted_queues(["intake-bulk"], ["acme", "beta"]) == [
        "intake-bulk",
        "intake-bulk.acme",
        "intake-bulk.beta",
    ]
    assert wanted_queues(["intake.acme"], ["beta"]) == ["intake.acme"]


def _upload(client, headers, count=1, priority=None):
    data = {"files": [(io.BytesIO(b"Tenant words %d." % n), f"d{n}.txt") for n in range(count)]}
    if priority:
        data["priority"] = priority
    response = client.post(
        "/api/documents", headers=headers, content_type="multipart/form-data", data=data
    )
    assert response.status_code == 202, response.get_json()
    return [t["id"] for t in response.get_json()["tasks"]]


def test_a_submit_enqueues_on_its_tenants_queue_and_registers_it(make_app, redis, run_jobs):
    client = make_app(INTAKE_API_KEYS=KEYS, INTAKE_LOCAL_MODE=True).test_client()
    assert queues.registered_tenants(redis) == []
    [first] = _upload(client, ACME)
    bulk = _upload(client, GLOBEX, count=60)
    assert queues.registered_tenants(redis) == ["acme", "globex"]
    assert Queue("intake-high.acme", connection=redis).get_job_ids() == [first]
    assert Queue("intake-bulk.globex", connection=redis).get_job_ids() == bulk
    assert Queue("intake-high", connection=redis).count == 0
    assert redis.hget(keys.task(first), "queue") == b"intake-high.acme"
    health = client.get("/api/health").get_json()  # local mode from loopback: an operator
    assert health["queues"]["intake-bulk.globex"] == 60 and health["queues"]["intake"] == 0
    assert health["priorities"] == {"high": 1, "normal": 0, "bulk": 60}
    run_jobs()
    assert client.get(f"/api/tasks/{first}", headers=ACME).get_json()["status"] == "succeeded"


def test_a_retry_goes_back_to_the_tenants_queue(make_app, redis, run_jobs):
    client = make_app(INTAKE_API_KEYS=KEYS).test_client()
    [task_id] = _upload(client, ACME)
    assert client.post(f"/api/tasks/{task_id}/cancel", headers=ACME).status_code == 202
    redis.delete(keys.queue_tenants())  # lost: the retry registers the tenant again
    assert client.post(f"/api/tasks/{task_id}/retry", headers=ACME).status_code == 202
    assert len(Queue("intake-high.acme", connection=redis).get_job_ids()) == 1
    assert queues.registered_tenants(redis) == ["acme"]


def test_single_tenant_deployments_use_only_the_static_queues(client, redis):
    response = client.post(
        "/api/documents",
        content_type="multipart/form-data",
        data={"files": [(io.BytesIO(b"Plain words."), "p.txt")]},
    )
    assert response.status_code == 202
    assert Queue("intake-high", connection=redis).count == 1
    assert queues.registered_tenants(redis) == []
    assert queues.all_names(redis) == list(QUEUE_NAMES)


@pytest.fixture
def worker(redis):
    from jobs.worker.workers import IntakeWorker

    return IntakeWorker(list(QUEUE_NAMES), connection=redis)


def _drain_order(worker, redis) -> list[str]:
    """What RQ's loop does between jobs: dequeue from the ordered queues, then reorder."""
    taken = []
    while found := Queue.dequeue_any(worker._ordered_queues, None, connection=redis):
        job, queue = found
        taken.append(queues.tenant_of(queue.name) + ":" + queues.parse(queue.name)[1])
        worker.reorder_queues(queue)
    return taken


def test_the_worker_alternates_tenants_and_takes_each_ones_priorities_in_order(worker, redis):
    for tenant, priority, count in (
        ("acme", "bulk", 6),
        ("acme", "high", 1),
        ("beta", "normal", 2),
        ("default", "bulk", 1),
    ):
        pipe = redis.pipeline()
        queues.register(pipe, tenant)
        pipe.execute()
        for _ in range(count):
            Queue(queues.queue_name(tenant, priority), connection=redis).enqueue(
                "jobs.fairshare.wake_up"
            )
    assert worker.tenant_queues.learn() is True
    assert worker.tenant_queues.learn() is False, "nothing new the second time"
    worker.reorder_queues(None)
    assert _drain_order(worker, redis) == [
        "acme:high",
        "beta:normal",
        "default:bulk",
        "acme:bulk",
        "beta:normal",
        "acme:bulk",
        "acme:bulk",
        "acme:bulk",
        "acme:bulk",
        "acme:bulk",
    ]


def test_a_tenant_registered_later_joins_the_rotation(worker, redis):
    worker.reorder_queues(None)
    assert worker.queue_names() == list(QUEUE_NAMES)
    queues.register(redis, "zeta")
    worker.tenant_queues.tick()  # the maintenance thread's second
    assert worker.queue_names() == [*QUEUE_NAMES, *queues.tenant_queue_names("zeta")]
    assert [q.name for q in worker._ordered_queues] == [
        *QUEUE_NAMES,
        *queues.tenant_queue_names("zeta"),
    ]
    worker.reorder_queues(Queue("intake", connection=redis))
    assert [q.name for q in worker._ordered_queues][0] == "intake-high.zeta"
    queues.register(redis, "beta")  # learned right after a dequeue too, before the next one
    worker.reorder_queues(Queue("intake.zeta", connection=redis))
    assert [q.name for q in worker._ordered_queues][:3] == queues.tenant_queue_names("beta")
    worker.reorder_queues(Queue("intake-bulk.beta", connection=redis))
    assert [q.name for q in worker._ordered_queues][:3] == queues.tenant_queue_names("default")


def test_the_learned_queues_retries_are_brought_back_by_the_workers_thread(worker, redis):
    """A retry with a backoff waits in its queue's ScheduledJobRegistry; the worker's tick
    takes the queue's scheduler lock and moves it back once due."""
    worker.tenant_queues.scheduling = True
    queues.register(redis, "acme")
    queue = Queue("intake.acme", connection=redis)
    job = queue.enqueue_in(timedelta(seconds=1), "jobs.fairshare.wake_up")
    assert job.id in ScheduledJobRegistry(queue=queue).get_job_ids()
    worker.tenant_queues.tick()
    assert redis.exists(RQScheduler.get_locking_key("intake.acme"))
    deadline = time.monotonic() + 5
    while job.id not in queue.get_job_ids() and time.monotonic() < deadline:
        time.sleep(0.2)
        worker.tenant_queues.tick()
    assert job.id in queue.get_job_ids(), "the due retry is back in its queue"
    worker.tenant_queues.stop()
    assert not redis.exists(RQScheduler.get_locking_key("intake.acme")), "lock released"


def test_crash_recovery_cleans_every_tenants_started_registry(redis, monkeypatch):
    """The lost-machine path (jobs.worker.maintenance): RQ's StartedJobRegistry cleanup runs for the
    tenants' queues too, whichever worker takes the lock, listening to them or not."""
    from jobs.core.settings import Settings
    from jobs.worker import maintenance

    cleaned = []

    class Recording:
        def __init__(self, name, connection):
            self.name = name

        def cleanup(self):
            cleaned.append(self.name)

    monkeypatch.setattr(maintenance, "StartedJobRegistry", Recording)
    queues.register(redis, "acme")
    assert maintenance.run_if_due(redis, Settings()) is True
    assert cleaned == [*QUEUE_NAMES, *queues.tenant_queue_names("acme")]
