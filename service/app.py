"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio import to_thread
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from api.common import ErrorBody
from service import __version__
from service.bodylimit import BodyLimitMiddleware
from service.db import Database
from service.errors import install_error_handlers
from service.health import HealthCheck
from service.idempotency import middleware as idempotency
from service.openapi_ids import operation_id
from service.ratelimit import Limiter, MemoryLimiter, RateLimitMiddleware, RedisLimiter
from service.routes import API_PREFIX, API_ROUTERS
from service.settings import Settings
from service.worker import start_in_thread

UNLIMITED_PATHS = frozenset({"/api/health", "/api/docs", "/api/openapi.json"})


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    # The engine holds pool_size connections plus as many again in overflow. Requests take at most
    # pool_size of them (service.deps), which leaves the overflow for work that holds a connection
    # only inside one thread (the after-response key touch, the health ping): at most `threads`.
    pool_size = max(settings.db_pool_size, settings.threads)
    db = Database(settings.resolved_database_url, pool_size=pool_size)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # On two cores a big thread pool mostly contends for locks; size it on purpose.
        to_thread.current_default_thread_limiter().total_tokens = settings.threads
        worker = start_in_thread(db, settings) if settings.run_worker else None
        yield
        if worker is not None:
            worker[0].stop()
            worker[1].join(timeout=30)
        db.dispose()

    app = FastAPI(
        title="Orgdeck Organization Management Service",
        version=__version__,
        openapi_url="/api/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
    )
    app.state.settings = settings
    app.state.db = db
    app.state.session_slots = anyio.Semaphore(pool_size)
    app.state.health = HealthCheck(db)
    install_error_handlers(app)
    for router in API_ROUTERS:
        app.include_router(router, prefix=API_PREFIX)
    # Innermost: a request refused for its size or rate never claims an Idempotency-Key.
    app.add_middleware(
        idempotency.IdempotencyMiddleware, db=db, slots=app.state.session_slots, settings=settings
    )
    if settings.rate_limit > 0:
        app.add_middleware(RateLimitMiddleware, limiter=_limiter(settings), exempt_paths=UNLIMITED_PATHS)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _limiter(settings: Settings) -> Limiter:
    if settings.redis_url:
        return RedisLimiter(settings.redis_url, settings.rate_limit, settings.rate_limit_window_seconds)
    return MemoryLimiter(settings.rate_limit, settings.rate_limit_window_seconds)


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema, with validation failures documented as our 400 instead of its 422."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    error_schema = ErrorBody.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
    schemas.update(error_schema.pop("$defs", {}))
    schemas["ErrorBody"] = error_schema
    for key in [k for k in schemas if k in {"HTTPValidationError", "ValidationError"}]:
        del schemas[key]
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            responses.setdefault("400", {"description": "Invalid input; `message` names the field", **error})
            responses.setdefault(
                "401", {"description": "Missing, malformed, unknown or revoked key", **error}
            )
            responses.setdefault("429", {"description": "Rate limited; see Retry-After", **error})
    idempotency.document(schema)
    app.openapi_schema = schema
    return schema
