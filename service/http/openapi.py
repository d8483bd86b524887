"""The OpenAPI document, told the truth: validation failures are our 400 (never FastAPI's 422),
every operation names the credentials it takes, its least role and the errors it can answer.

One rule names every operation: the route function's name in camelCase. `create_environment`
becomes `createEnvironment`, `preview_deployment` becomes `previewDeployment`: short, stable as long
as the function keeps its name, and what a generated client names its methods after. Function
names are unique across the routers (a test lists them all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from api.common import ErrorBody
from service.http.deps import PUBLIC_READ, least_role
from service.http.routeindex import api_routes


def operation_id(route: APIRoute) -> str:
    return camel_case(route.name)


def camel_case(function_name: str) -> str:
    first, *rest = function_name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def openapi_document(
    app: FastAPI, *, unlimited_paths: frozenset[str], additions: Iterable[Callable[[dict[str, Any]], None]]
) -> dict[str, Any]:
    """The app's document, made once: FastAPI's, each operation documented as above, then what
    `additions` declare (headers a middleware takes)."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, routes=api_routes(app))
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    error_schema = ErrorBody.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
    schemas.update(error_schema.pop("$defs", {}))
    schemas["ErrorBody"] = error_schema
    for key in [k for k in schemas if k in {"HTTPValidationError", "ValidationError"}]:
        del schemas[key]
    components["securitySchemes"] = SECURITY_SCHEMES
    # Not an operation's answer but a path's, to a method it does not take: documented once.
    components["responses"] = {
        "MethodNotAllowed": {
            "description": "The path does not take this method; `Allow` lists those it takes",
            "headers": {"Allow": {"schema": {"type": "string"}, "description": "e.g. `GET, PATCH, DELETE`"}},
            **_ERROR_CONTENT,
        }
    }
    for route in api_routes(app):
        if route.include_in_schema:
            for method in route.methods:
                _document_operation(
                    schema["paths"][route.path_format][method.lower()], route, unlimited_paths
                )
    for addition in additions:
        addition(schema)
    app.openapi_schema = schema
    return schema


SECURITY_SCHEMES = {
    "ApiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "An organization's key.",
    },
    "Bearer": {"type": "http", "scheme": "bearer", "description": "The same key as a bearer token."},
}
_KEY_REQUIREMENTS = [{"ApiKey": []}, {"Bearer": []}]
_ERRORS = {
    "400": "Invalid input; `message` and `details` name the field",
    "401": "Missing, malformed, unknown or revoked key",
    "403": "The key's organization is not the one the request names, or its role is below the least role",
    "404": "A resource the request names does not exist in the key's organization",
    "413": "The request body is larger than the service accepts",
    "429": "Rate limited; see Retry-After",
}


def _document_operation(operation: dict[str, Any], route: APIRoute, unlimited_paths: frozenset[str]) -> None:
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)
    role = least_role(route.dependant)
    if role is None:
        operation["security"] = []
    elif role == PUBLIC_READ:
        operation["security"] = [{}, *_KEY_REQUIREMENTS]
    else:
        operation["security"] = _KEY_REQUIREMENTS
        operation["x-least-role"] = role
        operation["description"] = f"{operation.get('description', '')}\n\nLeast role: **{role}**.".strip()
    statuses = ["400"]
    if role is not None:
        statuses += ["401", "403", "404"]
    if "requestBody" in operation:
        statuses.append("413")
    if route.path_format not in unlimited_paths:
        statuses.append("429")
    for status in statuses:
        responses.setdefault(status, {"description": _ERRORS[status], **_ERROR_CONTENT})


_ERROR_CONTENT = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
