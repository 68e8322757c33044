"""The WSGI app the benchmark serves with gunicorn: Intake's own app plus bench-only baselines.

The baselines do the least a handler could do for the same job, on the same app and server
(same middleware, hooks, CSRF, security headers), so the ratio isolates Intake's own work:

- POST /bare/enqueue: read the uploaded file and enqueue one RQ job with its length.
- GET /bare/hgetall/<key>: one HGETALL and a jsonify of it.

Built at import time on purpose: like webapp.wsgi, this module is an entry point, not a library.
"""

from __future__ import annotations

import os

from flask import Blueprint, Flask, Response, jsonify, request
from rq import Queue

from webapp import connect, create_app, csrf

BARE_QUEUE = "bench-bare"


def bare_blueprint(url: str) -> Blueprint:
    """The baseline routes, with their Redis client and queue built once, here."""
    connection = connect(url)
    queue = Queue(BARE_QUEUE, connection=connection)
    bp = Blueprint("bench_bare", __name__, url_prefix="/bare")

    @bp.post("/enqueue")
    def enqueue() -> tuple[Response, int]:
        data = request.files["files"].read()
        job = queue.enqueue("bench.noop.noop", len(data))
        return jsonify({"id": job.id}), 202

    @bp.get("/hgetall/<path:key>")
    def hgetall(key: str) -> Response:
        raw = connection.hgetall(key)
        return jsonify({k.decode(): v.decode() for k, v in raw.items()})

    return bp


def build() -> Flask:
    application = create_app()
    bp = bare_blueprint(os.environ["REDIS_URL"])
    csrf.exempt(bp)
    application.register_blueprint(bp)
    return application


app = build()
