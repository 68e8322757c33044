"""Security headers on every answer, and refusal of state-changing cross-site requests.

Intake's own pages carry no inline script or style, so their Content-Security-Policy (`CSP`)
forbids both. The mounted rq-dashboard cannot meet that, yet it renders job meta, description
and exc_info unescaped (underscore `<%= %>` templates inserted with innerHTML), so it gets a
policy of its own (`dashboard_policy`) that lets its code run and nothing injected:

- script-src 'self' plus the sha256 hash of each inline executable <script> of *this* response.
  Its one inline block varies per page (job id, poll interval), so hashes are computed from the
  body; a nonce would need rq-dashboard's templates rewritten. Never 'unsafe-inline': an
  injected <img onerror=…> or <script> does not match, and script-src-attr 'none' says so.
  Only server-rendered (autoescaped) markup is hashed, never what the dashboard's script adds.
- 'unsafe-eval': underscore's `_.template` compiles its templates with `new Function`. The
  template sources are the page's own static <script type="text/template"> blocks; job data is
  only concatenated into their output, never evaluated.
- style-src 'self' 'unsafe-inline' for its style="…" attributes, but style-src-elem 'self':
  no inline <style> element (the dashboard has none), so injected markup cannot restyle the page.
- connect-src, img-src (data: for Bootstrap's inline SVG icons), object-src, base-uri,
  form-action and frame-ancestors as tight as for the rest of Intake.

Every answer but a static file says `Cache-Control: private, no-store`, so a shared browser
keeps no tenant's results after sign-out; one validated by its ETag (a task, a batch, the
failed list) says `private, no-cache`: kept, but never shown again without asking (a 304).
Static files keep Flask's own caching: they hold nobody's data.
"""

from __future__ import annotations

import base64
import hashlib
from html.parser import HTMLParser
from urllib.parse import urlsplit

from flask import Flask, Response, request

from webapp.errors import ApiError

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)
DASHBOARD_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-eval'{hashes}; "
    "script-src-attr 'none'; style-src 'self' 'unsafe-inline'; style-src-elem 'self'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)
DASHBOARD_BLUEPRINT = "rq_dashboard"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
STATIC_ENDPOINTS = frozenset({"static", "dashboard_favicon", "rq_dashboard.static"})
NO_STORE = "private, no-store"
REVALIDATE = "private, no-cache"
# What a browser runs as classic or module script (HTML's list of JavaScript MIME types, short).
_SCRIPT_TYPES = frozenset(
    {
        "",
        "text/javascript",
        "application/javascript",
        "module",
        "text/ecmascript",
        "application/ecmascript",
        "text/jscript",
    }
)


def init_app(app: Flask) -> None:
    app.before_request(refuse_foreign_origin)
    app.after_request(add_headers)


def refuse_foreign_origin() -> None:
    """A browser names the page's site in Origin; another site may not change anything here."""
    origin = request.headers.get("Origin")
    if request.method in SAFE_METHODS or not origin:
        return
    if origin == "null" or urlsplit(origin).netloc != request.host:
        raise ApiError(403, "foreign_origin", "Requests from another site are not allowed.")


def add_headers(response: Response) -> Response:
    headers = response.headers
    if request.blueprint == DASHBOARD_BLUEPRINT and response.mimetype == "text/html":
        headers.setdefault("Content-Security-Policy", dashboard_policy(response))
    else:
        headers.setdefault("Content-Security-Policy", CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Referrer-Policy", "same-origin")
    if request.endpoint not in STATIC_ENDPOINTS:
        headers["Cache-Control"] = REVALIDATE if headers.get("ETag") else NO_STORE
    return response


def dashboard_policy(response: Response) -> str:
    """The dashboard's policy, allowing exactly the inline scripts this HTML answer contains.

    A streamed body cannot be read without consuming it: it gets no hashes (its inline scripts
    are then blocked, failing closed).
    """
    scripts = [] if response.is_streamed else inline_scripts(response.get_data(as_text=True))
    hashes = "".join(f" 'sha256-{_sha256(source)}'" for source in dict.fromkeys(scripts))
    return DASHBOARD_CSP.format(hashes=hashes)


def inline_scripts(html: str) -> list[str]:
    """The text of each <script> without src that a browser would execute, in page order."""
    finder = _InlineScripts()
    finder.feed(html)
    finder.close()
    return finder.found


def _sha256(source: str) -> str:
    return base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")


class _InlineScripts(HTMLParser):
    """Collects inline executable scripts; a template block (type="text/template") is not one."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._current: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "script":
            return
        named = {name: (value or "") for name, value in attrs}
        kind = named.get("type", "").strip().lower()
        runs = "src" not in named and kind in _SCRIPT_TYPES
        self._current = [] if runs else None

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self._current.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            if self._current is not None:
                self.found.append("".join(self._current))
            self._current = None
