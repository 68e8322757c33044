"""Run the real job on a few tiny documents, in memory, before a worker forks its first
work-horse.

RQ forks a work-horse per job from the worker process. What a first run of the pipeline does
once (lazy imports, compiled regular expressions, first-call set-up in numpy, json and the
other libraries the job uses), a fork of a parent that never ran it does again for every job;
done once in the parent, every fork inherits it. Measured with the pipeline benchmark:
pipeline_overhead_ratio 1.43 → 1.34, means of six runs each (docs/benchmarks.md).

The documents go through `submit_documents` and `ingest_document` on an in-memory fakeredis
with the local embedder, so a worker's start never calls a configured embedding service, and
nothing is logged. A warm-up that fails is reported and otherwise ignored: the worker starts
either way.
"""
from __future__ import annotations

import logging
import os
import signal
from typing import Any

WARM_UP_DOCUMENTS = 3
_TEXT = b"A few words to warm the pipeline up. They are parsed, chunked, embedded and indexed.\n"


def warm_up() -> int:
    """Ingest WARM_UP_DOCUMENTS tiny documents in this process; the number that succeeded."""
    import fakeredis
    from rq import Queue, SimpleWorker

    from jobs import logs
    from jobs.settings import QUEUE_NAMES, Settings
    from jobs.submit import Upload, submit_documents

    connection = fakeredis.FakeRedis()
    queues = {name: Queue(name, connection=connection) for name in QUEUE_NAMES}
    uploads = [Upload.from_bytes(f"warm-up-{n}.txt", f"warm-up-{n}.txt", _TEXT * (n + 1), "txt")
               for n in range(WARM_UP_DOCUMENTS)]
    with _local_embedder(), _quiet(), logs.held():
        batch = submit_documents(connection, queues, Settings.from_env(), "warm-up", uploads,
                                 pipeline_version="warm-up")
        SimpleWorker(list(queues.values()), connection=connection).work(burst=True)
    statuses = [connection.hget(f"intake:task:{t['id']}", "status") for t in batch["tasks"]]
    return statuses.count(b"succeeded")


def warm_up_or_warn(log: logging.Logger) -> None:
    """`warm_up`, never failing the caller: a worker without it is only slower."""
    try:
        done = warm_up()
    except Exception:
        log.warning("pipeline warm-up failed; jobs will start cold", exc_info=True)
        return
    if done != WARM_UP_DOCUMENTS:
        log.warning("pipeline warm-up: %d of %d documents succeeded", done, WARM_UP_DOCUMENTS)


class _local_embedder:
    """Without INTAKE_EMBEDDING_URL for the block: the job reads its settings from the
    environment, and a warm-up must not call a remote service."""

    def __enter__(self) -> None:
        self.saved = os.environ.pop("INTAKE_EMBEDDING_URL", None)

    def __exit__(self, *exc: Any) -> None:
        if self.saved is not None:
            os.environ["INTAKE_EMBEDDING_URL"] = self.saved


class _quiet:
    """RQ's own worker lines at WARNING, and the signal handlers a SimpleWorker installs put
    back, so that the real worker's start is what the log and a SIGTERM see."""

    def __enter__(self) -> None:
        self.logger = logging.getLogger("rq.worker")
        self.level = self.logger.level
        self.logger.setLevel(logging.WARNING)
        self.handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def __exit__(self, *exc: Any) -> None:
        self.logger.setLevel(self.level)
        for signum, handler in self.handlers.items():
            signal.signal(signum, handler)
