"""A scan's page ranges in Redis: who reads which range, what each has read, and when all are.

Why claims and not one job per range: the readers of a scan are its task's own job and the
range jobs it and they enqueue (jobs.worker.scan_reading), and any of them may be lost with its
worker. So a range is not given to a job: a reader claims the next range nobody holds, for
CLAIM_SECONDS, and renews the claim as each page starts and every few seconds while a page is
read (jobs.text.sandbox's heartbeat); a range whose reader was lost is claimed again once its
claim has lapsed, by whichever reader asks next, and a range that loses MAX_TRIES readers fails the
task (a page that kills its reader each time would otherwise be read for ever). A range read is kept
(its reply, as jobs.text.parse_reply encodes it) until the task ends, so a retry of the task reads
only the ranges not read yet.

Every claim, page and save is judged against the task in the same script: ranges are read
only for the task's current run while it runs (a cancel, a Retry's new run or a delete stops
them at their next page), and a reply is kept while the run may still use it (`running`, or
`retrying` to its next attempt).

One hash per task (keys.page_ranges): `plan` (the ranges, as JSON), `run` (the run whose
readers claim them now), and per range i
`claim:i` ("reader|expires", Redis time), `tries:i`, `read:i` (pages read so far), `text:i`
(the reply) or `failed:i` (JSON code and message). Readers at work are listed, job id → range,
in keys.page_range_readers (what a cancel stops); each save pushes to keys.page_ranges_done,
which a reader waiting for the last ranges blocks on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from redis import Redis
from redis.client import Pipeline

from jobs.core import keys, scripts
from jobs.core.failures import CancelRequested
from jobs.tasks import record as task_record
from jobs.tasks import states
from jobs.tasks.attempts import Superseded
from jobs.text.sandbox import HEARTBEAT_SECONDS

#: How long a claim lasts unless renewed: four of the reader's heartbeats (a reader alive
#: renews it in time even on a loaded machine), and how soon a lost reader's range is read again.
CLAIM_SECONDS = 4 * HEARTBEAT_SECONDS
#: Readers a range may lose (workers lost, horses killed) before it fails the task.
MAX_TRIES = 3

# Each script but the release starts with the judgement of the task (page_ranges_judge.lua).
_CLAIM = scripts.load(__file__, "page_ranges_claim", task_record.SCRIPT_NAMES)
_PAGE = scripts.load(__file__, "page_ranges_page", task_record.SCRIPT_NAMES)
_SAVE = scripts.load(__file__, "page_ranges_save", task_record.SCRIPT_NAMES)
_RELEASE = scripts.load(__file__, "page_ranges_release")


@dataclass(frozen=True)
class Claimed:
    """This reader holds range `index`; `read`: pages of the scan read so far, all ranges."""

    index: int
    read: int


@dataclass(frozen=True)
class Waiting:
    """No range is left to claim, but some are still being read."""

    read: int


@dataclass(frozen=True)
class Finished:
    """Every range is read."""

    read: int


@dataclass(frozen=True)
class Failed:
    """Range `index` failed for good: `code` and `message` (None: it lost MAX_TRIES readers)."""

    index: int
    code: str
    message: str | None


Outcome = Claimed | Waiting | Finished | Failed


def cut(pages: list[int], size: int) -> list[list[int]]:
    """`pages` in ranges of `size` pages (the last may be shorter)."""
    return [pages[start : start + size] for start in range(0, len(pages), size)]


class PageRanges:
    """One task's page ranges, as seen by one reader (`reader`: its RQ job id) of one run."""

    def __init__(
        self, connection: Redis, task_id: str, run: str, reader: str, *, ttl_seconds: int
    ) -> None:
        self.connection = connection
        self.task_id, self.run, self.reader = task_id, run, reader
        self.key = keys.page_ranges(task_id)
        self.readers_key = keys.page_range_readers(task_id)
        self.done_key = keys.page_ranges_done(task_id)
        self.claim_seconds = CLAIM_SECONDS
        self.ttl_seconds = ttl_seconds

    def plan(self, ranges: list[list[int]]) -> None:
        """Read the scan in `ranges`: the ranges read earlier for the same plan are kept (a
        retry reads only the others). Another attempt of the same run keeps its readers'
        claims too (they are still reading for it); a new run (a Retry by hand after a cancel
        or a failure) keeps only the pages read, its readers' tries and failures start anew.
        Any other plan's work is dropped."""
        planned = json.dumps(ranges)
        stored = dict(zip(("plan", "run"), self.connection.hmget(self.key, "plan", "run")))
        pipe = self.connection.pipeline()
        if stored["plan"] != planned.encode():
            pipe.delete(self.key, self.readers_key, self.done_key)
        elif stored["run"] != self.run.encode():
            fields = self.connection.hkeys(self.key)
            read = {f[len(b"text:") :] for f in fields if f.startswith(b"text:")}
            stale = [
                f
                for f in fields
                if f.startswith((b"claim:", b"tries:", b"failed:"))
                or (f.startswith(b"read:") and f[len(b"read:") :] not in read)
            ]
            if stale:
                pipe.hdel(self.key, *stale)
            pipe.delete(self.readers_key, self.done_key)
        pipe.hset(self.key, mapping={"plan": planned, "run": self.run})
        pipe.expire(self.key, self.ttl_seconds)
        pipe.execute()

    def ranges(self) -> list[list[int]]:
        raw = self.connection.hget(self.key, "plan")
        return json.loads(raw) if raw else []

    def claim(self) -> Outcome:
        """The next range for this reader to read, or why there is none. Raises
        CancelRequested (the task was canceled) or Superseded (not this run's, or over)."""
        reply = self._run(
            _CLAIM,
            {"ranges": self.key, "readers": self.readers_key},
            {
                "reader": self.reader,
                "claim_seconds": self.claim_seconds,
                "most_tries": MAX_TRIES,
                "ttl": self.ttl_seconds,
            },
            allowed=(states.RUNNING, states.RUNNING),
        )
        if reply[0] == "claimed":
            return Claimed(int(reply[1]), int(reply[2]))
        if reply[0] == "wait":
            return Waiting(int(reply[1]))
        if reply[0] == "done":
            return Finished(int(reply[1]))
        return self._failed(int(reply[1]))

    def page_started(self, index: int, read_in_range: int) -> int:
        """Renew this reader's claim (as a page starts, or while it is read), `read_in_range`
        pages of it read; returns the pages of the scan read so far. Raises CancelRequested or
        Superseded (also when another reader holds the range: this one's claim lapsed)."""
        reply = self._run(
            _PAGE,
            {"ranges": self.key},
            {
                "reader": self.reader,
                "range": index,
                "pages_read": read_in_range,
                "claim_seconds": self.claim_seconds,
            },
            allowed=(states.RUNNING, states.RETRYING),
        )
        if reply[0] == "lost":
            raise Superseded(f"another reader holds pages range {index}")
        return int(reply[1])

    def save(self, index: int, pages: int, reply: bytes) -> int:
        """Keep range `index`'s reply (all of its `pages` read); returns how many ranges are
        left for a reader to claim. Raises as `page_started`."""
        saved = self._run(
            _SAVE,
            {"ranges": self.key, "readers": self.readers_key, "done": self.done_key},
            {
                "reader": self.reader,
                "range": index,
                "pages": pages,
                "reply": reply,
                "ttl": self.ttl_seconds,
            },
            allowed=(states.RUNNING, states.RETRYING),
        )
        return int(saved[1])

    def release(self, index: int, failure: tuple[str, str] | None = None) -> None:
        """Let range `index` go: for another reader to claim, or failed for good with
        `failure` (code, message), which ends the reading of every range."""
        raw = json.dumps({"code": failure[0], "message": failure[1]}) if failure else ""
        _RELEASE(
            self.connection,
            keys={"ranges": self.key, "readers": self.readers_key, "done": self.done_key},
            args={"reader": self.reader, "range": index, "failure": raw},
        )

    def wait(self, seconds: float) -> None:
        """Until a range is saved (or fails), at most `seconds`."""
        self.connection.blpop([self.done_key], timeout=max(seconds, 0.01))

    def replies(self) -> list[bytes | None]:
        """Every range's reply, in order (once `claim` says Finished); None: deleted since."""
        count = len(self.ranges())
        return self.connection.hmget(self.key, [f"text:{i}" for i in range(count)])

    def _failed(self, index: int) -> Failed:
        raw = self.connection.hget(self.key, f"failed:{index}")
        failure = json.loads(raw) if raw else {"code": "reader_lost"}
        return Failed(index, str(failure.get("code")), failure.get("message"))

    def _run(
        self,
        script: scripts.Script,
        named_keys: dict[str, str],
        args: dict[str, Any],
        *,
        allowed: tuple[str, str],
    ) -> list[str]:
        reply = script(
            self.connection,
            keys={"task": keys.task(self.task_id), **named_keys},
            args={
                "task_id": self.task_id,
                "run_job": self.run,
                "allowed_first": allowed[0],
                "allowed_second": allowed[1],
                **args,
            },
        )
        words = [v.decode() if isinstance(v, bytes) else str(v) for v in reply]
        if words[0] == "gone":
            if words[1] == states.CANCELED:
                raise CancelRequested()
            raise Superseded(f"the task is {words[1] or 'gone'}")
        return words


def delete(pipe: Pipeline, task_id: str) -> None:
    """Queue the removal of a task's ranges (its reading is over, or starts again)."""
    pipe.delete(
        keys.page_ranges(task_id), keys.page_range_readers(task_id), keys.page_ranges_done(task_id)
    )
