"""What an attempt is given to work with: its settings, its embedder and its progress reporter.

Why handed in: the job must not reach for the environment or for module state of its own, so
that tests and the worker's warm-up give it other parts (a fake embedder, other settings)
without editing os.environ or monkeypatching private names. A worker process builds its parts
once (`install`, by IntakeWorker at start: forked work-horses inherit them, and an HTTP
embedder keeps its connections); a process that installed none builds them from its
environment the first time a job asks (`current`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from jobs.core.settings import Settings
from jobs.embedding.embedders import Embedder, make_embedder
from jobs.kb.versions import pipeline_version
from jobs.worker.progress import ProgressReporter


@dataclass(frozen=True)
class Parts:
    settings: Settings
    embedder: Embedder
    reporter: Callable[..., ProgressReporter] = field(default=ProgressReporter)

    @classmethod
    def from_settings(cls, settings: Settings) -> Parts:
        return cls(settings, make_embedder(settings))

    @cached_property
    def version(self) -> str:
        """The pipeline version these parts make (the first job asks, before embedding)."""
        return pipeline_version(self.settings, self.embedder)


_installed: Parts | None = None


def install(parts: Parts | None) -> Parts | None:
    """Make `parts` what this process's jobs use; returns what was installed before."""
    global _installed
    previous, _installed = _installed, parts
    return previous


def current() -> Parts:
    """The installed parts, built from the environment if none were."""
    if _installed is None:
        install(Parts.from_settings(Settings.from_env()))
    assert _installed is not None
    return _installed


@contextlib.contextmanager
def using(parts: Parts) -> Iterator[Parts]:
    """`parts` for the jobs run in this block, then whatever was installed before."""
    previous = install(parts)
    try:
        yield parts
    finally:
        install(previous)
