"""Where a form may send a person back to: a path of this site only, never an open redirect.

A target is judged as a browser would read it in a Location header (the WHATWG URL parser):
leading and trailing C0 controls and spaces trimmed, tabs and newlines removed anywhere, a
backslash read as a slash. `/\t/evil.com` is `//evil.com` to a browser (and Werkzeug itself
drops the tab from the header), so it must be judged as that. Each percent-decoded layer is
judged too: whatever decodes the target once more (a proxy, a second redirect) must not find a
host in it either.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

_TRIMMED = "".join(chr(code) for code in range(0x21))  # C0 controls and space
_TAB_AND_NEWLINES = str.maketrans("", "", "\t\n\r")
_DECODINGS = 4  # deeper nesting than this is no path a page of Intake links to


def local_path(target: str | None, default: str) -> str:
    """`target` as a browser would follow it, if that is a path of this site at every
    percent-decoded layer; else `default`."""
    if not target:
        return default
    followed = target.strip(_TRIMMED).translate(_TAB_AND_NEWLINES)
    layer = followed
    for _ in range(_DECODINGS):
        if not is_local(layer):
            return default
        decoded = unquote(layer)
        if decoded == layer:
            return followed
        layer = decoded
    return default


def is_local(target: str) -> bool:
    """Whether a browser takes `target` as a path of the current site: one leading slash (a
    backslash counts as one), no scheme, no host, and no control character left."""
    seen = target.strip(_TRIMMED).translate(_TAB_AND_NEWLINES).replace("\\", "/")
    if not seen.startswith("/") or seen.startswith("//"):
        return False
    if any(char < " " or char == "\x7f" for char in seen):
        return False
    parts = urlsplit(seen)
    return not parts.scheme and not parts.netloc
