"""A scan read in page ranges by every free worker at once, and still one task
(docs/architecture.md, "Scans in page ranges").

Why: OCR reads a page in one to four seconds on one core; a 200-page scan read by one worker
from its first page to its last keeps a fleet's other workers idle for a quarter of an hour. So
a PDF with at least SPLIT_AT pages to read by OCR is read in two stages. The task's own job
reads the text layers and names the pages left (jobs.text.parsers: `ocr_split_at`), cuts them
into ranges of RANGE_PAGES (jobs.worker.page_ranges) and enqueues range jobs
(`read_page_range`) on its tenant's bulk queue, one per other worker, so that the ranges go
through the same fair share as any job and after everything of a higher priority: the extra
readers take only workers nothing else wants. Then it reads ranges itself, like them, until none
is left to claim, waits for the last ones (the only time it holds a worker without reading),
puts the pages together as one reading would have and goes on to chunk, embed and index: the
document is indexed once, by the task's job, under its attempt's fence.

A range job reads one range and ends, enqueuing its successor at the back of the bulk queue
while ranges are left: a scan never holds more workers than it had range jobs, and what was
queued after it (small files behind a big scan, at any priority) gets a worker between two of
its ranges. The task's own job reads on at its own priority, so a scan always moves.

Why RANGE_PAGES = 4 and SPLIT_AT = 8: each range is a fork of the reader and a PDF opened
again, and its first page costs a third of a page more than the next (the OCR engine's first
run in a process, docs/benchmarks.md); four pages keep that under a tenth of a range, while
the task's job waits at most one range (4–16 s) for the last reader. Below eight pages (two
ranges) a scan is read by its own job alone, in one go, as before: a second worker would save
seconds at most.

A range that fails for good (its page breaks OCR's deadline or memory bound, or its reader is
lost MAX_TRIES times) fails the task with its page numbers; one whose reader is lost is read
again once its claim lapses. A cancel stops every range (their readers are stopped like the
task's job, jobs.tasks.lifecycle); a retry of the task reads only the ranges not read yet.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from redis import Redis
from rq import Queue, Worker, get_current_job

from jobs.core import keys, queues
from jobs.core.failures import CancelRequested, PermanentError
from jobs.core.settings import MIB, Settings
from jobs.tasks import originals
from jobs.tasks import record as task_record
from jobs.tasks.attempts import Superseded
from jobs.tasks.record import TaskRecord
from jobs.text import ocr, parse_reply
from jobs.text.parsers import ParsedDocument, ParseOptions, with_pages_read
from jobs.text.sandbox import parse_bounded
from jobs.worker import parts
from jobs.worker.page_ranges import MAX_TRIES, Claimed, Failed, Finished, PageRanges, cut

log = logging.getLogger(__name__)

RANGE_PAGES = 4
SPLIT_AT = 2 * RANGE_PAGES
READ_FUNCTION = "jobs.pipeline.read_page_range"
#: What a range job may spend of INTAKE_JOB_TIMEOUT reading its range (the rest: its writes).
RANGE_SHARE_OF_JOB = 0.8
#: How long a range job's record is kept once it has ended (RQ's result_ttl, failure_ttl).
RANGE_JOB_TTL_SECONDS = 600
# What a range job reads of its task to find the original.
_ORIGINAL = (
    task_record.TENANT,
    task_record.DOCUMENT_ID,
    task_record.SIZE,
    task_record.ORIGINAL_OF,
)


def options(
    settings: Settings,
    progress: Callable[[str], None] | None = None,
    *,
    split_at: int = 0,
    only: tuple[int, ...] = (),
) -> ParseOptions:
    """How a document is read under `settings` (with OCR's page ranges: `split_at`, `only`)."""
    return ParseOptions(
        ocr=settings.ocr,
        ocr_languages=settings.ocr_language_list,
        ocr_max_pages=settings.ocr_max_pages,
        ocr_page_seconds=settings.ocr_page_timeout,
        progress=progress,
        ocr_split_at=split_at,
        ocr_only=only,
    )


def read_in_ranges(
    job: Any,
    task_id: str,
    data: bytes,
    plan: ParsedDocument,
    settings: Settings,
    *,
    tell: Callable[[str], None],
    check: Callable[[], None],
    deadline: float,
) -> ParsedDocument:
    """The whole reading of the scan whose text layers `plan` holds, its pending pages read in
    ranges by this job and the range jobs it enqueues. `tell("OCR page 57 of 120")` as pages
    start, over all ranges; `check()` raises when the attempt no longer owns its task;
    `deadline` (time.monotonic()): when the reading must be over. Raises PermanentError for a
    range that fails for good (with its pages) or a reading past its deadline."""
    connection: Redis = job.connection
    total = len(plan.ocr_pending)
    ranges = PageRanges(connection, task_id, job.id, job.id, ttl_seconds=settings.retention_seconds)
    planned = ranges_of(plan.ocr_pending)
    ranges.plan(planned)
    helpers = min(Worker.count(connection=connection) - 1, len(planned) - 1)
    enqueue_readers(connection, job.origin, task_id, job.id, settings, helpers)

    def told(read: int) -> None:
        tell(f"OCR page {min(read + 1, total)} of {total}")

    while True:
        outcome = ranges.claim()
        if isinstance(outcome, Claimed):
            told(outcome.read)
            read_range(
                ranges,
                outcome.index,
                planned[outcome.index],
                data,
                settings,
                on_page=told,
                budget=deadline - time.monotonic(),
            )
        elif isinstance(outcome, Failed):
            raise range_failure(outcome, planned[outcome.index], settings)
        elif isinstance(outcome, Finished):
            break
        else:
            told(outcome.read)
            left = deadline - time.monotonic()
            if left <= 0:
                raise PermanentError(
                    f"Reading this scan by OCR needs more than the {settings.job_timeout:g} s "
                    f"one attempt may spend on it (INTAKE_JOB_TIMEOUT), with every worker "
                    "reading a part of it. Split it into smaller files, or raise "
                    "INTAKE_JOB_TIMEOUT.",
                    code="parse_timeout",
                )
            ranges.wait(min(1.0, left))
            check()
    return _whole(data, plan, ranges.replies(), settings)


def ranges_of(pages: list[int]) -> list[list[int]]:
    """`pages` in ranges of RANGE_PAGES, the last one cut in two: the readers then finish
    closer together (one waits at most half a range for the other, not a whole one)."""
    ranges = cut(pages, RANGE_PAGES)
    if len(ranges) >= 2 and len(ranges[-1]) > 1:
        last = ranges.pop()
        ranges += cut(last, (len(last) + 1) // 2)
    return ranges


def read_page_range(task_id: str, run: str) -> dict[str, Any]:
    """RQ entry point of a range job: read one range of the scan of `run` (the task's job),
    then enqueue the next range job while ranges are left. Never fails as a job: a range that
    fails for good fails the task (its job reads the failure), any other failure lets the
    range go for another reader."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("read_page_range must run inside an RQ job")
    connection: Redis = job.connection
    settings = parts.current().settings
    ranges = PageRanges(connection, task_id, run, job.id, ttl_seconds=settings.retention_seconds)
    try:
        outcome = ranges.claim()
    except (CancelRequested, Superseded) as exc:
        return {"stopped": str(exc) or "canceled"}
    if not isinstance(outcome, Claimed):
        return {"nothing_to_read": type(outcome).__name__}
    pages = ranges.ranges()[outcome.index]
    try:
        task = TaskRecord.from_row(_ORIGINAL, connection.hmget(keys.task(task_id), *_ORIGINAL))
        data = originals.load(
            connection,
            settings,
            task.tenant,
            task.document_id,
            task_id,
            task.size,
            task.original_of,
        )
        left = read_range(
            ranges,
            outcome.index,
            pages,
            data,
            settings,
            on_page=lambda _: None,
            budget=(job.timeout or settings.job_timeout) * RANGE_SHARE_OF_JOB,
        )
    except (CancelRequested, Superseded) as exc:
        return {"stopped": str(exc) or "canceled", "range": outcome.index}
    except PermanentError as exc:  # the task's job reports it (or reads the range itself)
        return {"failed": exc.code, "range": outcome.index}
    except Exception:
        log.exception("range %s of task %s: let go for another reader", outcome.index, task_id)
        with contextlib.suppress(Exception):
            ranges.release(outcome.index)
        return {"released": outcome.index}
    if left:
        enqueue_readers(connection, job.origin, task_id, run, settings, 1)
    return {"read": outcome.index, "pages": len(pages)}


def read_range(
    ranges: PageRanges,
    index: int,
    pages: list[int],
    data: bytes,
    settings: Settings,
    *,
    on_page: Callable[[int], None],
    budget: float,
) -> int:
    """Read range `index` (its `pages`) under this reader's claim and keep its reply; returns
    how many ranges are still unclaimed. `on_page(read)`: a page starts, `read` pages of the scan
    read so far. A PermanentError of the reading fails the range for good (with its pages)."""
    read = [0]  # pages of the range read so far

    def page(detail: str) -> None:
        number, _ = ocr.page_numbers(detail) or (1, 0)
        read[0] = number - 1
        on_page(ranges.page_started(index, read[0]))

    try:
        parsed = parse_bounded(
            data,
            "pdf",
            options=options(settings, page, only=tuple(pages)),
            seconds=settings.parse_timeout,
            memory_bytes=settings.parse_memory_mb * MIB,
            max_chars=settings.parse_max_chars,
            budget_seconds=budget,
            heartbeat=lambda: ranges.page_started(index, read[0]),
        )
    except PermanentError as exc:
        failure = range_failure(Failed(index, exc.code, exc.message), pages, settings)
        ranges.release(index, (failure.code, failure.message))
        raise failure from None
    except BaseException:
        with contextlib.suppress(Exception):
            ranges.release(index)
        raise
    return ranges.save(index, len(pages), parse_reply.encode(parsed, settings.parse_max_chars))


def enqueue_readers(
    connection: Redis, origin: str, task_id: str, run: str, settings: Settings, count: int
) -> None:
    """Enqueue `count` range jobs for the scan of `run` at the back of the bulk queue of the
    tenant whose queue `origin` is (the task's job's, or a range job's)."""
    if count <= 0:
        return
    parsed = queues.parse(origin)
    name = queues.queue_name(parsed[0], "bulk") if parsed is not None else origin
    queue = Queue(name, connection=connection)
    queue.enqueue_many(
        [
            Queue.prepare_data(
                READ_FUNCTION,
                args=(task_id, run),
                timeout=settings.job_timeout,
                result_ttl=RANGE_JOB_TTL_SECONDS,
                failure_ttl=RANGE_JOB_TTL_SECONDS,
                ttl=settings.retention_seconds,
            )
            for _ in range(count)
        ]
    )


def range_failure(failed: Failed, pages: list[int], settings: Settings) -> PermanentError:
    """What fails the task when one of its ranges failed for good, naming its pages. A range
    that lost MAX_TRIES readers may have lost them to restarts rather than to its pages: a
    Retry by hand is offered, as for a task whose worker was lost."""
    named = pages_text(pages)
    if failed.message is None:
        return PermanentError(
            f"OCR could not read {named}: the worker reading {'it' if len(pages) == 1 else 'them'}"
            f" was lost {MAX_TRIES} times (killed, restarted or out of memory); the scan may be "
            "damaged or too detailed. Retry to read it again.",
            code="worker_lost",
            retryable=True,
        )
    if failed.message.startswith(("Page ", "Pages ")):
        return PermanentError(failed.message, code=failed.code)
    return PermanentError(f"{named[0].upper()}{named[1:]}: {failed.message}", code=failed.code)


def pages_text(pages: list[int]) -> str:
    """ "page 3", "pages 9–12" (consecutive), "pages 2, 3, 5 and 8" (pages between them had a
    text layer and were not in the range)."""
    if len(pages) == 1:
        return f"page {pages[0]}"
    if pages == list(range(pages[0], pages[-1] + 1)):
        return f"pages {pages[0]}–{pages[-1]}"
    return f"pages {', '.join(map(str, pages[:-1]))} and {pages[-1]}"


def _whole(
    data: bytes, plan: ParsedDocument, replies: list[bytes | None], settings: Settings
) -> ParsedDocument:
    """The scan as one reading: its text layers and every range's pages."""
    read: dict[int, str] = {}
    for reply in replies:
        if reply is None:  # deleted under the reading (the task is gone): start again
            raise Superseded("a range's reply is gone")
        for block in parse_reply.decode(reply, settings.parse_max_chars).blocks:
            read[int(block.location["page"])] = block.text
    whole = with_pages_read(data, plan, read, options(settings))
    if whole.characters > settings.parse_max_chars:
        raise parse_reply.too_long(whole.characters, settings.parse_max_chars)
    return whole
