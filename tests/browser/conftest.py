"""Headless Chromium (Debian's, driven by Playwright's Python package) against the running system.

The browser tests reuse the integration fixtures (real Redis, rq workers, the Procfile's web, and
the fault stack with its HTTP embedding server). Where Chromium or Playwright is missing they are
skipped with a loud reason; CI installs both.

Fixtures: `chromium`; `page` and `page_without_js` on the session's web; `open_page(base_url,
**context_options)` for more pages (another stack, a second tab), each failing its test on any
console error (CSP violations included). SCREENSHOTS is where README's pictures are written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("INTAKE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HERE = Path(__file__).parent
# The README's screenshots are refreshed only when asked (INTAKE_SCREENSHOTS=1 make test), so
# an ordinary test run leaves the work tree clean; otherwise they go to a temporary folder.
SCREENSHOTS = (
    HERE.parents[1] / "docs" / "screenshots"
    if os.environ.get("INTAKE_SCREENSHOTS")
    else Path(tempfile.mkdtemp(prefix="intake-screenshots-"))
)
VIEWPORT = {"width": 1280, "height": 800}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium() -> Iterator:
    if not Path(CHROMIUM).exists():
        pytest.skip(
            f"!!! Chromium not found at {CHROMIUM}: browser tests SKIPPED "
            "(apt-get install chromium) !!!"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("!!! playwright is not installed: browser tests SKIPPED !!!")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def open_page(chromium) -> Iterator[Callable[..., Any]]:
    """open_page(base_url, **context_options) → a fresh page in a context of its own; console
    errors and uncaught exceptions of any page opened so fail the test."""
    contexts: list[Any] = []
    problems: list[str] = []

    def open_(base_url: str, **options: Any) -> Any:
        context = chromium.new_context(base_url=base_url, viewport=VIEWPORT, **options)
        contexts.append(context)
        page = context.new_page()
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        return page

    yield open_
    for context in contexts:
        context.close()
    assert problems == [], f"the page reported errors: {problems}"


@pytest.fixture
def page(open_page, web) -> Any:
    """A fresh page on the session's web whose console errors fail the test."""
    return open_page(web.url)


@pytest.fixture
def page_without_js(chromium, web) -> Iterator:
    context = chromium.new_context(base_url=web.url, java_script_enabled=False, viewport=VIEWPORT)
    yield context.new_page()
    context.close()
