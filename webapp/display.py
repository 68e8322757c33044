"""How the pages word and time the state the API returns: labels, durations, "no progress" hints.

Why here: the templates render the first state and static/progress.js keeps it fresh, so both
must say the same thing. The labels, the advice and the countdown's words ("Attempt 3 of 4 in
4 s", jobs.ATTEMPT_WORDS) reach the script in the page's data-words attribute (WORDS); the
script keeps only the shape of the few sentences it rebuilds as time passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from flask.sansio.app import App
from markupsafe import Markup, escape

from jobs import ATTEMPT_WORDS, attempt_words, match_pattern, parse_iso

# A status in words, as the counts, the filter and the announcements say it (docs/architecture.md
# §3).
STATUS_LABELS = {
    "pending": "Queued",
    "running": "Running",
    "retrying": "Retrying",
    "succeeded": "Succeeded",
    "failed": "Failed",
    "canceled": "Canceled",
}
BATCH_LABELS = {**STATUS_LABELS, "partial": "Finished (mixed)"}
# What to do about an error: it depends only on whether a Retry can help.
ADVICE = {
    True: "Retry may work once the cause is fixed (a service that was down or misconfigured).",
    False: "This file cannot be processed as it is: fix it and upload it again.",
}
# Everything above that the script needs, rendered once per page as JSON (data-words).
WORDS = {
    "labels": STATUS_LABELS,
    "batch": BATCH_LABELS,
    "advice": {"retry": ADVICE[True], "fix": ADVICE[False]},
    "attempt": ATTEMPT_WORDS,
}
# A running task whose last heartbeat is older than this gets a "no progress" hint.
STALLED_AFTER_SECONDS = 120


def duration(step: Mapping[str, Any]) -> str:
    """A step's duration in seconds ("1.25 s"), or "" while it runs."""
    start, end = parse_iso(step.get("started_at")), parse_iso(step.get("ended_at"))
    if start is None or end is None:
        return ""
    return f"{max(0.0, (end - start).total_seconds()):.2f} s"


def clock(value: str | None) -> str:
    """The time of day of an ISO time (UTC), for tables where the date adds nothing."""
    moment = parse_iso(value)
    return moment.strftime("%H:%M:%S") if moment else ""


def stalled(task: Mapping[str, Any], now: datetime | None = None) -> str:
    """ "No progress for N min" for a running task whose heartbeat is old, else ""."""
    updated = parse_iso(task.get("updated_at"))
    if task.get("status") != "running" or updated is None:
        return ""
    seconds = ((now or datetime.now(UTC)) - updated).total_seconds()
    if seconds < STALLED_AFTER_SECONDS:
        return ""
    return f"No progress for {int(seconds // 60)} min"


def words(task: Mapping[str, Any], now: datetime | None = None) -> str:
    """The task's status in words; a retry's wait counted down ("Attempt 2 of 4 in 3 s")."""
    due = parse_iso(task.get("next_attempt_at"))
    if task.get("status") != "retrying" or due is None:
        return str(task.get("status_text", ""))
    seconds = (due - (now or datetime.now(UTC))).total_seconds()
    return attempt_words(task["attempts"] + 1, task["max_attempts"], seconds)


def step_text(task: Mapping[str, Any]) -> str:
    """What the task is doing; where a failed one stopped (its status already says why); nothing
    for a canceled one."""
    status, error = task.get("status"), task.get("error") or {}
    if status == "failed":
        return f"Stopped in {str(error.get('step') or 'processing').capitalize()}"
    return "" if status == "canceled" else str(task.get("step_detail", ""))


