"""GET /api/openapi.json: the API described as OpenAPI 3.1, kept true by a test that compares
every route of the app with it (tests/unit/web/test_openapi.py)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from jobs import BATCH_STATUSES, ID_PATTERN, MAX_SEARCH_K, PRIORITIES, SEARCH_MODES, STATUSES

bp = Blueprint("openapi", __name__)

_ID = {"type": "string", "pattern": f"^{ID_PATTERN}$"}
_STATUS = {"type": "string", "enum": list(STATUSES)}
_ALLOWED = {"type": "boolean"}
_NULLABLE_TEXT = {"type": ["string", "null"]}

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    },
    "TaskError": {
        "type": ["object", "null"],
        "properties": {
            "step": {"type": ["string", "null"]},
            "type": {"type": "string"},
            "message": {"type": "string"},
            "retryable": {"type": "boolean"},
        },
    },
    "Task": {
        "type": "object",
        "required": [
            "id",
            "batch_id",
            "document_id",
            "filename",
            "status",
            "progress",
            "current_step",
            "step_detail",
            "attempts",
            "max_attempts",
            "next_attempt_at",
            "error",
            "created_at",
            "started_at",
            "ended_at",
            "updated_at",
            "result",
            "steps",
            "poll_after_ms",
            "url",
            "page_url",
            "can_retry",
            "can_cancel",
        ],
        "properties": {
            "id": _ID,
            "batch_id": _ID,
            "document_id": {"type": "string"},
            "filename": {"type": "string"},
            "status": _STATUS,
            "progress": {"type": "integer", "minimum": 0, "maximum": 100},
            "current_step": {
                "type": "string",
                "enum": [
                    "queued",
                    "parsing",
                    "chunking",
                    "embedding",
                    "indexing",
                    "done",
                    "waiting_retry",
                    "failed",
                    "canceled",
                ],
            },
            "step_detail": {"type": "string"},
            "status_text": {"type": "string"},
            "attempts": {"type": "integer"},
            "max_attempts": {"type": "integer"},
            "next_attempt_at": _NULLABLE_TEXT,
            "error": {"$ref": "#/components/schemas/TaskError"},
            "created_at": {"type": "string"},
            "started_at": _NULLABLE_TEXT,
            "ended_at": _NULLABLE_TEXT,
            "updated_at": {"type": "string"},
            "result": {"type": ["object", "null"]},
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "attempt": {"type": "integer"},
                        "started_at": _NULLABLE_TEXT,
                        "ended_at": _NULLABLE_TEXT,
                    },
                },
            },
            "pipeline_version": {"type": "string"},
            "poll_after_ms": {"type": "integer"},
            "can_retry": _ALLOWED,
            "can_cancel": _ALLOWED,
            "url": {"type": "string"},
            "page_url": {"type": "string"},
        },
    },
    "Batch": {
        "type": "object",
        "required": ["id", "status", "progress", "counts", "created_at"],
        "properties": {
            "id": _ID,
            "status": {"type": "string", "enum": list(BATCH_STATUSES)},
            "can_retry": _ALLOWED,
            "can_cancel": _ALLOWED,
            "progress": {"type": "integer"},
            "created_at": {"type": "string"},
            "eta_seconds": {
                "type": ["integer", "null"],
                "description": "seconds left, from the batch's own finished "
                "documents and the workers at work; null "
                "until that can be estimated",
            },
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            "tasks": {"type": "array", "items": {"$ref": "#/components/schemas/Task"}},
        },
    },
    "Deliveries": {
        "type": "object",
        "required": ["deliveries", "total", "enabled"],
        "properties": {
            "enabled": {"type": "boolean", "description": "INTAKE_WEBHOOK_URL is set"},
            "offset": {"type": "integer"},
            "limit": {"type": "integer"},
            "total": {"type": "integer"},
            "deliveries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "type", "created_at", "status", "attempts"],
                    "properties": {
                        "id": {"type": "string"},
                        "created_at": {"type": "string"},
                        "type": {
                            "type": "string",
                            "enum": [
                                "task.succeeded",
                                "task.failed",
                                "task.canceled",
                                "batch.completed",
                            ],
                        },
                        "task_id": _NULLABLE_TEXT,
                        "batch_id": _NULLABLE_TEXT,
                        "status": {
                            "type": "string",
                            "enum": ["pending", "delivered", "retrying", "failed"],
                        },
                        "attempts": {"type": "integer"},
                        "last_status_code": {"type": ["integer", "null"]},
                        "last_error": _NULLABLE_TEXT,
                        "delivered_at": _NULLABLE_TEXT,
                        "next_attempt_at": _NULLABLE_TEXT,
                        "updated_at": {"type": "string"},
                        "subject_url": {"type": "string"},
                        "subject_page_url": {"type": "string"},
                    },
                },
            },
        },
    },
    "Document": {
        "type": "object",
        "required": [
            "document_id",
            "filename",
            "status",
            "version",
            "pipeline_version",
            "chunks",
            "bytes",
            "content_type",
            "created_at",
            "updated_at",
            "task_id",
            "url",
            "original_url",
        ],
        "description": "A document as its latest submitted content (its latest task) left it",
        "properties": {
            "document_id": {"type": "string"},
            "filename": {"type": "string"},
            "status": {**_STATUS, "description": "the status of the document's latest task"},
            "version": {
                "type": ["integer", "null"],
                "description": "the latest task's version: its submission time, µs",
            },
            "pipeline_version": _NULLABLE_TEXT,
            "chunks": {
                "type": ["integer", "null"],
                "description": "chunks indexed, once the latest task succeeded",
            },
            "bytes": {"type": ["integer", "null"]},
            "content_type": {"type": "string"},
            "created_at": {
                **_NULLABLE_TEXT,
                "description": "when its latest content was submitted",
            },
            "updated_at": {**_NULLABLE_TEXT, "description": "the latest task's last change"},
            "task_id": _ID,
            "url": {"type": "string", "description": "/api/documents/<document_id>"},
            "original_url": {"type": "string", "description": "/api/originals/<document_id>"},
        },
    },
    "Documents": {
        "type": "object",
        "required": ["total", "documents"],
        "properties": {
            "total": {"type": "integer", "description": "documents matching the filters"},
            "offset": {"type": "integer"},
            "limit": {"type": "integer"},
            "documents": {"type": "array", "items": {"$ref": "#/components/schemas/Document"}},
        },
    },
    "DocumentWithTasks": {
        "allOf": [
            {"$ref": "#/components/schemas/Document"},
            {
                "type": "object",
                "required": ["tasks"],
                "properties": {
                    "tasks": {
                        "type": "array",
                        "description": "every task of the document, newest first",
                        "items": {
                            "type": "object",
                            "required": [
                                "id",
                                "status",
                                "created_at",
                                "updated_at",
                                "version",
                                "url",
                            ],
                            "properties": {
                                "id": _ID,
                                "batch_id": _ID,
                                "status": _STATUS,
                                "status_text": {"type": "string"},
                                "filename": {"type": "string"},
                                "bytes": {"type": ["integer", "null"]},
                                "version": {"type": ["integer", "null"]},
                                "pipeline_version": _NULLABLE_TEXT,
                                "chunks": {"type": ["integer", "null"]},
                                "error": {"$ref": "#/components/schemas/TaskError"},
                                "created_at": {"type": "string"},
                                "started_at": _NULLABLE_TEXT,
                                "ended_at": _NULLABLE_TEXT,
                                "updated_at": {"type": "string"},
                                "url": {"type": "string"},
                                "page_url": {"type": "string"},
                            },
                        },
                    }
                },
            },
        ]
    },
    "Location": {
        "type": "object",
        "description": "Where a chunk starts, and with page_end the page it ends on "
        "when that is a later one; {} if unknown",
        "properties": {
            "page": {"type": "integer", "minimum": 1},
            "page_end": {"type": "integer", "minimum": 2},
            "slide": {"type": "integer", "minimum": 1},
            "sheet": {"type": "string"},
            "heading": {"type": "string"},
        },
    },
    "Chunks": {
        "type": "object",
        "required": ["total", "chunks"],
        "properties": {
            "total": {"type": "integer"},
            "chunks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["chunk", "text", "location"],
                    "properties": {
                        "chunk": {"type": "integer"},
                        "text": {"type": "string"},
                        "location": {"$ref": "#/components/schemas/Location"},
                    },
                },
            },
        },
    },
    "SearchResults": {
        "type": "object",
        "required": ["query", "results", "mode", "exact"],
        "properties": {
            "query": {"type": "string"},
            "mode": {
                "type": "string",
                "enum": list(SEARCH_MODES),
                "description": "the ranking that answered: lexical (by words), dense (by the "
                "embedding service's vectors), hybrid (both, fused by "
                "reciprocal rank: score = Σ 1/(60 + rank))",
            },
            "exact": {
                "type": "boolean",
                "description": "false when the lexical ranking stopped at its budget of chunks",
            },
            "notice": {
                "type": "string",
                "description": "why search by meaning was not used: asked for but not "
                "configured, or the embedding service is failing",
            },
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": [
                        "text",
                        "score",
                        "scores",
                        "task_id",
                        "document_id",
                        "filename",
                        "chunk",
                        "location",
                        "original_url",
                    ],
                    "properties": {
                        "text": {"type": "string"},
                        "task_id": _ID,
                        "score": {
                            "type": "number",
                            "description": "the fused RRF score in hybrid "
                            "mode, else the ranking's own",
                        },
                        "scores": {
                            "type": "object",
                            "additionalProperties": False,
                            "description": "each ranking's own score of this hit, only those "
                            "that found it",
                            "properties": {
                                "lexical": {"type": "number"},
                                "dense": {"type": "number"},
                            },
                        },
                        "document_id": {"type": "string"},
                        "filename": {"type": "string"},
                        "chunk": {"type": "integer"},
                        "location": {"$ref": "#/components/schemas/Location"},
                        "original_url": {
                            "type": "string",
                            "description": "/api/originals/<document_id>",
                        },
                    },
                },
            },
        },
    },
    "Dependency": {
        "type": "object",
        "required": ["up", "latency_ms"],
        "properties": {
            "up": {"type": "boolean"},
            "latency_ms": {
                "type": "number",
                "description": "how long its last probe took (until it failed, when "
                "down); each probe is bounded to 1 s",
            },
            "error": {
                "type": "string",
                "description": "why it is down, in a word or two "
                "(timeout, unreachable, missing, …)",
            },
        },
    },
    "Health": {
        "type": "object",
        "required": [
            "status",
            "redis",
            "workers",
            "queues",
            "priorities",
            "scheduler",
            "unscheduled",
            "replication",
            "dependencies",
        ],
        "properties": {
            "status": {
                "type": "string",
                "enum": ["ok", "degraded"],
                "description": "degraded: the knowledge base, one of its read replicas or "
                "the store of originals does not answer (uploads or searches "
                "may fail; the queue works)",
            },
            "redis": {"type": "string", "enum": ["ok"]},
            "workers": {
                "type": "object",
                "properties": {
                    "count": {"type": "integer"},
                    "names": {"type": "array", "items": {"type": "string"}},
                },
            },
            "queues": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "description": "depth by queue; a tenant's queues by name for operators only",
            },
            "priorities": {"type": "object", "additionalProperties": {"type": "integer"}},
            "scheduler": {"type": "boolean"},
            "unscheduled": {"type": "array", "items": {"type": "string"}},
            "replication": {"type": "object"},
            "dependencies": {
                "type": "object",
                "required": ["redis", "kb", "store"],
                "properties": {
                    "redis": {"$ref": "#/components/schemas/Dependency"},
                    "kb": {
                        "allOf": [
                            {"$ref": "#/components/schemas/Dependency"},
                            {
                                "type": "object",
                                "required": ["apart", "replicas"],
                                "properties": {
                                    "apart": {
                                        "type": "boolean",
                                        "description": "on a Redis of its own "
                                        "(INTAKE_KB_URL); else the queue's, and as "
                                        "`redis` found it",
                                    },
                                    "replicas": {
                                        "type": "array",
                                        "description": "its read replicas, in the order of "
                                        "INTAKE_KB_REPLICA_URLS",
                                        "items": {"$ref": "#/components/schemas/Dependency"},
                                    },
                                },
                            },
                        ]
                    },
                    "store": {
                        "allOf": [
                            {"$ref": "#/components/schemas/Dependency"},
                            {
                                "type": "object",
                                "required": ["kind"],
                                "properties": {
                                    "kind": {
                                        "type": "string",
                                        "enum": ["file", "s3"],
                                        "description": "the store of originals' kind, never its "
                                        "address",
                                    }
                                },
                            },
                        ]
                    },
                },
            },
        },
    },
}


def _json(schema: dict[str, Any] | str, description: str = "OK") -> dict[str, Any]:
    if isinstance(schema, str):
        schema = {"$ref": f"#/components/schemas/{schema}"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    return {str(code): _json("Error", "Error") for code in codes}


def _later(status: int, codes: str) -> dict[str, Any]:
    """A refusal for now (429 or 503): the Error object and a Retry-After in seconds."""
    return {
        str(status): {
            **_json("Error", f"Error ({codes}); try again after Retry-After"),
            "headers": {"Retry-After": {"schema": {"type": "integer"}}},
        }
    }


# What a tenant may ask for before it is refused for now (webapp.limits): 429 with Retry-After.
_TOO_MANY_READS = _later(
    429, "too_many_reads: a large batch or a filtered library, too often; or too_many_failures"
)


def _id(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _query(name: str, kind: str = "integer", required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": {"type": kind}}


_CHANGE = {"202": _json("Task", "Accepted: the task's new state"), **_errors(404, 409)}
_LIST = {"type": "object"}

PATHS: dict[str, Any] = {
    "/api/documents": {
        "get": {
            "summary": "The tenant's documents, newest first (by when new content was last "
            "submitted)",
            "parameters": [
                _query("offset"),
                {
                    **_query("limit"),
                    "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 50},
                },
                {
                    **_query("q", "string"),
                    "description": "keeps documents whose id or file name holds it (any case)",
                },
                {
                    **_query("status", "string"),
                    "schema": _STATUS,
                    "description": "keeps documents whose latest task has this status",
                },
            ],
            "responses": {"200": _json("Documents"), **_errors(400, 401), **_TOO_MANY_READS},
        },
        "post": {
            "summary": "Upload documents (multipart field `files`, repeatable)",
            "requestBody": {
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "files": {
                                    "type": "array",
                                    "items": {"type": "string", "format": "binary"},
                                },
                                "document_id": {"type": "array", "items": {"type": "string"}},
                                "priority": {"type": "string", "enum": list(PRIORITIES)},
                                "force": {"type": "string"},
                            },
                        }
                    }
                }
            },
            "responses": {
                "202": _json(_LIST, "Accepted: the batch and its task ids"),
                **_errors(400, 401, 403, 413, 415, 429, 503),
            },
        },
    },
    "/api/documents/{document_id}": {
        "get": {
            "summary": "One document and its tasks, newest first (the id may contain `/`)",
            "parameters": [_id("document_id")],
            "responses": {"200": _json("DocumentWithTasks"), **_errors(401, 404)},
        },
        "delete": {
            "summary": "Remove a document's chunks and records",
            "parameters": [_id("document_id")],
            "responses": {"204": {"description": "Removed"}, **_errors(401, 404)},
        },
    },
    "/api/documents/reindex": {
        "post": {
            "summary": "Run documents again from their stored originals under the current "
            'pipeline version: `{"document_ids": [...]}` or `{"all": true}`, '
            "`force` (also those already indexed under it), `priority` (bulk by "
            "default). A batch like an upload's; each document stays findable from its "
            "previous version until its new one is indexed. A document has one re-index "
            "waiting at most: a forced one while its task is pending, retrying or "
            "running answers that task as a duplicate. `all` leaves out, in `rejected` "
            "(`last_run_failed`), documents whose last run failed unless `force` (409 "
            "`nothing_to_reindex` when that leaves none), and answers 429 without "
            "reading further once the library is more than the queue has room for",
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "document_ids": {"type": "array", "items": {"type": "string"}},
                                "all": {"type": "boolean"},
                                "force": {"type": "boolean"},
                                "priority": {"type": "string", "enum": list(PRIORITIES)},
                            },
                        }
                    }
                },
            },
            "responses": {
                "202": _json(_LIST, "Accepted: the batch and its task ids"),
                **_errors(400, 401, 404, 409, 429, 503),
            },
        }
    },
    "/api/originals/{document_id}": {
        "get": {
            "summary": "The document's current version as uploaded: an attachment with its file "
            "name and detected media type (the id may contain `/`)",
            "parameters": [_id("document_id")],
            "responses": {
                "200": {
                    "description": "The stored bytes",
                    "content": {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        }
                    },
                },
                **_errors(401, 404),
            },
        }
    },
    "/api/batches": {
        "get": {
            "summary": "Recent batches, newest first",
            "parameters": [_query("offset"), _query("limit")],
            "responses": {"200": _json(_LIST), **_errors(400, 401)},
        }
    },
    "/api/batches/{batch_id}": {
        "get": {
            "summary": "A batch with every task",
            "parameters": [_id("batch_id")],
            "responses": {
                "200": _json("Batch"),
                "304": {"description": "Not modified"},
                **_errors(401, 404),
                **_TOO_MANY_READS,
            },
        }
    },
    "/api/batches/{batch_id}/events": {
        "get": {
            "summary": "The batch's changes as Server-Sent Events (a bounded stream)",
            "parameters": [_id("batch_id")],
            "responses": {
                "200": {
                    "description": "text/event-stream",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                **_errors(401, 404),
                **_TOO_MANY_READS,
            },
        }
    },
    "/api/batches/{batch_id}/retry-failed": {
        "post": {
            "summary": "Retry the batch's retryable failed tasks",
            "parameters": [_id("batch_id")],
            "responses": {"202": _json(_LIST, "{retried, skipped}"), **_errors(401, 404)},
        }
    },
    "/api/batches/{batch_id}/cancel": {
        "post": {
            "summary": "Cancel the batch's cancelable tasks",
            "parameters": [_id("batch_id")],
            "responses": {"202": _json(_LIST, "{canceled}"), **_errors(401, 404)},
        }
    },
    "/api/tasks/{task_id}": {
        "get": {
            "summary": "One task",
            "parameters": [_id("task_id")],
            "responses": {
                "200": _json("Task"),
                "304": {"description": "Not modified"},
                **_errors(401, 404),
            },
        }
    },
    "/api/tasks/{task_id}/chunks": {
        "get": {
            "summary": "A succeeded task's chunks with their locations, paged (limit ≤ 100)",
            "parameters": [_id("task_id"), _query("offset"), _query("limit")],
            "responses": {
                "200": _json("Chunks"),
                "304": {"description": "Not modified"},
                **_errors(400, 401, 404, 409),
            },
        }
    },
    "/api/tasks/{task_id}/retry": {
        "post": {
            "summary": "A new run of the same task",
            "parameters": [_id("task_id")],
            "responses": _CHANGE,
        }
    },
    "/api/tasks/{task_id}/cancel": {
        "post": {
            "summary": "Cancel a pending, retrying or running task",
            "parameters": [_id("task_id")],
            "responses": _CHANGE,
        }
    },
    "/api/failed": {
        "get": {
            "summary": "Dead letters, newest first (all=1: every tenant's, operators only)",
            "parameters": [_query("offset"), _query("limit"), _query("all", "string")],
            "responses": {
                "200": _json(_LIST),
                "304": {"description": "Not modified"},
                **_errors(401, 403),
            },
        }
    },
    "/api/webhooks/deliveries": {
        "get": {
            "summary": "The tenant's recent webhook events and their deliveries, newest first",
            "parameters": [_query("offset"), _query("limit")],
            "responses": {
                "200": _json("Deliveries"),
                "304": {"description": "Not modified"},
                **_errors(400, 401),
            },
        }
    },
    "/api/search": {
        "get": {
            "summary": "Top-k chunks of succeeded documents",
            "parameters": [
                _query("q", "string", True),
                {
                    **_query("k"),
                    "schema": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SEARCH_K,
                        "default": 10,
                    },
                },
                {
                    **_query("mode", "string"),
                    "schema": {"type": "string", "enum": list(SEARCH_MODES)},
                    "description": "the ranking; absent: hybrid where dense vectors exist, else "
                    "lexical (a mode that cannot be served answers lexical, with a "
                    "notice)",
                },
            ],
            "responses": {
                "200": _json("SearchResults"),
                **_errors(400, 401),
                **_later(
                    429, "too_many_searches: the tenant's searches at once; or too_many_failures"
                ),
                **_later(503, "search_timeout: a read replica did not finish it"),
            },
        }
    },
    "/api/health": {
        "get": {
            "summary": "Redis, workers, queue depths, scheduler, and each dependency's state",
            "responses": {
                "200": _json("Health", "The queue's Redis answers (status ok or degraded)"),
                "503": _json("Error", "The queue's Redis is down"),
            },
        }
    },
    "/api/openapi.json": {"get": {"summary": "This document", "responses": {"200": _json(_LIST)}}},
    "/metrics": {
        "get": {
            "summary": "Prometheus metrics",
            "responses": {
                "200": {
                    "description": "Prometheus text format",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    },
}


def _with_failed_keys(paths: dict[str, Any]) -> dict[str, Any]:
    """Every operation that takes a key may answer 429 too_many_failures: a client past its
    failed keys is refused whatever key it sends (webapp.limits)."""
    failed = _later(429, "too_many_failures: too many wrong keys from this client")
    for item in paths.values():
        for operation in item.values():
            responses = operation["responses"]
            if "401" in responses and "429" not in responses:
                responses.update(failed)
    return paths


PATHS = _with_failed_keys(PATHS)


def document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Intake",
            "version": "1",
            "description": "Background document ingestion: upload, follow, retry, search.",
        },
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"apiKey": []}],
        "paths": PATHS,
    }


@bp.get("/api/openapi.json")
def openapi() -> Response:
    return jsonify(document())
