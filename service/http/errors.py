"""Errors as answers: the error body every refusal shares, and one handler per kind of failure
(the service's own refusals, invalid input, unknown paths and methods, a lost database, the rest)."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import Scope, Send

from service.errors import ServiceError
from service.http.routeindex import app_routes

logger = logging.getLogger("orgdeck")


def error_body(message: str, code: str, details: list[dict[str, Any]] | None = None) -> bytes:
    return json.dumps({"message": message, "code": code, "details": details or []}).encode()


async def send_error(
    send: Send,
    status: int,
    message: str,
    code: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    details: list[dict[str, Any]] | None = None,
) -> None:
    """Answer with an error from raw ASGI middleware, before the application runs."""
    body = error_body(message, code, details)
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": start + (headers or [])})
    await send({"type": "http.response.body", "body": body})


def error_response(
    status: int,
    message: str,
    code: str,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(
        error_body(message, code, details), status_code=status, media_type="application/json", headers=headers
    )


_UNAUTHORIZED_HEADERS = {"WWW-Authenticate": 'Bearer realm="orgdeck"'}


def service_error_response(exc: ServiceError) -> Response:
    headers = _UNAUTHORIZED_HEADERS if exc.status == 401 else None
    return error_response(exc.status, exc.message, exc.code, exc.details(), headers)


async def _service_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    return service_error_response(exc)


async def validation_error_response(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    details = [_describe(error) for error in exc.errors()]
    content_type = request.headers.get("content-type", "")
    if request.method in {"POST", "PATCH", "PUT"} and "json" not in content_type:
        message = (
            f"Send the body as JSON with 'Content-Type: application/json' (got '{content_type or 'none'}')"
        )
        return error_response(400, message, "unsupported_content_type", details)
    if any(d["type"] == "json_invalid" for d in details):
        return error_response(400, details[0]["message"], "malformed_json", details)
    summary = "; ".join(f"{d['field']}: {d['message']}" if d["field"] else d["message"] for d in details[:3])
    more = f" (and {len(details) - 3} more)" if len(details) > 3 else ""
    return error_response(400, f"Invalid request: {summary}{more}", "invalid_request", details)


def _describe(error: dict[str, Any]) -> dict[str, Any]:
    """A pydantic error as a detail naming the field in wire (camelCase, dotted) form."""
    location, kind = tuple(error.get("loc", ())), error.get("type", "")
    field = ".".join(str(part) for part in location[1:]) or None
    if kind == "json_invalid":
        reason = error.get("ctx", {}).get("error", "not valid JSON")
        return {"field": None, "message": f"Malformed JSON body: {reason}", "type": kind}
    if kind == "extra_forbidden":
        return {"field": field, "message": "is not a known field", "type": kind}
    if kind == "missing":
        message = "is required" if field else "a JSON request body is required"
        return {"field": field, "message": message, "type": kind}
    if field is None and kind in {"model_attributes_type", "dict_type", "model_type"}:
        return {"field": None, "message": "the request body must be a JSON object", "type": kind}
    return {"field": field, "message": _lower_first(error.get("msg", "is invalid")), "type": kind}


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        message = f"No such endpoint: {request.method} {request.url.path}"
        return error_response(404, message, "not_found")
    if exc.status_code == 405:
        allowed = _allowed_methods(request)
        message = f"Method {request.method} is not allowed on {request.url.path}; use {allowed}"
        return error_response(405, message, "method_not_allowed", headers={"Allow": allowed})
    code = "bad_request" if exc.status_code == 400 else f"http_{exc.status_code}"
    return error_response(exc.status_code, str(exc.detail), code, headers=exc.headers)


def _allowed_methods(request: Request) -> str:
    """The methods of the path template that serves this path: the router names only the first
    route's, and /environments/list must not advertise what /environments/{id} takes."""
    path = request.url.path
    routes = [route for route in app_routes(request.app) if getattr(route, "methods", None)]
    template = next((route.path_format for route in routes if route.path_regex.match(path)), None)
    methods = {method for route in routes if route.path_format == template for method in route.methods}
    return ", ".join(sorted(methods))


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    logger.exception("Unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(
        500, "The service failed to handle this request; it has been logged.", "internal_error"
    )


async def _database_error(request: Request, exc: Exception) -> Response:
    """A connection the database dropped under a request (a restart): the pool has replaced its
    connections, so the same request sent again will be served."""
    assert isinstance(exc, DBAPIError)
    if not exc.connection_invalidated:
        return await _unexpected_error(request, exc)
    logger.warning("Lost the database connection on %s %s: %s", request.method, request.url.path, exc.orig)
    return error_response(503, DATABASE_LOST, "database_unavailable", headers={"Retry-After": "1"})


DATABASE_LOST = "The connection to the database was lost while handling this request; retry it"


async def send_database_lost(send: Send, scope: Scope, exc: DBAPIError) -> None:
    """The same answer, from the edge, for a connection dropped while it resolved the caller."""
    logger.warning("Lost the database connection on %s %s: %s", scope["method"], scope["path"], exc.orig)
    await send_error(send, 503, DATABASE_LOST, "database_unavailable", headers=[(b"retry-after", b"1")])


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(RequestValidationError, validation_error_response)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(Exception, _unexpected_error)
