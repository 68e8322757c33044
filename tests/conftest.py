"""Root of the test tree. Markers are registered in pytest.ini. The integration fixtures are a
plugin here (they start nothing until a test asks) so tests/integration and tests/browser share
one Redis, one pair of workers and one web process per run.

`make test` runs two pytest-xdist workers: one runs the files of WAITING_FILES, whose tests
mostly wait for RQ to notice a lost worker (its heartbeat's fixed 60 s) or for a stream's
bound, while the other runs everything else in the usual order. Each worker starts its own
servers as its tests ask. `python -m pytest` alone runs everything in one process, as before.
"""

import pytest

#: Test files that spend most of their time waiting on timers, not on the CPU.
WAITING_FILES = (
    "tests/integration/worker/test_cut_off_worker.py",
    "tests/integration/worker/test_lost_workers.py",
    "tests/browser/test_live_events.py",
)

pytest_plugins = [
    "tests.integration.fixtures",
    "tests.integration.postgres",
    "tests.integration.seaweedfs",
]


def pytest_configure(config) -> None:
    """Code run inside pytest keeps originals where the harness's processes do (tests.storage)."""
    import jobs.core.settings
    from tests.storage import ORIGINALS_DIR

    jobs.core.settings.DEFAULT_STORAGE_DIR = ORIGINALS_DIR


def pytest_collection_modifyitems(config, items) -> None:
    """With `-n 2 --dist loadgroup`: the waiting files on one worker, the rest on the other."""
    for item in items:
        waiting = item.nodeid.split("::", 1)[0] in WAITING_FILES
        item.add_marker(pytest.mark.xdist_group("waiting" if waiting else "main"))
