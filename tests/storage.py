"""One directory of originals for the whole test run (INTAKE_STORAGE_URL): the processes the
harness starts get it in their environment, and code run inside pytest reads it as the default
(jobs.core.settings.DEFAULT_STORAGE_DIR), so both sides see the same files and nothing is
written under the repository's instance/."""

from __future__ import annotations

import tempfile
from pathlib import Path

ORIGINALS_DIR = Path(tempfile.mkdtemp(prefix="intake-test-originals-"))
ORIGINALS_URL = ORIGINALS_DIR.as_uri()
