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

from jobs.core import keys
from jobs.core.failures import CancelRequested
from jobs.tasks import record as task_record
from jobs.tasks import states
from jobs.text.sandbox import HEARTBEAT_SECONDS
from jobs.worker.attempts import Superseded

#: How long a claim lasts unless renewed: four of the reader's heartbeats (a reader alive
#: renews it in time even on a loaded machine), and how soon a lost reader's range is read again.
CLAIM_SECONDS = 4 * HEARTBEAT_SECONDS
#: Readers a range may lose (workers lost, horses killed) before it fails the task.
MAX_TRIES = 3

# The judgement of the task every script starts with. KEYS[1]: task. ARGV[1..6]: task id, run
# (job id), the fields of the status and the run's job, and the statuses allowed (two).
_JUDGE = """
local r = redis.call('HMGET', KEYS[1], ARGV[3], ARGV[4])
local run = r[2]
if not run or run == '' then run = ARGV[1] end
if not r[1] then return {'gone', ''} end
if run ~= ARGV[2] then return {'gone', r[1]} end
if r[1] ~= ARGV[5] and r[1] ~= ARGV[6] then return {'gone', r[1]} end
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1e6
local count = 0
local plan = redis.call('HGET', KEYS[2], 'plan')
if plan then count = #cjson.decode(plan) end
local function sum_read()
  local total = 0
  for i = 0, count - 1 do total = total + tonumber(redis.call('HGET', KEYS[2], 'read:' .. i) or '0') end
  return total
end
"""  # noqa: E501  (Lua)

# KEYS: task, ranges, readers. ARGV[7..10]: reader, claim seconds, most tries, ttl.
# Returns {'claimed', i, read} | {'wait', read} | {'done', read} | {'failed', i} | {'gone', status}.
_CLAIM = (
    _JUDGE
    + """
if count == 0 then return {'gone', r[1]} end
local chosen, open = -1, 0
for i = 0, count - 1 do
  if redis.call('HEXISTS', KEYS[2], 'failed:' .. i) == 1 then return {'failed', tostring(i)} end
  if redis.call('HEXISTS', KEYS[2], 'text:' .. i) == 0 then
    open = open + 1
    local claim = redis.call('HGET', KEYS[2], 'claim:' .. i)
    local lapsed = (not claim) or tonumber(string.match(claim, '|(.*)$')) < now
    if lapsed and chosen < 0 then
      chosen = i
      if claim then redis.call('HDEL', KEYS[3], string.match(claim, '^(.*)|')) end
    end
  end
end
if chosen < 0 then
  if open == 0 then return {'done', tostring(sum_read())} end
  return {'wait', tostring(sum_read())}
end
local tries = redis.call('HINCRBY', KEYS[2], 'tries:' .. chosen, 1)
if tries > tonumber(ARGV[9]) then
  redis.call('HSET', KEYS[2], 'failed:' .. chosen, cjson.encode({code = 'reader_lost', tries = tries - 1}))
  return {'failed', tostring(chosen)}
end
redis.call('HSET', KEYS[2], 'claim:' .. chosen, string.format('%s|%s', ARGV[7], now + tonumber(ARGV[8])), 'read:' .. chosen, 0)
redis.call('HSET', KEYS[3], ARGV[7], chosen)
redis.call('EXPIRE', KEYS[2], ARGV[10])
redis.call('EXPIRE', KEYS[3], ARGV[10])
return {'claimed', tostring(chosen), tostring(sum_read())}
"""  # noqa: E501  (Lua)
)

# KEYS: task, ranges. ARGV[7..10]: reader, range, pages read, claim seconds.
# Returns {'ok', read} | {'lost', ''} (another reader holds the range now) | {'gone', status}.
_PAGE = (
    _JUDGE
    + """
local claim = redis.call('HGET', KEYS[2], 'claim:' .. ARGV[8])
if not claim or string.match(claim, '^(.*)|') ~= ARGV[7] then return {'lost', ''} end
redis.call('HSET', KEYS[2], 'claim:' .. ARGV[8], string.format('%s|%s', ARGV[7], now + tonumber(ARGV[10])), 'read:' .. ARGV[8], ARGV[9])
return {'ok', tostring(sum_read())}
"""  # noqa: E501  (Lua)
)

# KEYS: task, ranges, readers, done. ARGV[7..11]: reader, range, pages in it, reply, ttl.
# Returns {'saved', ranges unclaimed} | {'gone', status}. A range another reader saved first
# stays as it is.
_SAVE = (
    _JUDGE
    + """
if redis.call('HEXISTS', KEYS[2], 'text:' .. ARGV[8]) == 0 then
  redis.call('HSET', KEYS[2], 'text:' .. ARGV[8], ARGV[10], 'read:' .. ARGV[8], ARGV[9])
end
local claim = redis.call('HGET', KEYS[2], 'claim:' .. ARGV[8])
if claim and string.match(claim, '^(.*)|') == ARGV[7] then redis.call('HDEL', KEYS[2], 'claim:' .. ARGV[8]) end
redis.call('HDEL', KEYS[3], ARGV[7])
redis.call('RPUSH', KEYS[4], ARGV[8])
redis.call('EXPIRE', KEYS[4], ARGV[11])
local unclaimed = 0
for i = 0, count - 1 do
  if redis.call('HEXISTS', KEYS[2], 'text:' .. i) == 0 then
    local claim = redis.call('HGET', KEYS[2], 'claim:' .. i)
    if (not claim) or tonumber(string.match(claim, '|(.*)$')) < now then unclaimed = unclaimed + 1 end
  end
end
return {'saved', tostring(unclaimed)}
"""  # noqa: E501  (Lua)
)

# KEYS: ranges, readers, done. ARGV: reader, range, failure (JSON, '' to only let the range go).
_RELEASE = """
local claim = redis.call('HGET', KEYS[1], 'claim:' .. ARGV[2])
if claim and string.match(claim, '^(.*)|') == ARGV[1] then redis.call('HDEL', KEYS[1], 'claim:' .. ARGV[2]) end
if ARGV[3] ~= '' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'failed:' .. ARGV[2], ARGV[3])
  redis.call('RPUSH', KEYS[3], ARGV[2])
end
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""  # noqa: E501  (Lua)


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
            [self.key, self.readers_key],
            self.reader,
            self.claim_seconds,
            MAX_TRIES,
            self.ttl_seconds,
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
            [self.key],
            self.reader,
            index,
            read_in_range,
            self.claim_seconds,
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
            [self.key, self.readers_key, self.done_key],
            self.reader,
            index,
            pages,
            reply,
            self.ttl_seconds,
            allowed=(states.RUNNING, states.RETRYING),
        )
        return int(saved[1])

    def release(self, index: int, failure: tuple[str, str] | None = None) -> None:
        """Let range `index` go: for another reader to claim, or failed for good with
        `failure` (code, message), which ends the reading of every range."""
        raw = json.dumps({"code": failure[0], "message": failure[1]}) if failure else ""
        self.connection.eval(
            _RELEASE, 3, self.key, self.readers_key, self.done_key, self.reader, index, raw
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
        self, script: str, script_keys: list[str], *args: Any, allowed: tuple[str, str]
    ) -> list[str]:
        reply = self.connection.eval(
            script,
            1 + len(script_keys),
            keys.task(self.task_id),
            *script_keys,
            self.task_id,
            self.run,
            task_record.STATUS,
            task_record.JOB_ID,
            *allowed,
            *args,
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
