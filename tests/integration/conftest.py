"""Every test in this folder is marked `integration` (deselect with `-m "not integration"`).

The fixtures (redis_server, workers, web, api, embedding_server, make_workers, postgres_url …)
live in fixtures.py and postgres.py, plugins the root tests/conftest.py registers so the
browser tests share them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)
