"""Small tools every integration test uses: polling with a deadline, an HTTP client (free ports:
runner.processes).

Integration tests talk to real processes, so every wait is a poll with a timeout that fails with
the last thing it saw, never a bare sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urljoin

import requests

from runner.processes import free_port

T = TypeVar("T")
__all__ = ["ApiClient", "assert_stays", "free_port", "poll", "wait_until"]


def poll(
    fetch: Callable[[], T],
    condition: Callable[[T], Any] = bool,
    *,
    timeout: float,
    interval: float = 0.05,
    message: str = "condition not met",
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call `fetch` until `condition(value)` is true and return that value.

    Exceptions listed in `ignore` count as "not yet" (e.g. a server still starting). On timeout
    raises AssertionError naming `message`, the last value seen and the last ignored error.
    """
    deadline = time.monotonic() + timeout
    last: Any = "<never observed>"
    last_error: BaseException | None = None
    while True:
        try:
            last = fetch()
            last_error = None
            if condition(last):
                return last
        except ignore as exc:  # noqa: PERF203 - a poll loop by nature
            last_error = exc
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"{message}: not true after {timeout} s; last value: {last!r}"
                + (f"; last error: {last_error!r}" if last_error else "")
            )
        time.sleep(interval)


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.05,
    message: str = "condition not met",
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll `predicate()` until it returns a truthy value, which is returned."""
    return poll(predicate, bool, timeout=timeout, interval=interval, message=message, ignore=ignore)


def assert_stays(
    fetch: Callable[[], T],
    condition: Callable[[T], Any],
    *,
    duration: float,
    interval: float = 0.1,
    message: str = "condition stopped holding",
) -> T:
    """Assert that `condition(fetch())` holds on every poll for `duration` seconds (a bounded
    check that something does NOT happen, e.g. no automatic retry); returns the last value."""
    deadline = time.monotonic() + duration
    while True:
        value = fetch()
        if not condition(value):
            raise AssertionError(f"{message}: observed {value!r}")
        if time.monotonic() >= deadline:
            return value
        time.sleep(interval)


class ApiClient(requests.Session):
    """A requests.Session whose relative URLs ("/api/…") resolve against `base_url`, with a
    default timeout so a hung server fails the test instead of hanging it; with `api_key`,
    every request is a tenant's (`Authorization: Bearer`)."""

    def __init__(self, base_url: str, timeout: float = 10.0, api_key: str | None = None) -> None:
        super().__init__()
        self.base_url = base_url.rstrip("/") + "/"
        self.default_timeout = timeout
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self.default_timeout)
        return super().request(method, urljoin(self.base_url, url), *args, **kwargs)