def result_text(result: Mapping[str, Any] | None) -> str:
    """ "12 pages (3 read by OCR), 20,481 characters, 24 chunks." (static/progress.js says the
    same)."""
    if not result:
        return ""
    pages = _count(result.get("pages", 0), "page")
    if result.get("ocr_pages"):
        pages += f" ({result['ocr_pages']} read by OCR)"
    return (
        f"{pages}, {_count(result.get('characters', 0), 'character')}, "
        f"{_count(result.get('chunks', 0), 'chunk')}."
    )


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def location_text(location: Mapping[str, Any] | None) -> str:
    """Where a chunk is, as a person says it: "page 12", "pages 1–2" (it runs over a page break:
    `page_end`), "slide 3", "sheet Q3", a heading in quotes, or both ("page 4 · “Refunds”");
    "" when unknown. progress.js mirrors it."""
    location = location or {}
    parts = [_pages(location)] if "page" in location else []
    parts += [f"{name} {location[name]}" for name in ("slide", "sheet") if name in location]
    if location.get("heading"):
        parts.append(f"“{location['heading']}”")
    return " · ".join(parts)


def _pages(location: Mapping[str, Any]) -> str:
    """ "page 4", or "pages 4–5" for a chunk that ends on another page than it starts."""
    first, last = location["page"], location.get("page_end", location["page"])
    return f"page {first}" if last == first else f"pages {first}–{last}"


def highlight(text: str, query: str, width: int = 400) -> Markup:
    """`text` escaped, cut to about `width` characters around the first match, with the words of
    `query` that it contains in <mark>. Words match whole; runs of a spaceless script (and their
    character pairs, or their characters where the text holds none of the pairs, as the search
    itself splits them) match anywhere."""
    pattern = match_pattern(query, text)
    found = pattern.search(text) if pattern else None
    start = 0
    if len(text) > width:
        start = max(0, (found.start() if found else 0) - width // 4)
        if start:
            space = text.find(" ", start, start + 20)
            start = space + 1 if space != -1 else start
    end = min(len(text), start + width)
    excerpt = text[start:end]
    pieces, last = [], 0
    for match in pattern.finditer(excerpt) if pattern else ():
        pieces.append(escape(excerpt[last : match.start()]))
        pieces.append(Markup("<mark>%s</mark>") % match.group())
        last = match.end()
    pieces.append(escape(excerpt[last:]))
    marked = Markup("").join(pieces)
    return (
        (Markup("…") if start else Markup(""))
        + marked
        + (Markup("…") if end < len(text) else Markup(""))
    )


def eta_text(seconds: int | None) -> str:
    """ "about 3 min left" (the page script words it the same: static/progress.js etaText)."""
    if not seconds:
        return ""
    if seconds < 60:
        return "less than a minute left"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min left"
    return f"about {seconds / 3600:.1f} h left"


def size_text(size: int | None) -> str:
    """A file's size as a person reads it: "812 B", "14.2 KiB", "3.1 MiB", "1.2 GiB" (binary
    units, as the upload page's script words a chosen file's); "" when unknown."""
    if size is None:
        return ""
    if size < 1024:
        return f"{size} B"
    if size < 1024**2:
        return f"{size / 1024:.1f} KiB"
    if size < 1024**3:
        return f"{size / 1024**2:.1f} MiB"
    return f"{size / 1024**3:.1f} GiB"


def now_ms() -> int:
    """The server's clock, so the script can correct for a client clock that is off."""
    return int(datetime.now(UTC).timestamp() * 1000)


def init_app(app: App) -> None:
    app.add_template_filter(duration)
    app.add_template_filter(clock)
    app.add_template_filter(stalled)
    app.add_template_filter(words)
    app.add_template_filter(step_text)
    app.add_template_filter(result_text)
    app.add_template_filter(location_text)
    app.add_template_filter(eta_text)
    app.add_template_filter(size_text)
    app.add_template_global(highlight)
    app.add_template_global(now_ms)
    # Values, not functions: add_template_global stores them the same way, but is typed for
    # functions only.
    app.jinja_env.globals.update(
        STATUS_LABELS=STATUS_LABELS,
        BATCH_LABELS=BATCH_LABELS,
        ADVICE=ADVICE,
        WORDS=WORDS,
        STALLED_AFTER_SECONDS=STALLED_AFTER_SECONDS,
    )
