"""Headless Chromium (Debian's, driven by Playwright's Python package) against the running system.

The browser tests reuse the integration fixtures (real Redis, rq workers, the Procfile's web).
Where Chromium or Playwright is missing they are skipped with a loud reason; CI installs both.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM = os.environ.get("INTAKE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium() -> Iterator:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"!!! Chromium not found at {CHROMIUM}: browser tests SKIPPED "
                    "(apt-get install chromium) !!!")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("!!! playwright is not installed: browser tests SKIPPED !!!")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, web) -> Iterator:
    """A fresh page whose console errors (CSP violations included) fail the test."""
    context = chromium.new_context(base_url=web.url)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    yield page
    context.close()
    assert problems == [], f"the page reported errors: {problems}"


@pytest.fixture
def page_without_js(chromium, web) -> Iterator:
    context = chromium.new_context(base_url=web.url, java_script_enabled=False)
    yield context.new_page()
    context.close()
