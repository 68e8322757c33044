"""Every Lua script names the keys it can know beforehand in KEYS: the only key names a script
builds are those named by what a declared key holds (a term's postings by its levels, a hit's
document by its text's digest), under the tenant's prefix."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
#: A key name a script builds from a prefix: `prefix .. 'name'` (`tenant_prefix`, an ARGV).
_BUILT = re.compile(r"(?:\w*prefix|ARGV\[\d+\])\s*\.\.\s*'([^']*)'")
#: What may only be derived inside a script (keys.kb_prefix says why).
DERIVED = {"i:", "doc:"}


def _scripts() -> list[tuple[str, int, str]]:
    """Every script's file (jobs.core.scripts: `<package>/lua/<name>.lua`), line by line."""
    return [
        (str(path.relative_to(ROOT)), number, line)
        for path in sorted((ROOT / "jobs").rglob("*.lua"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
    ]


def test_scripts_build_only_the_key_names_that_data_names():
    built = [
        (path, line, name)
        for path, line, text in _scripts()
        for name in _BUILT.findall(text)
        if name not in DERIVED
    ]
    assert built == []


def test_the_check_sees_a_script_that_builds_a_fixed_key():
    assert _BUILT.findall("redis.call('HGET', prefix .. 'stats', 'chunks')") == ["stats"]
    assert _BUILT.findall("{'BITFIELD', ARGV[1] .. 'live'}") == ["live"]
    assert _BUILT.findall("redis.call('GET', tenant_prefix .. 'next')") == ["next"]
