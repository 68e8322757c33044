"""Where a form may send a person back to: a path of this site only, never an open redirect."""
from __future__ import annotations


def local_path(target: str | None, default: str) -> str:
    """`target` if it is a path here ("/…", not "//host…" nor "/\\host…"), else `default`."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return default
