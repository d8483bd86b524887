"""The OpenAPI document tells the truth: who needs a key, which errors can come, what a number may be."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from api.common import MAX_INT32

PUBLIC = {("get", "/api/health"), ("get", "/api/health/live"), ("get", "/api/health/ready")}
OPTIONAL_KEY = {
    ("get", "/api/registries/artifacts"),
    ("get", "/api/registries/artifacts/versions"),
    ("get", "/api/registries/artifacts/retrieve"),
}


@pytest.fixture(scope="module")
def document(server) -> dict[str, Any]:
    import httpx

    # The first document is built on demand: on a busy machine that takes longer than the default 5 s.
    return httpx.get(f"{server.url}/openapi.json", timeout=60).json()


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


def test_keys_are_declared_as_security_schemes(document):
    schemes = document["components"]["securitySchemes"]
    assert schemes["ApiKey"] == {**schemes["ApiKey"], "type": "apiKey", "in": "header", "name": "X-API-Key"}
    assert schemes["Bearer"]["type"] == "http" and schemes["Bearer"]["scheme"] == "bearer"


def test_every_operation_but_the_public_ones_needs_a_key(document):
    for method, path, operation in operations(document):
        security = operation["security"]
        if (method, path) in PUBLIC:
            assert security == [], path
        elif (method, path) in OPTIONAL_KEY:
            assert {} in security and {"ApiKey": []} in security, path
        else:
            assert security == [{"ApiKey": []}, {"Bearer": []}], (method, path)


def test_errors_are_documented_where_they_can_occur(document):
    error = {"$ref": "#/components/schemas/ErrorBody"}
    method_not_allowed = document["components"]["responses"]["MethodNotAllowed"]
    assert method_not_allowed["content"]["application/json"]["schema"] == error
    assert "Allow" in method_not_allowed["headers"]
    for method, path, operation in operations(document):
        responses = operation["responses"]
        assert "422" not in responses, path
        expected = {"400"} if (method, path) in PUBLIC else {"400", "401", "403", "404"}
        if "requestBody" in operation:
            expected.add("413")
        if path not in {"/api/health", "/api/health/live", "/api/health/ready"}:
            expected.add("429")
        assert expected <= set(responses), (method, path, sorted(responses))
        for status in expected:
            assert responses[status]["content"]["application/json"]["schema"] == error, (path, status)


def integer_schemas(
    schema: Any, components: dict[str, Any], seen: frozenset[str] = frozenset()
) -> Iterator[dict]:
    """Every integer schema reachable from `schema`, following references."""
    if isinstance(schema, dict):
        reference = schema.get("$ref")
        if reference:
            name = reference.rsplit("/", 1)[-1]
            if name not in seen:
                yield from integer_schemas(components[name], components, seen | {name})
            return
        if schema.get("type") == "integer":
            yield schema
        for value in schema.values():
            yield from integer_schemas(value, components, seen)
    elif isinstance(schema, list):
        for item in schema:
            yield from integer_schemas(item, components, seen)


def test_every_integer_a_request_carries_is_bounded(document):
    """A new integer parameter or body field without a maximum fails here, before it fails in SQL."""
    components = document["components"]["schemas"]
    found = 0
    for method, path, operation in operations(document):
        inputs = [parameter["schema"] for parameter in operation.get("parameters", [])]
        inputs.append(operation.get("requestBody", {}))
        for schema in integer_schemas(inputs, components):
            found += 1
            assert schema.get("maximum", MAX_INT32 + 1) <= MAX_INT32, (method, path, schema)
            assert schema.get("minimum", -MAX_INT32 - 2) >= -MAX_INT32 - 1, (method, path, schema)
    assert found > 20
