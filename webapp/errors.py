"""Error answers: JSON under /api (never an HTML page, never a 500 for bad input), HTML elsewhere.

The domain's outcomes (jobs.core.exceptions) become HTTP here and nowhere else: not found → 404, a
status that does not allow the action → 409, a limit → 503 while the whole service is busy
(work waiting, all tenants), 429 for what a tenant or the knowledge base holds, with
Retry-After; an upload no replica confirmed → 503 with Retry-After (send it again: a
duplicate); a tenant or a client past its share for now (too many searches at once,
expensive reads, failed keys) → 429 with Retry-After; a search a read replica did not finish in
time → 503 with Retry-After. Redis being unreachable is an outage, not a bug: 503 with Retry-After
and a reason; so is a failover under way (no primary yet, or a demoted one).
"""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify, render_template, request
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from werkzeug.exceptions import HTTPException

from jobs import (
    LimitReached,
    NotFound,
    NotNow,
    NotReplicated,
    SearchTimedOut,
    StorageUnavailable,
    Throttled,
    is_redis_outage,
)

log = logging.getLogger(__name__)

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_type",
    429: "too_many_requests",
    503: "unavailable",
}


class ApiError(Exception):
    """An error with a code and a message for a person; raised by views, answered by handlers."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retry_after: int | None = None,
        extra: dict | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.retry_after, self.extra = retry_after, extra or {}


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    retry_after: int | None = None,
    extra: dict | None = None,
) -> Response:
    if request.path.startswith("/api/"):
        response = jsonify({"error": {"code": code, "message": message}, **(extra or {})})
    else:
        response = Response(
            render_template("error.html", status=status, message=message), mimetype="text/html"
        )
    response.status_code = status
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


def init_app(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError) -> Response:
        return error_response(
            exc.status, exc.code, exc.message, retry_after=exc.retry_after, extra=exc.extra
        )

    @app.errorhandler(NotFound)
    def _not_found(exc: NotFound) -> Response:
        return error_response(404, exc.code, exc.message)

    @app.errorhandler(NotNow)
    def _not_now(exc: NotNow) -> Response:
        return error_response(409, exc.code, exc.message)

    @app.errorhandler(LimitReached)
    def _limit(exc: LimitReached) -> Response:
        return error_response(
            503 if exc.busy else 429, exc.code, exc.message, retry_after=exc.retry_after
        )

    @app.errorhandler(Throttled)
    def _throttled(exc: Throttled) -> Response:
        return error_response(429, exc.code, exc.message, retry_after=exc.retry_after)

    @app.errorhandler(NotReplicated)
    @app.errorhandler(StorageUnavailable)
    @app.errorhandler(SearchTimedOut)
    def _not_replicated(exc: NotReplicated | StorageUnavailable | SearchTimedOut) -> Response:
        return error_response(503, exc.code, exc.message, retry_after=exc.retry_after)

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        return error_response(status, _CODES.get(status, "error"), exc.description or exc.name)

    @app.errorhandler(RedisConnectionError)  # MasterNotFoundError too: a failover under way
    @app.errorhandler(RedisTimeoutError)
    def _redis_down(exc: Exception) -> Response:
        log.warning("redis unavailable: %s", exc)
        return error_response(
            503,
            "redis_unavailable",
            "The task store (Redis) is unreachable; try again shortly.",
            retry_after=5,
        )

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Response:
        if is_redis_outage(exc):  # READONLY (a demoted primary), NOREPLICAS, MASTERDOWN, LOADING
            return _redis_down(exc)
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal_error", "Something went wrong on our side.")
