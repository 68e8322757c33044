"""Root of the test tree. Markers are registered in pytest.ini. The integration fixtures are a
plugin here (they start nothing until a test asks) so tests/integration and tests/browser share
one Redis, one pair of workers and one web process per run."""

pytest_plugins = ["tests.integration.fixtures", "tests.integration.postgres",
                  "tests.integration.seaweedfs"]


def pytest_configure(config) -> None:
    """Code run inside pytest keeps originals where the harness's processes do (tests.storage)."""
    import jobs.core.settings
    from tests.storage import ORIGINALS_DIR
    jobs.core.settings.DEFAULT_STORAGE_DIR = ORIGINALS_DIR
