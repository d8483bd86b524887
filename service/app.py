"""The FastAPI application factory."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, get_args, get_origin

from anyio import to_thread
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from api.common import ErrorBody
from service import __version__, logredact
from service.bodylimit import BodyLimit
from service.db import Database
from service.deps import PUBLIC_READ, least_role
from service.edge import EdgeMiddleware
from service.errors import install_error_handlers
from service.health import HealthCheck
from service.idempotency import middleware as idempotency
from service.query import LISTS as PARSED_QUERY_LISTS
from service.ratelimit import Limiter, MemoryLimiter, RedisLimiter
from service.routeindex import RouteIndex, api_routes
from service.routes import API_ROUTERS
from service.routing import authorized_before_validated
from service.settings import Settings
from service.worker import start_in_thread

UNLIMITED_PATHS = frozenset({"/api/health", "/api/docs", "/api/openapi.json"})


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    logredact.install()
    # The engine holds pool_size connections plus as many again in overflow. A request holds one only
    # inside the worker thread that runs it (service.routing), so at most `threads` at once; the
    # overflow is for the idempotency claims, the after-response key touch and the health ping.
    pool_size = max(settings.db_pool_size, settings.threads)
    db = Database(settings.resolved_database_url, pool_size=pool_size)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # On two cores a big thread pool mostly contends for locks; size it on purpose. Routes run
        # in the loop's executor (service.routing), anything else in anyio's.
        to_thread.current_default_thread_limiter().total_tokens = settings.threads
        routes = ThreadPoolExecutor(settings.threads, thread_name_prefix="orgdeck-route")
        asyncio.get_running_loop().set_default_executor(routes)
        worker = start_in_thread(db, settings) if settings.run_worker else None
        # What exists once the app is up (routes, models, mappers) lives as long as the process:
        # out of the collector's sight, a full collection no longer walks it, a pause of tens of
        # milliseconds in the middle of requests.
        gc.collect()
        gc.freeze()
        yield
        if worker is not None:
            worker[0].stop()
            worker[1].join(timeout=30)
        routes.shutdown(wait=False)
        db.dispose()

    app = FastAPI(
        title="Orgdeck Organization Management Service",
        version=__version__,
        openapi_url="/api/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.db = db
    app.state.health = HealthCheck(db)
    install_error_handlers(app)
    app.add_exception_handler(RequestValidationError, authorized_before_validated)
    app.router.routes.append(RouteIndex(route for router in API_ROUTERS for route in router.routes))
    # Innermost: a request refused for its size, its rate or its input never claims an Idempotency-Key.
    app.add_middleware(idempotency.IdempotencyMiddleware, db=db, settings=settings)
    app.add_middleware(
        EdgeMiddleware,
        body_limit=BodyLimit(settings.max_body_bytes),
        limiter=_limiter(settings) if settings.rate_limit > 0 else None,
        exempt_paths=UNLIMITED_PATHS,
        list_parameters=list_query_parameters(app),
    )
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def list_query_parameters(app: FastAPI) -> frozenset[str]:
    """Names of the query parameters some route takes as a list (`status=a&status=b`)."""
    names = set(PARSED_QUERY_LISTS)  # for the routes that read their query string themselves
    for route in api_routes(app):
        names.update(p.alias for p in route.dependant.query_params if _is_list(p.field_info.annotation))
    return frozenset(names)


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) is list or any(get_origin(arg) is list for arg in get_args(annotation))


def _limiter(settings: Settings) -> Limiter:
    if settings.redis_url:
        return RedisLimiter(settings.redis_url, settings.rate_limit, settings.rate_limit_window_seconds)
    return MemoryLimiter(settings.rate_limit, settings.rate_limit_window_seconds)


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema, told the truth: validation failures are our 400 (never its 422), every
    operation names the keys it takes and documents the errors it can answer."""
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
                _document_operation(schema["paths"][route.path_format][method.lower()], route)
    idempotency.document(schema)
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


def _document_operation(operation: dict[str, Any], route: APIRoute) -> None:
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
    if route.path_format not in UNLIMITED_PATHS:
        statuses.append("429")
    for status in statuses:
        responses.setdefault(status, {"description": _ERRORS[status], **_ERROR_CONTENT})


_ERROR_CONTENT = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
