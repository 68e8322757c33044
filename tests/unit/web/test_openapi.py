"""The OpenAPI document matches the app's routes exactly: adding or changing a route without
updating webapp/openapi.py fails here."""

from __future__ import annotations

import re

DOCUMENTED_PREFIXES = ("/api/", "/metrics")


def _routes(app) -> set[tuple[str, str]]:
    found = set()
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith(DOCUMENTED_PREFIXES):
            continue
        path = re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule.rule)
        found |= {(path, method.lower()) for method in rule.methods - {"HEAD", "OPTIONS"}}
    return found


def test_every_route_is_documented_and_nothing_else(app, client):
    document = client.get("/api/openapi.json").get_json()
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert _routes(app) == documented


def test_the_document_is_openapi_3(client):
    document = client.get("/api/openapi.json").get_json()
    assert document["openapi"].startswith("3.")
    assert "Task" in document["components"]["schemas"]


def test_search_documents_its_mode_its_bound_on_k_and_each_hit_s_scores(client):
    document = client.get("/api/openapi.json").get_json()
    parameters = {p["name"]: p for p in document["paths"]["/api/search"]["get"]["parameters"]}
    assert parameters["k"]["schema"]["maximum"] == 200
    assert parameters["mode"]["schema"]["enum"] == ["lexical", "dense", "hybrid"]
    results = document["components"]["schemas"]["SearchResults"]["properties"]
    assert results["mode"]["enum"] == ["lexical", "dense", "hybrid"]
    assert set(results["results"]["items"]["properties"]["scores"]["properties"]) == {
        "lexical",
        "dense",
    }


def test_the_document_library_documents_its_filters_and_shapes(client):
    document = client.get("/api/openapi.json").get_json()
    listing = document["paths"]["/api/documents"]["get"]
    parameters = {p["name"]: p for p in listing["parameters"]}
    assert set(parameters) == {"offset", "limit", "q", "status"}
    assert parameters["limit"]["schema"]["maximum"] == 100
    assert parameters["status"]["schema"]["enum"] == [
        "pending",
        "running",
        "retrying",
        "succeeded",
        "failed",
        "canceled",
    ]
    one = document["paths"]["/api/documents/{document_id}"]
    assert set(one) == {"get", "delete"} and "404" in one["get"]["responses"]
    schemas = document["components"]["schemas"]
    assert {"url", "original_url", "status", "task_id"} <= set(schemas["Document"]["required"])
    hit = schemas["SearchResults"]["properties"]["results"]["items"]
    assert "original_url" in hit["required"]


def test_health_documents_its_status_and_each_dependency(client):
    document = client.get("/api/openapi.json").get_json()
    answers = document["paths"]["/api/health"]["get"]["responses"]
    assert (
        answers["200"]["content"]["application/json"]["schema"]
        == {"$ref": "#/components/schemas/Health"}
        and "503" in answers
    )
    health = document["components"]["schemas"]["Health"]
    assert health["properties"]["status"]["enum"] == ["ok", "degraded"]
    found = client.get("/api/health").get_json()
    assert set(health["required"]) <= set(found)
    dependencies = health["properties"]["dependencies"]
    assert set(dependencies["required"]) == set(found["dependencies"])
    store = dependencies["properties"]["store"]["allOf"][1]["properties"]
    assert store["kind"]["enum"] == ["file", "s3"]


def test_the_limits_answers_are_documented_with_retry_after(client):
    paths = client.get("/api/openapi.json").get_json()["paths"]
    limited = {
        ("/api/search", "429"),
        ("/api/search", "503"),
        ("/api/documents", "429"),
        ("/api/batches/{batch_id}", "429"),
        ("/api/batches/{batch_id}/events", "429"),
    }
    for path, status in limited:
        answer = paths[path]["get"]["responses"][status]
        assert "Retry-After" in answer["headers"], (path, status)
    assert "too_many_searches" in paths["/api/search"]["get"]["responses"]["429"]["description"]
    for path, item in paths.items():  # a client past its failed keys: 429 wherever a key goes
        for method, operation in item.items():
            if "401" in operation["responses"]:
                assert "429" in operation["responses"], (path, method)
