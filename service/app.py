"""The FastAPI application factory: every router registered in one place, and the request path
assembled around them (service.http), with what it needs of the areas: API keys as credentials
and the Idempotency-Key's middleware."""

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

from api.version import VERSION
from service.agents.routes import router as agents_router
from service.api_keys.routes import router as api_keys_router
from service.api_keys.service import authenticate
from service.audit.routes import router as audit_router
from service.changes.routes import router as changes_router
from service.deployments.routes import router as deployments_router
from service.environments.routes import router as environments_router
from service.fleets.routes import router as fleets_router
from service.governance.routes import router as governance_router
from service.http.auth import Authentication
from service.http.bodylimit import BodyLimit
from service.http.docs import install_docs
from service.http.edge import EdgeMiddleware
from service.http.errors import install_error_handlers
from service.http.health import HealthCheck
from service.http.observation import RequestObserver
from service.http.openapi import openapi_document
from service.http.query import LISTS as PARSED_QUERY_LISTS
from service.http.ratelimit import Limiter, MemoryLimiter, RedisLimiter
from service.http.routeindex import RouteIndex, api_routes, plain_routes
from service.http.routing import authorized_before_validated
from service.idempotency import middleware as idempotency
from service.members.routes import router as members_router
from service.notifications.routes import router as notifications_router
from service.observability import tracing
from service.providers.routes import router as providers_router
from service.redaction import logs as log_redaction
from service.registries.routes import router as registries_router
from service.settings import Settings
from service.signin.routes import router as workload_identities_router
from service.signin.routes import sign_out_router
from service.signin.service import TokenAuthenticator, authenticator
from service.storage.db import Database
from service.system.metrics import PATH as METRICS_PATH
from service.system.metrics import MetricsEndpoint
from service.system.routes import router as system_router
from service.tools.routes import deployments_router as tool_deployments_router
from service.tools.routes import router as tools_router
from service.worker import start_in_thread

# The API's routers, served through one index (service.http.routeindex) in this order:
# tool_deployments_router (/agents/tool-…) must stay before any router with /agents/{stableKey}.
API_ROUTERS = (
    system_router,
    api_keys_router,
    members_router,
    audit_router,
    registries_router,
    environments_router,
    tools_router,
    tool_deployments_router,
    providers_router,
    governance_router,
    deployments_router,
    agents_router,
    fleets_router,
    notifications_router,
    changes_router,
    workload_identities_router,
    sign_out_router,
)
OPENAPI_URL, DOCS_URL, REDOC_URL = "/api/openapi.json", "/api/docs", "/api/redoc"
# Polled by load balancers, orchestrators and Prometheus, or read by a person's browser: never limited.
UNLIMITED_PATHS = frozenset(
    {"/api/health", "/api/health/live", "/api/health/ready", METRICS_PATH, DOCS_URL, REDOC_URL, OPENAPI_URL}
)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    log_redaction.install()
    # The engine holds pool_size connections plus as many again in overflow. A request holds one only
    # inside the worker thread that runs it (service.http.routing), so at most `threads` at once; the
    # overflow is for the credentials resolved at the edge, the idempotency claims, the after-response
    # key touch and the health ping.
    pool_size = max(settings.db_pool_size, settings.threads)
    db = Database(settings.resolved_database_url, pool_size=pool_size)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # On two cores a big thread pool mostly contends for locks; size it on purpose. Routes run
        # in the loop's executor (service.http.routing), anything else in anyio's.
        to_thread.current_default_thread_limiter().total_tokens = settings.threads
        routes = ThreadPoolExecutor(settings.threads, thread_name_prefix="orgdeck-route")
        asyncio.get_running_loop().set_default_executor(routes)
        worker = start_in_thread(db, settings) if settings.run_worker else None
        health.attach_worker(worker.worker.silence if worker is not None else None)
        # What exists once the app is up (routes, models, mappers) lives as long as the process:
        # out of the collector's sight, a full collection no longer walks it, a pause of tens of
        # milliseconds in the middle of requests. A process that held the collector through its
        # start (python -m service) made next to no garbage meanwhile, a thousand objects, which
        # are not worth a walk through everything (a tenth of a second of a start).
        if gc.isenabled():
            gc.collect()
        gc.freeze()
        gc.enable()
        yield
        if worker is not None:
            worker.stop()
        routes.shutdown(wait=False)
        db.dispose()

    app = FastAPI(
        title="Orgdeck Organization Management Service",
        version=VERSION,
        openapi_url=OPENAPI_URL,
        docs_url=None,  # served from installed files: service.http.docs
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.db = db
    health = app.state.health = HealthCheck(db)
    install_error_handlers(app)
    app.add_exception_handler(RequestValidationError, authorized_before_validated)
    app.router.routes.append(RouteIndex(route for router in API_ROUTERS for route in router.routes))
    install_docs(app, openapi_url=OPENAPI_URL, docs_url=DOCS_URL, redoc_url=REDOC_URL)
    app.add_route(METRICS_PATH, MetricsEndpoint(db, settings.metrics_access).answer, include_in_schema=False)
    # Innermost: a request refused for its size, its rate or its input never claims an Idempotency-Key.
    app.add_middleware(idempotency.IdempotencyMiddleware, db=db, settings=settings)
    app.add_middleware(
        EdgeMiddleware,
        body_limit=BodyLimit(settings.max_body_bytes),
        limiter=_limiter(settings) if settings.rate_limit > 0 else None,
        authentication=Authentication(
            db, authenticator(api_keys=authenticate, tokens=TokenAuthenticator(db, settings))
        ),
        exempt_paths=UNLIMITED_PATHS,
        list_parameters=list_query_parameters(app),
        observe=RequestObserver(plain_routes=plain_routes(app), log_requests=settings.logs_requests),
    )
    # Probes and scrapes are polled every few seconds: a trace of each would bury the requests.
    tracing.instrument_app(app, excluded_paths=",".join(UNLIMITED_PATHS - {OPENAPI_URL}))
    tracing.instrument_engine(db.engine)
    app.openapi = lambda: openapi_document(  # type: ignore[method-assign]
        app, unlimited_paths=UNLIMITED_PATHS, additions=(idempotency.document,)
    )
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
