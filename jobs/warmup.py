"""Run the real job on a few tiny documents, in memory, before a worker forks its first
work-horse.

RQ forks a work-horse per job from the worker process. What a first run of the pipeline does
once (lazy imports, compiled regular expressions, first-call set-up in numpy, json and the
other libraries the job uses), a fork of a parent that never ran it does again for every job;
done once in the parent, every fork inherits it (docs/benchmarks.md has what it saves).

The documents go through `submit_documents` and `ingest_document` on an in-memory fakeredis,
with parts of their own (jobs.parts.using: this worker's settings, the local embedder), so a
worker's start never calls a configured embedding service, and nothing is logged (not even
that this fakeredis refuses ROLE: jobs.replicas.quiet). A warm-up
that fails is reported and otherwise ignored: the worker starts either way.
"""
from __future__ import annotations

import logging
import signal
from dataclasses import replace
from typing import Any

WARM_UP_DOCUMENTS = 3
_TEXT = b"A few words to warm the pipeline up. They are parsed, chunked, embedded and indexed.\n"


def warm_up() -> int:
    """Ingest WARM_UP_DOCUMENTS tiny documents in this process; the number that succeeded."""
    import fakeredis
    from rq import Queue, SimpleWorker

    from jobs import keys, logs, parts, queues, replicas, states
    from jobs.embedding import LocalEmbedder
    from jobs.submit import Upload, submit_documents

    connection = fakeredis.FakeRedis()
    uploads = [Upload.from_bytes(f"warm-up-{n}.txt", f"warm-up-{n}.txt", _TEXT * (n + 1), "txt")
               for n in range(WARM_UP_DOCUMENTS)]
    settings = replace(parts.current().settings, embedding_url="")
    local = parts.Parts(settings, LocalEmbedder())  # a worker's start never calls a service
    with parts.using(local), _quiet(), logs.held(), replicas.quiet():
        batch = submit_documents(connection, queues.Queues(connection), settings, "warm-up",
                                 uploads, pipeline_version="warm-up")
        SimpleWorker([Queue(name, connection=connection) for name in queues.all_names(connection)],
                     connection=connection).work(burst=True)
    found = [connection.hget(keys.task(t["id"]), "status") for t in batch["tasks"]]
    return found.count(states.SUCCEEDED.encode())


def warm_up_or_warn(log: logging.Logger) -> None:
    """`warm_up`, never failing the caller: a worker without it is only slower."""
    try:
        done = warm_up()
    except Exception:
        log.warning("pipeline warm-up failed; jobs will start cold", exc_info=True)
        return
    if done != WARM_UP_DOCUMENTS:
        log.warning("pipeline warm-up: %d of %d documents succeeded", done, WARM_UP_DOCUMENTS)


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
